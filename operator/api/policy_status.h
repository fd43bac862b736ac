#pragma once

// An AllocatorPolicy's .status (crds/allocguard.io_allocatorpolicies.yaml) as
// a C++ value: read once from the cache, decided on
// (controllers::DecidePolicyStatus) and written back. The reader never
// throws: a member of the wrong type reads as absent and is reported, with
// its path under "status.", in `problems` (may be null). The writer never
// writes what the CRD refuses, which would lose the whole status write:
// a date-time member (verdicts[].time, injectionSuspended[].since) that is
// not an RFC 3339 time is left out, never written empty.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/api/canary_status.h"
#include "operator/api/workload_kinds.h"
#include "operator/common/verdict.h"

namespace allocguard::api {

// status.governed[]: a workload whose pod template the policy's selector
// matches, of a kind whose rollouts it gates. An entry whose kind is none of
// these, or whose name is empty, is reported and left out when read (the
// CRD refuses it: kind is an enum, every member is required).
struct GovernedWorkload {
  WorkloadKind kind = WorkloadKind::kDeployment;
  std::string name;
  std::string namespace_name;  // namespace

  bool operator==(const GovernedWorkload&) const = default;
};

// status.verdicts[] and status.lastVerdict: a finished canary's verdict.
struct PolicyVerdict {
  std::string workload;
  std::string template_hash;  // templateHash
  std::string canary;
  // As in ReplayCanaryStatus: a name allocguard does not write reads as
  // kFailed and is kept in unknown_verdict (and written back as it was).
  std::optional<Verdict> verdict;
  std::string unknown_verdict;
  std::string floor_slope;   // floorSlope
  std::string flat_variant;  // flatVariant
  std::string explanation;
  std::string time;  // RFC 3339; "" when unknown (then not written)

  // The verdict's name as written ("" when none).
  std::string VerdictName() const { return RecordedVerdictName(verdict, unknown_verdict); }

  bool operator==(const PolicyVerdict&) const = default;
};

// status.injectionDrift[]: a governed pod that runs without the injection.
struct DriftedPodStatus {
  std::string pod;
  std::string reason;

  bool operator==(const DriftedPodStatus&) const = default;
};

// status.injectionSuspended[]: a pod template the injection circuit breaker
// stopped injecting into (controllers/injection_breaker.h).
struct InjectionSuspendedStatus {
  std::string workload;                      // "Deployment/web"
  std::string pod_template_hash;             // podTemplateHash
  std::string template_hash;                 // templateHash: the Deployment's template digest
  std::optional<int64_t> policy_generation;  // policyGeneration
  std::string pod;
  std::string container;
  std::string reason;
  std::string message;
  std::string since;  // RFC 3339

  bool operator==(const InjectionSuspendedStatus&) const = default;
};

struct AllocatorPolicyStatus {
  std::optional<int64_t> observed_generation;  // observedGeneration
  std::vector<Condition> conditions;
  std::optional<int64_t> governed_count;  // governedCount
  std::vector<GovernedWorkload> governed;
  std::optional<PolicyVerdict> last_verdict;                  // lastVerdict
  std::vector<PolicyVerdict> verdicts;                        // newest first
  std::vector<DriftedPodStatus> injection_drift;              // injectionDrift
  std::vector<InjectionSuspendedStatus> injection_suspended;  // injectionSuspended

  bool operator==(const AllocatorPolicyStatus&) const = default;
};

// Reads .status (null or a non-object reads as an empty status).
AllocatorPolicyStatus ParseAllocatorPolicyStatus(const nlohmann::json& status,
                                                 std::vector<std::string>* problems = nullptr);
// The "status" member of an AllocatorPolicy object.
AllocatorPolicyStatus PolicyStatusOf(const nlohmann::json& policy,
                                     std::vector<std::string>* problems = nullptr);
std::vector<InjectionSuspendedStatus> ParseInjectionSuspended(
    const nlohmann::json& list, const std::string& path,
    std::vector<std::string>* problems = nullptr);

// The JSON to write as .status. Lists are always written (empty when
// empty); lastVerdict only when set. ParseAllocatorPolicyStatus of the result
// gives `status` back, except for date-times that were left out.
nlohmann::json AllocatorPolicyStatusToJson(const AllocatorPolicyStatus& status);
nlohmann::json PolicyVerdictToJson(const PolicyVerdict& verdict);
nlohmann::json InjectionSuspendedToJson(const InjectionSuspendedStatus& entry);

}  // namespace allocguard::api
