#include "operator/webhook/webhook_configurations.h"

#include <set>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

namespace allocguard::webhook {
namespace {

using nlohmann::json;

// The configurations as the operator wrote them before they were generated
// from WebhookDefinitions(), spelled out by hand.
json ExpectedWebhook(const std::string& name, const std::string& url, json rules) {
  return {{"name", name},
          {"clientConfig", {{"url", url}, {"caBundle", "Q0E="}}},
          {"rules", std::move(rules)},
          {"failurePolicy", "Ignore"},
          {"sideEffects", "NoneOnDryRun"},
          {"admissionReviewVersions", {"v1"}},
          {"timeoutSeconds", 5},
          {"matchPolicy", "Equivalent"},
          {"namespaceSelector",
           {{"matchExpressions",
             {{{"key", "kubernetes.io/metadata.name"},
               {"operator", "NotIn"},
               {"values", {"kube-system", "ops"}}}}}}}};
}

json ExpectedRule(std::vector<std::string> operations, const std::string& group,
                  const std::string& version, const std::string& resource) {
  return {{"operations", operations},
          {"apiGroups", {group}},
          {"apiVersions", {version}},
          {"resources", {resource}},
          {"scope", "Namespaced"}};
}

UrlWebhookConfigurationOptions Options() {
  return {.base_url = "https://127.0.0.1:9443",
          .ca_bundle_base64 = "Q0E=",
          .operator_namespace = "ops",
          .mutating_name = "ag-m",
          .validating_name = "ag-v"};
}

TEST(WebhookConfigurationsTest, UrlModeMatchesTheHandWrittenConfigurations) {
  const std::string base = "https://127.0.0.1:9443";
  json pods = ExpectedWebhook("pods.allocguard.io", base + "/mutate-v1-pod",
                              json::array({ExpectedRule({"CREATE"}, "", "v1", "pods")}));
  pods["reinvocationPolicy"] = "IfNeeded";
  json mutating = {
      {"apiVersion", "admissionregistration.k8s.io/v1"},
      {"kind", "MutatingWebhookConfiguration"},
      {"metadata", {{"name", "ag-m"}}},
      {"webhooks",
       {pods,
        ExpectedWebhook(
            "deployments.allocguard.io", base + "/mutate-apps-v1-deployment",
            json::array({ExpectedRule({"CREATE", "UPDATE"}, "apps", "v1", "deployments")})),
        ExpectedWebhook(
            "statefulsets.allocguard.io", base + "/mutate-apps-v1-statefulset",
            json::array({ExpectedRule({"CREATE", "UPDATE"}, "apps", "v1", "statefulsets")})),
        ExpectedWebhook(
            "daemonsets.allocguard.io", base + "/mutate-apps-v1-daemonset",
            json::array({ExpectedRule({"CREATE", "UPDATE"}, "apps", "v1", "daemonsets")}))}}};
  json validating = {
      {"apiVersion", "admissionregistration.k8s.io/v1"},
      {"kind", "ValidatingWebhookConfiguration"},
      {"metadata", {{"name", "ag-v"}}},
      {"webhooks",
       {ExpectedWebhook("deployments.validate.allocguard.io", base + "/validate-apps-v1-deployment",
                        json::array({ExpectedRule({"UPDATE"}, "apps", "v1", "deployments")})),
        ExpectedWebhook("statefulsets.validate.allocguard.io",
                        base + "/validate-apps-v1-statefulset",
                        json::array({ExpectedRule({"UPDATE"}, "apps", "v1", "statefulsets")})),
        ExpectedWebhook("daemonsets.validate.allocguard.io", base + "/validate-apps-v1-daemonset",
                        json::array({ExpectedRule({"UPDATE"}, "apps", "v1", "daemonsets")})),
        ExpectedWebhook("allocatorpolicies.validate.allocguard.io",
                        base + "/validate-allocguard-io-v1alpha1-allocatorpolicy",
                        json::array({ExpectedRule({"CREATE", "UPDATE", "DELETE"}, "allocguard.io",
                                                  "v1alpha1", "allocatorpolicies")})),
        ExpectedWebhook("replaycanaries.validate.allocguard.io",
                        base + "/validate-allocguard-io-v1alpha1-replaycanary",
                        json::array({ExpectedRule({"CREATE", "UPDATE"}, "allocguard.io", "v1alpha1",
                                                  "replaycanaries")}))}}};
  WebhookConfigurations got = BuildWebhookConfigurations(Options());
  EXPECT_EQ(got.mutating, mutating) << got.mutating.dump(2);
  EXPECT_EQ(got.validating, validating) << got.validating.dump(2);
}

TEST(WebhookConfigurationsTest, NoCaBundleFieldWithoutABundle) {
  UrlWebhookConfigurationOptions options = Options();
  options.ca_bundle_base64.clear();
  WebhookConfigurations got = BuildWebhookConfigurations(options);
  for (const json* config : {&got.mutating, &got.validating}) {
    for (const json& hook : (*config)["webhooks"]) {
      EXPECT_FALSE(hook["clientConfig"].contains("caBundle")) << hook["name"];
    }
  }
}

TEST(WebhookConfigurationsTest, NamesAndPathsAreUniqueAndMutatingComeFirst) {
  std::set<std::string> names;
  std::set<std::string> paths;
  bool seen_validating = false;
  for (const WebhookDefinition& def : WebhookDefinitions()) {
    EXPECT_TRUE(names.insert(def.name).second) << def.name;
    EXPECT_TRUE(paths.insert(def.path).second) << def.path;
    EXPECT_FALSE(def.rules.empty()) << def.name;
    if (def.kind == WebhookKind::kValidating) seen_validating = true;
    EXPECT_FALSE(seen_validating && def.kind == WebhookKind::kMutating) << def.name;
    EXPECT_FALSE(def.kind == WebhookKind::kValidating && def.reinvoke_if_needed) << def.name;
  }
  EXPECT_EQ(names.size(), 9u);
}

TEST(WebhookConfigurationsTest, ChartTemplateNamesEveryWebhookAndPathOnce) {
  const std::string tpl = RenderChartWebhooksTemplate();
  for (const WebhookDefinition& def : WebhookDefinitions()) {
    const std::string name_line = "  - name: " + def.name + "\n";
    ASSERT_NE(tpl.find(name_line), std::string::npos) << def.name;
    EXPECT_EQ(tpl.find(name_line), tpl.rfind(name_line)) << def.name;
    EXPECT_NE(tpl.find("\"path\" \"" + def.path + "\""), std::string::npos) << def.path;
  }
  EXPECT_NE(tpl.find("kind: MutatingWebhookConfiguration\n"), std::string::npos);
  EXPECT_NE(tpl.find("---\napiVersion: admissionregistration.k8s.io/v1\n"
                     "kind: ValidatingWebhookConfiguration\n"),
            std::string::npos);
  // caBundle is left to the operator or cert-manager (see the template's header).
  EXPECT_EQ(tpl.find("caBundle:"), std::string::npos);
}

// The operator's URL mode writes what a default chart install renders.
TEST(WebhookConfigurationsTest, DefaultsAreTheChartsDefaults) {
  YAML::Node values =
      YAML::LoadFile(std::string(ALLOCGUARD_SOURCE_DIR) + "/charts/allocguard/values.yaml");
  EXPECT_EQ(values["webhook"]["failurePolicy"].as<std::string>(), kDefaultFailurePolicy);
  EXPECT_EQ(values["webhook"]["timeoutSeconds"].as<int>(), kDefaultTimeoutSeconds);
}

}  // namespace
}  // namespace allocguard::webhook
