#pragma once

// For the decision tests: the ReplayCanary the operator itself would create
// for a workload's template under a policy (BuildReplayCanary), with a
// status whose candidate variant was measured on that very spec, so that
// CanaryDistrust trusts it. A test that wants an untrusted canary tampers
// with the result.

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "controllers/canary_decision.h"
#include "controllers/rollout_decision.h"
#include "operator/api/deployment.h"
#include "operator/api/policy.h"

namespace allocguard::controllers::testing {

// The same for a workload of `kind`.
inline nlohmann::json TrustedCanaryOf(WorkloadKind kind, const nlohmann::json& workload,
                                      const api::AllocatorPolicy& policy,
                                      const std::string& template_hash, const std::string& phase,
                                      const std::string& verdict,
                                      const std::string& flat_variant = "") {
  // The template the workload has now (the canary is of its template).
  EXPECT_EQ(template_hash, api::PodTemplateHash(workload["spec"]["template"]));
  nlohmann::json canary = BuildReplayCanary(api::ParseDeploymentSummary(workload), policy,
                                            MeasuredTemplateOf(kind, workload));
  auto parsed = api::ParseReplayCanary(canary);
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  nlohmann::json status = {{"phase", phase}, {"explanation", "test explanation"}};
  if (!verdict.empty()) {
    status["verdict"] = verdict;
    status["floorSlope"] = "+2.40 GiB/h";
  }
  if (!flat_variant.empty()) status["flatVariant"] = flat_variant;
  if (phase == "Completed" && parsed.ok()) {
    status["variants"] = {{{"name", "candidate"},
                           {"phase", "Completed"},
                           {"verdict", verdict},
                           {"measurementKey", MeasurementKey(*parsed, "candidate", {})}}};
  }
  canary["status"] = status;
  return canary;
}

inline nlohmann::json TrustedCanary(const nlohmann::json& deployment,
                                    const api::AllocatorPolicy& policy,
                                    const std::string& template_hash, const std::string& phase,
                                    const std::string& verdict,
                                    const std::string& flat_variant = "") {
  return TrustedCanaryOf(WorkloadKind::kDeployment, deployment, policy, template_hash, phase,
                         verdict, flat_variant);
}

}  // namespace allocguard::controllers::testing
