#pragma once

// The Job that runs one variant of a ReplayCanary: the candidate's pod
// template, isolated from production traffic and storage, with the variant's
// allocator injected and the in-pod replay driver (`allocguard replay
// --in-pod`) beside the workload. The driver writes its result
// (replay/canary_result.h) to its termination message.
//
// Pure: builds JSON, talks to nothing.

#include <chrono>
#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "operator/api/types.h"
#include "operator/common/status.h"

namespace allocguard::canary {

// On the Job: how the glibc arena limit of production was reproduced,
// "<source>" or "<source>=<value>" (see ArenaLimit), so a controller that
// restarts reads it back from the Job.
inline constexpr char kArenaLimitAnnotation[] = "allocguard.io/arena-limit";
// Where the driver writes its result; the kubelet's default path.
inline constexpr char kTerminationLogPath[] = "/dev/termination-log";

// A StatefulSet's volumeClaimTemplate as its canary gets it (see
// CanaryJobOptions::claim_volumes).
struct ClaimVolume {
  std::string name;                   // the claim's name, which the pods mount
  std::optional<int64_t> size_bytes;  // the claim's storage request, if any
};

struct CanaryJobOptions {
  std::string image;  // the allocguard image: the replay driver and the allocator libraries
  std::string allocator_dir = "/opt/allocguard/lib";  // where the image keeps the libraries
  // The policy's containers to inject and measure; empty: every container.
  std::vector<std::string> containers;
  // Passed to the driver as --target-comm when set: measure only processes
  // with this command name (to leave another sidecar of the template out).
  std::string target_comm;
  // Added to maxDuration + ready timeout for activeDeadlineSeconds: scheduling,
  // image pulls, init containers.
  std::chrono::seconds deadline_slack{300};
  std::chrono::seconds ttl_after_finished{3600};
  // The image ships the stats agent (admission::StatsAgentShipped): every
  // variant preloads it (whatever the policy's spec.stats says: a canary
  // always records the books) and the driver reads its books.
  bool stats_agent = false;
  // Which run of the variant this Job is: 0 for the first, k for the k-th
  // rerun of an Inconclusive run (api::CanarySpec::inconclusive_reruns),
  // which is named CanaryJobName(canary, variant, k) and drives the load
  // with api::RerunSeed(seed, k).
  int rerun = 0;
  // The target StatefulSet's volumeClaimTemplates. Its pod template mounts
  // them by name but does not declare them as volumes (the StatefulSet
  // controller adds one claim per pod); each becomes an emptyDir volume of
  // that name, replacing a template volume of the same name as the
  // StatefulSet controller does, with sizeLimit = the claim's storage
  // request (none when the claim has none). The canary thus never binds or
  // touches a claim, and writes past the request evict the canary's pod
  // instead of filling a node.
  std::vector<ClaimVolume> claim_volumes;
  // A StatefulSet's pod identity as its first pod has it: "<statefulset>-0".
  // When set (and a valid DNS label), the canary pod gets it as
  // spec.hostname (what `hostname` and $HOSTNAME say inside), and every env
  // variable of the template's containers read from the downward API's
  // metadata.name gets it as a literal, as in that pod. No subdomain: the
  // canary does not join the StatefulSet's Service or take a peer's DNS name.
  std::string pod_identity;
};

// glibc allows 8 arenas per online CPU, so a canary on a small node hides a
// large node's ratchet. How a Job reproduced production's limit:
enum class ArenaLimitSource {
  kNodeSelector,  // the canary runs on nodes like production's; value: "k=v,k2=v2"
  kArenaMaxEnv,   // MALLOC_ARENA_MAX in the workload's env; value: the number
  kCanaryNode,    // neither: whatever node the canary lands on; value empty
};
const char* ArenaLimitSourceName(ArenaLimitSource source);  // "NodeSelector", ...

struct ArenaLimit {
  ArenaLimitSource source = ArenaLimitSource::kCanaryNode;
  std::string value;
};

// What BuildCanaryJob decided besides the Job itself.
struct CanaryJobInfo {
  std::string name;                    // the Job's name
  std::string allocator;               // the variant's allocator name ("jemalloc")
  ArenaLimit arena_limit;              // also in the Job's kArenaLimitAnnotation
  std::vector<std::string> conflicts;  // from InjectAllocator: user settings left alone
};

// Builds the batch/v1 Job for `variant` of `canary`. A variant named
// "candidate" runs canary.spec.candidate_allocator; any other its own.
//
// The Job: in the canary's namespace, named CanaryJobName(canary, variant,
// options.rerun),
// owned by the ReplayCanary (controller, blockOwnerDeletion), labelled with
// api::kCanaryLabel / kVariantLabel / kManagedByLabel; backoffLimit 0,
// activeDeadlineSeconds = maxDuration + ready timeout + options.deadline_slack,
// ttlSecondsAfterFinished.
// Its Pod: the candidate's template with
//   - labels replaced by the canary labels only, so no Service selects it;
//   - annotation api::kInjectAnnotation "false" (the injection webhook leaves
//     it alone), and the Istio and Linkerd injection turned off (the load
//     goes over localhost; a mesh proxy would be measured as workload);
//   - every persistentVolumeClaim (and ephemeral) volume replaced by an
//     emptyDir of the same name, so the canary never touches production data;
//     options.claim_volumes added as emptyDirs;
//   - options.pod_identity as hostname and as the value of env variables
//     read from metadata.name;
//   - restartPolicy Never, shareProcessNamespace true;
//   - any earlier allocguard injection removed (init container, guard,
//     library and books volumes and mounts, LD_PRELOAD entries under the
//     library path, and, when the template carries api::kInjectedAnnotation,
//     the allocator tunables and ALLOCGUARD_STATS_DIR), then the variant's
//     allocator injected with admission::InjectAllocator, with the stats
//     agent when options.stats_agent;
//   - the arena limit (see ArenaLimitSource): with canary.node_selector set,
//     it is merged into the Pod's nodeSelector; otherwise, with
//     production_cpus set, a glibc variant that sets no arenaMax of its own
//     gets MALLOC_ARENA_MAX = 8 x production_cpus;
//   - the driver container api::kDriverContainerName running `replay --in-pod`
//     with the rendered load, duration, interval, max slope, variant and
//     allocator names; terminationMessagePolicy File; restricted security
//     context; small resources; /tmp on an emptyDir; where the agent was
//     injected, the books volume read-only at api::kBooksMountPath and
//     --books-dir pointing there.
// InvalidArgument when the template is not a pod template object, a
// container list is malformed, or options.image is empty.
Result<nlohmann::json> BuildCanaryJob(const api::ReplayCanary& canary,
                                      const api::VariantSpec& variant,
                                      const CanaryJobOptions& options,
                                      CanaryJobInfo* info = nullptr);

// "<canary>-<variant>", and "-r<rerun>" after it for a rerun; when longer
// than 63 characters, cut and ended with "-" and 8 hex digits of a hash of
// the full name (stable across builds).
std::string CanaryJobName(const std::string& canary, const std::string& variant, int rerun = 0);

// `name` when it has at most `max` characters; otherwise cut, with trailing
// '-' and '.' removed, plus "-" and 8 hex digits of its FNV-1a hash.
// REQUIRES: max >= 10.
std::string ShortenName(const std::string& name, size_t max);

// The allocator a variant runs: the candidate's for "candidate".
const api::AllocatorSpec& VariantAllocator(const api::ReplayCanary& canary,
                                           const api::VariantSpec& variant);

}  // namespace allocguard::canary
