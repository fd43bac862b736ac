#include "operator/webhook/webhook_configurations.h"

#include <sstream>

#include "operator/api/types.h"

namespace allocguard::webhook {
namespace {

using nlohmann::json;

std::vector<WebhookDefinition> MakeDefinitions() {
  const std::vector<std::string> create = {"CREATE"};
  const std::vector<std::string> create_update = {"CREATE", "UPDATE"};
  std::vector<WebhookDefinition> defs;
  defs.push_back({.kind = WebhookKind::kMutating,
                  .name = "pods.allocguard.io",
                  .path = "/mutate-v1-pod",
                  .rules = {{create, "", "v1", "pods"}},
                  .reinvoke_if_needed = true,
                  .user_object_selector = true,
                  .comment = {},
                  .reinvocation_comment = "Injects after other mutating webhooks changed the Pod, "
                                          "too."});
  defs.push_back({.kind = WebhookKind::kMutating,
                  .name = "deployments.allocguard.io",
                  .path = "/mutate-apps-v1-deployment",
                  .rules = {{create_update, "apps", "v1", "deployments"}},
                  .user_object_selector = true});
  defs.push_back(
      {.kind = WebhookKind::kMutating,
       .name = "statefulsets.allocguard.io",
       .path = "/mutate-apps-v1-statefulset",
       .rules = {{create_update, "apps", "v1", "statefulsets"}},
       .user_object_selector = true,
       .comment = {"Holds a governed StatefulSet's new template under Enforce by pinning",
                   "its partition, and keeps the pin while held."}});
  defs.push_back(
      {.kind = WebhookKind::kMutating,
       .name = "daemonsets.allocguard.io",
       .path = "/mutate-apps-v1-daemonset",
       .rules = {{create_update, "apps", "v1", "daemonsets"}},
       .user_object_selector = true,
       .comment = {"Holds a governed DaemonSet's new template under Enforce by switching",
                   "its update strategy to OnDelete, and keeps it while held."}});
  defs.push_back(
      {.kind = WebhookKind::kValidating,
       .name = "deployments.validate.allocguard.io",
       .path = "/validate-apps-v1-deployment",
       .rules = {{{"UPDATE"}, "apps", "v1", "deployments"}},
       .user_object_selector = true,
       .comment = {"Refuses unpausing a held Deployment by hand without the override",
                   "annotation, and lifting a hold (the override, removing the mark, opting",
                   "out) by users without the override permission."}});
  defs.push_back(
      {.kind = WebhookKind::kValidating,
       .name = "statefulsets.validate.allocguard.io",
       .path = "/validate-apps-v1-statefulset",
       .rules = {{{"UPDATE"}, "apps", "v1", "statefulsets"}},
       .user_object_selector = true,
       .comment = {"Refuses lowering a held StatefulSet's partition by hand without the",
                   "override annotation, and lifting its hold (the override, removing the",
                   "mark, opting out) by users without the override permission."}});
  defs.push_back(
      {.kind = WebhookKind::kValidating,
       .name = "daemonsets.validate.allocguard.io",
       .path = "/validate-apps-v1-daemonset",
       .rules = {{{"UPDATE"}, "apps", "v1", "daemonsets"}},
       .user_object_selector = true,
       .comment = {"Refuses switching a held DaemonSet back from OnDelete by hand without",
                   "the override annotation, and lifting its hold (the override, removing",
                   "the mark, opting out) by users without the override permission."}});
  defs.push_back(
      {.kind = WebhookKind::kValidating,
       .name = "allocatorpolicies.validate.allocguard.io",
       .path = "/validate-allocguard-io-v1alpha1-allocatorpolicy",
       .rules = {{{"CREATE", "UPDATE", "DELETE"}, api::kGroup, api::kVersion, "allocatorpolicies"}},
       .comment = {"Refuses a policy whose selector overlaps another policy's, and deleting",
                   "or relaxing an Enforce policy that holds a Deployment, StatefulSet or",
                   "DaemonSet by users without the override permission."}});
  defs.push_back(
      {.kind = WebhookKind::kValidating,
       .name = "replaycanaries.validate.allocguard.io",
       .path = "/validate-allocguard-io-v1alpha1-replaycanary",
       .rules = {{create_update, api::kGroup, api::kVersion, "replaycanaries"}},
       .comment = {"Refuses a ReplayCanary the operator could not read (naming the field),",
                   "and a hand-made one whose creator may not create Jobs in the namespace or",
                   "whose template asks for host access it does not share with its target."}});
  return defs;
}

// --- URL mode (the operator applies) -------------------------------------------

// The namespaces no webhook is ever called for.
json NamespaceSelector(const std::string& operator_namespace) {
  return {{"matchExpressions",
           {{{"key", "kubernetes.io/metadata.name"},
             {"operator", "NotIn"},
             {"values", {"kube-system", operator_namespace}}}}}};
}

json RuleJson(const WebhookRule& rule) {
  return {{"operations", rule.operations},
          {"apiGroups", {rule.api_group}},
          {"apiVersions", {rule.api_version}},
          {"resources", {rule.resource}},
          {"scope", "Namespaced"}};
}

json WebhookJson(const WebhookDefinition& def, const UrlWebhookConfigurationOptions& options) {
  json client_config = {{"url", options.base_url + def.path}};
  if (!options.ca_bundle_base64.empty()) client_config["caBundle"] = options.ca_bundle_base64;
  json rules = json::array();
  for (const WebhookRule& rule : def.rules) rules.push_back(RuleJson(rule));
  json hook = {{"name", def.name},
               {"clientConfig", client_config},
               {"rules", std::move(rules)},
               // Fail open: an operator outage must never stop Pods or
               // rollouts; what was admitted meanwhile shows up as drift.
               {"failurePolicy", kDefaultFailurePolicy},
               {"sideEffects", "NoneOnDryRun"},
               {"admissionReviewVersions", {"v1"}},
               {"timeoutSeconds", kDefaultTimeoutSeconds},
               {"matchPolicy", "Equivalent"},
               {"namespaceSelector", NamespaceSelector(options.operator_namespace)}};
  if (def.reinvoke_if_needed) hook["reinvocationPolicy"] = "IfNeeded";
  return hook;
}

json Configuration(WebhookKind kind, const std::string& name,
                   const UrlWebhookConfigurationOptions& options) {
  json webhooks = json::array();
  for (const WebhookDefinition& def : WebhookDefinitions()) {
    if (def.kind == kind) webhooks.push_back(WebhookJson(def, options));
  }
  return {{"apiVersion", "admissionregistration.k8s.io/v1"},
          {"kind", kind == WebhookKind::kMutating ? "MutatingWebhookConfiguration"
                                                  : "ValidatingWebhookConfiguration"},
          {"metadata", {{"name", name}}},
          {"webhooks", std::move(webhooks)}};
}

// --- the chart's template ----------------------------------------------------------

constexpr char kChartHeader[] = R"({{- /*
Generated by webhook_chart_template from operator/webhook/webhook_configurations.cc,
the definition the operator applies too; edit that and run
  build/release/operator/webhook/webhook_chart_template --write charts/allocguard/templates/webhooks.yaml
(chart_webhooks_test fails while this file differs).

The chart owns both webhook configurations, so `helm uninstall` removes them
and never leaves the API server calling a webhook that is gone.

caBundle is deliberately not rendered. The operator (self-managed
certificates) or cert-manager's CA injector writes it at run time. Helm 3
upgrades with a three-way strategic merge patch, and `webhooks` merges by
`name`: a field that is in neither the old nor the new manifest is left as
the cluster has it, so an upgrade keeps the caBundle that was written. (A
rendered caBundle, even an empty one, would be reset by every upgrade.)
*/ -}}
{{- $name := include "allocguard.webhookConfigurationName" . -}}
)";

constexpr char kChartMetadata[] = R"(metadata:
  name: {{ $name }}
  labels:
    {{- include "allocguard.labels" . | nindent 4 }}
  {{- if .Values.certManager.enabled }}
  annotations:
    cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "allocguard.certificateName" . }}
  {{- end }}
webhooks:
)";

std::string YamlList(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += "\"" + items[i] + "\"";
  }
  return out + "]";
}

void RenderChartWebhook(const WebhookDefinition& def, std::ostringstream& out) {
  for (const std::string& line : def.comment) out << "  # " << line << "\n";
  out << "  - name: " << def.name << "\n";
  out << R"(    {{- include "allocguard.clientConfig" (dict "root" . "path" ")" << def.path
      << "\") | nindent 4 }}\n";
  out << "    rules:\n";
  for (const WebhookRule& rule : def.rules) {
    out << "      - operations: " << YamlList(rule.operations) << "\n";
    out << "        apiGroups: " << YamlList({rule.api_group}) << "\n";
    out << "        apiVersions: " << YamlList({rule.api_version}) << "\n";
    out << "        resources: " << YamlList({rule.resource}) << "\n";
    out << "        scope: Namespaced\n";
  }
  if (def.reinvoke_if_needed) {
    if (!def.reinvocation_comment.empty()) out << "    # " << def.reinvocation_comment << "\n";
    out << "    reinvocationPolicy: IfNeeded\n";
  }
  out << "    {{- include \"allocguard.webhookCommon\" . | nindent 4 }}\n";
  if (def.user_object_selector) {
    out << "    {{- with .Values.webhook.objectSelector }}\n"
        << "    objectSelector:\n"
        << "      {{- toYaml . | nindent 6 }}\n"
        << "    {{- end }}\n";
  }
}

}  // namespace

const std::vector<WebhookDefinition>& WebhookDefinitions() {
  static const std::vector<WebhookDefinition>* defs =
      new std::vector<WebhookDefinition>(MakeDefinitions());
  return *defs;
}

WebhookConfigurations BuildWebhookConfigurations(const UrlWebhookConfigurationOptions& options) {
  return {Configuration(WebhookKind::kMutating, options.mutating_name, options),
          Configuration(WebhookKind::kValidating, options.validating_name, options)};
}

std::string RenderChartWebhooksTemplate() {
  std::ostringstream out;
  out << kChartHeader;
  bool first = true;
  for (WebhookKind kind : {WebhookKind::kMutating, WebhookKind::kValidating}) {
    if (!first) out << "---\n";
    first = false;
    out << "apiVersion: admissionregistration.k8s.io/v1\n"
        << "kind: "
        << (kind == WebhookKind::kMutating ? "MutatingWebhookConfiguration"
                                           : "ValidatingWebhookConfiguration")
        << "\n"
        << kChartMetadata;
    for (const WebhookDefinition& def : WebhookDefinitions()) {
      if (def.kind == kind) RenderChartWebhook(def, out);
    }
  }
  return out.str();
}

}  // namespace allocguard::webhook
