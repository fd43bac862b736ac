// The webhook definitions (webhook/webhook_configurations.h) name exactly the
// paths the operator serves (operator/admission/admission_handlers.h).

#include <set>
#include <string>

#include <gtest/gtest.h>

#include "operator/admission/admission_handlers.h"
#include "operator/webhook/webhook_configurations.h"

namespace allocguard::manager {
namespace {

TEST(WebhookDefinitionsTest, EveryDefinedWebhookIsServedAndEveryServedPathDefined) {
  const std::set<std::string> served = {
      admission::kPodMutationPath,          admission::kDeploymentMutationPath,
      admission::kStatefulSetMutationPath,  admission::kDaemonSetMutationPath,
      admission::kDeploymentValidationPath, admission::kStatefulSetValidationPath,
      admission::kDaemonSetValidationPath,  admission::kPolicyValidationPath,
      admission::kCanaryValidationPath};
  std::set<std::string> defined;
  for (const webhook::WebhookDefinition& def : webhook::WebhookDefinitions()) {
    defined.insert(def.path);
  }
  EXPECT_EQ(defined, served);
}

}  // namespace
}  // namespace allocguard::manager
