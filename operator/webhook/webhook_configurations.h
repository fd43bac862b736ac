#pragma once

// The admission webhooks allocguard registers, defined once. Two writers read
// this table:
//   - the operator, which in URL mode (a local operator, the control-plane
//     tests) applies the MutatingWebhookConfiguration and the
//     ValidatingWebhookConfiguration itself (BuildWebhookConfigurations);
//   - the Helm chart, whose templates/webhooks.yaml is generated from it
//     (RenderChartWebhooksTemplate, by the webhook_chart_template tool) and
//     checked by the chart_webhooks_test, so the two cannot drift apart.
//
// What a webhook is (name, path, rules, reinvocation, whether the user's
// objectSelector applies) lives here; how it is reached (a URL or the
// chart's Service) and the chart's tunables (failurePolicy, timeoutSeconds,
// the user's selectors) are the writer's.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace allocguard::webhook {

enum class WebhookKind { kMutating, kValidating };

struct WebhookRule {
  std::vector<std::string> operations;  // "CREATE", "UPDATE", "DELETE"
  std::string api_group;                // "" for the core group
  std::string api_version;
  std::string resource;  // plural, e.g. "pods"
};

struct WebhookDefinition {
  WebhookKind kind;
  std::string name;  // e.g. "pods.allocguard.io"
  std::string path;  // the path the operator serves it on
  std::vector<WebhookRule> rules;
  // reinvocationPolicy IfNeeded (mutating only): runs again after other
  // mutating webhooks changed the object.
  bool reinvoke_if_needed = false;
  // The chart's webhook.objectSelector applies (Pods and workloads only).
  bool user_object_selector = false;
  // Why the webhook exists, as the chart's template says it (one line each).
  std::vector<std::string> comment;
  // A comment on the reinvocationPolicy line, when reinvoke_if_needed.
  std::string reinvocation_comment;
};

// Every webhook, mutating ones first, in the order they are registered.
const std::vector<WebhookDefinition>& WebhookDefinitions();

// The defaults the operator writes and the chart's values.yaml ships.
inline constexpr char kDefaultFailurePolicy[] = "Ignore";
inline constexpr int kDefaultTimeoutSeconds = 5;

struct UrlWebhookConfigurationOptions {
  std::string base_url;            // clientConfig.url = base_url + path
  std::string ca_bundle_base64;    // "": no caBundle field
  std::string operator_namespace;  // never sent to a webhook, nor kube-system
  std::string mutating_name;
  std::string validating_name;
};

struct WebhookConfigurations {
  nlohmann::json mutating;    // a MutatingWebhookConfiguration
  nlohmann::json validating;  // a ValidatingWebhookConfiguration
};

// Both configurations with clientConfig.url, failurePolicy Ignore and
// timeoutSeconds 5, as the operator applies them in URL mode.
WebhookConfigurations BuildWebhookConfigurations(const UrlWebhookConfigurationOptions& options);

// The text of charts/allocguard/templates/webhooks.yaml.
std::string RenderChartWebhooksTemplate();

}  // namespace allocguard::webhook
