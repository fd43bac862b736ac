#pragma once

// The allocguard.io/v1alpha1 custom resources as C++ values: AllocatorPolicy
// and ReplayCanary. crds/ holds their OpenAPI schemas and CEL rules; the API
// server validates and defaults what users write, and ParseAllocatorPolicy /
// ParseReplayCanary (policy.h) read the stored objects back into these types,
// re-checking what the operator relies on (an object may predate a schema
// change).
//
// YAML field names are given beside each member.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace allocguard::api {

inline constexpr char kGroup[] = "allocguard.io";
inline constexpr char kVersion[] = "v1alpha1";
inline constexpr char kApiVersion[] = "allocguard.io/v1alpha1";

enum class Allocator { kGlibc, kJemalloc, kMimalloc, kTcmalloc };
enum class RolloutMode { kEnforce, kAudit, kOff };
enum class GuardAction { kNone, kBackpressure, kRestart };
// Which build of the allocator a container loads (docs/injection.md): the
// glibc build, the musl build, or (kAuto) whichever the container's own
// dynamic loader picks through the `$LIB` token in LD_PRELOAD.
enum class Libc { kAuto, kGlibc, kMusl };

// metav1.LabelSelector.
struct LabelSelectorRequirement {
  std::string key;
  std::string op;  // "In" | "NotIn" | "Exists" | "DoesNotExist"   (operator)
  std::vector<std::string> values;

  bool operator==(const LabelSelectorRequirement&) const = default;
};
struct LabelSelector {
  std::map<std::string, std::string> match_labels;          // matchLabels
  std::vector<LabelSelectorRequirement> match_expressions;  // matchExpressions

  bool operator==(const LabelSelector&) const = default;
};

// spec.allocator. Tunables exist only for the allocator they belong to (a CEL
// rule refuses glibc tunables on a jemalloc policy, and so on).
struct AllocatorSpec {
  Allocator name = Allocator::kJemalloc;  // name: glibc|jemalloc|mimalloc|tcmalloc
  // glibc: {arenaMax, trimThreshold, mmapThreshold}
  std::optional<int> glibc_arena_max;           // MALLOC_ARENA_MAX
  std::optional<int64_t> glibc_trim_threshold;  // MALLOC_TRIM_THRESHOLD_ (bytes)
  std::optional<int64_t> glibc_mmap_threshold;  // MALLOC_MMAP_THRESHOLD_ (bytes)
  // jemalloc: {mallocConf}, e.g. "background_thread:true,dirty_decay_ms:1000"
  std::string jemalloc_malloc_conf;  // MALLOC_CONF
  // mimalloc: {options: {purge_delay: "0"}} -> MIMALLOC_PURGE_DELAY=0
  std::map<std::string, std::string> mimalloc_options;
  // tcmalloc (gperftools): {releaseRate, maxTotalThreadCacheBytes}
  std::optional<double> tcmalloc_release_rate;             // TCMALLOC_RELEASE_RATE
  std::optional<int64_t> tcmalloc_max_total_thread_cache;  // TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES

  bool operator==(const AllocatorSpec&) const = default;
};

// spec.limits.
struct LimitsSpec {
  std::optional<int64_t> memory_bytes;  // memory: "2Gi"; the container limit to check against peak
  int64_t max_floor_slope_bytes_per_hour = 512LL << 20;  // maxFloorSlopePerHour: "512Mi"

  bool operator==(const LimitsSpec&) const = default;
};

// One request of the canary's load; mirrors replay::RequestSpec.
struct LoadRequestSpec {
  std::string name;
  std::string method = "GET";
  std::string path;  // may contain {key}
  std::string body;
  std::string content_type;  // contentType
  double weight = 1;
  int64_t key_space = 1;  // keySpace
  std::vector<int> expect = {200};

  bool operator==(const LoadRequestSpec&) const = default;
};

// spec.canary.load; mirrors replay::LoadSpec. The driver reaches the workload
// over localhost on `port` inside the canary pod.
struct LoadSpec {
  int port = 8080;
  double rate = 10;  // requests per second
  int workers = 4;
  uint64_t seed = 1;
  std::string arrival = "poisson";  // poisson | uniform
  std::string ready_path = "/";     // ready: {path, timeout}
  std::chrono::milliseconds ready_timeout{60000};
  std::chrono::milliseconds late_after{1000};        // lateAfter
  std::chrono::milliseconds request_timeout{30000};  // requestTimeout
  std::vector<LoadRequestSpec> requests;

  bool operator==(const LoadSpec&) const = default;
};

// A variant run beside the candidate on the identical load.
struct VariantSpec {
  std::string name;  // DNS label; "candidate" is reserved for the template as injected
  AllocatorSpec allocator;

  bool operator==(const VariantSpec&) const = default;
};

// The maxDuration a canary gets when its policy names none.
inline std::chrono::seconds DefaultCanaryMaxDuration(std::chrono::seconds duration) {
  return std::max(duration, std::chrono::seconds(30 * 60));
}

// How often a canary runs its candidate again when the run ends Inconclusive,
// unless the policy says otherwise (canary.inconclusiveReruns), and the most
// it may ask for.
inline constexpr int kDefaultInconclusiveReruns = 1;
inline constexpr int kMaxInconclusiveReruns = 3;

// The load seed of rerun `rerun` of a variant (0: the first run, which uses
// the policy's seed as it stands): the seed plus the rerun's number, kept in
// the range of a non-negative int64 (the CRD's integer type).
inline uint64_t RerunSeed(uint64_t seed, int rerun) {
  return (seed + static_cast<uint64_t>(rerun)) & 0x7fffffffffffffffULL;
}

// spec.canary.
struct CanarySpec {
  std::chrono::seconds duration{15 * 60};  // duration: "15m"
  // maxDuration: how long a variant may run on while its verdict is still
  // unclear at `duration` (the judge spends most of its error budget by
  // `duration` and the rest up to this). Default: 30m, or `duration` when
  // that is longer; never below `duration`.
  std::chrono::seconds max_duration{30 * 60};
  // inconclusiveReruns: how many times a candidate whose run ended
  // Inconclusive is run again, each time with a new load seed (RerunSeed),
  // before the canary's verdict is Inconclusive. 0..kMaxInconclusiveReruns.
  int inconclusive_reruns = kDefaultInconclusiveReruns;
  std::chrono::milliseconds sample_interval{2000};  // sampleInterval: "2s"
  LoadSpec load;
  std::vector<VariantSpec> variants;  // default: one glibc baseline
  // bakeOff: rank every variant with its costs against the candidate and
  // recommend one (status.recommendation, docs/crds.md). Without `variants`
  // the policy runs the bake-off matrix (BakeOffVariants, policy.h). The
  // verdict, and so the hold, stays the candidate's.
  bool bake_off = false;
  // Where canary pods run. A glibc variant must see production's arena limit
  // (8 per online CPU): either run on nodes like production's (nodeSelector)
  // or give the glibc variant MALLOC_ARENA_MAX = 8 x productionCPUs.
  std::map<std::string, std::string> node_selector;  // nodeSelector
  std::optional<int> production_cpus;                // productionCPUs

  bool operator==(const CanarySpec&) const = default;
};

struct RolloutSpec {
  RolloutMode mode = RolloutMode::kAudit;  // mode: Enforce|Audit|Off

  bool operator==(const RolloutSpec&) const = default;
};

struct GuardSpec {
  bool enabled = false;
  std::optional<int64_t> threshold_bytes;  // threshold: "1536Mi" (anon + dirty)
  GuardAction action = GuardAction::kNone;

  bool operator==(const GuardSpec&) const = default;
};

// spec.stats: the stats agent (liballocguard_stats.so, docs/allocator-books.md)
// preloaded beside the allocator, publishing the allocator's own books for
// the guard to read.
struct StatsSpec {
  std::optional<bool> enabled;  // absent: on exactly when the guard is on

  bool operator==(const StatsSpec&) const = default;
};

struct AllocatorPolicySpec {
  LabelSelector selector;
  std::vector<std::string> containers;  // empty: every container of the pod
  AllocatorSpec allocator;
  // libc: auto|glibc|musl. The pod annotation allocguard.io/libc overrides it.
  Libc libc = Libc::kAuto;
  LimitsSpec limits;
  CanarySpec canary;
  RolloutSpec rollout;
  GuardSpec guard;
  StatsSpec stats;

  // Whether the stats agent is injected: spec.stats.enabled, or when it is
  // absent, spec.guard.enabled.
  bool StatsEnabled() const { return stats.enabled.value_or(guard.enabled); }

  bool operator==(const AllocatorPolicySpec&) const = default;
};

struct AllocatorPolicy {
  std::string ns;  // metadata.namespace
  std::string name;
  std::string uid;
  int64_t generation = 0;
  AllocatorPolicySpec spec;

  bool operator==(const AllocatorPolicy&) const = default;
};

// ReplayCanary spec: a snapshot of everything the run needs, so that a later
// policy edit does not change a canary in flight.
struct ReplayCanarySpec {
  std::string policy;                      // policyRef: {name}
  std::string target_kind = "Deployment";  // target: {kind, name}
  std::string target_name;
  std::string template_hash;          // templateHash: the candidate template's key
  std::string pod_template_json;      // template: the candidate's pod template (object)
  AllocatorSpec candidate_allocator;  // candidate: {allocator}
  Libc libc = Libc::kAuto;            // libc: the policy's, for every variant
  CanarySpec canary;                  // duration, sampleInterval, load, variants, nodeSelector...
  LimitsSpec limits;

  bool operator==(const ReplayCanarySpec&) const = default;
};

struct ReplayCanary {
  std::string ns;
  std::string name;
  std::string uid;
  int64_t generation = 0;
  ReplayCanarySpec spec;

  bool operator==(const ReplayCanary&) const = default;
};

// status.phase of a ReplayCanary, and of each entry of its status.variants.
// Completed and Failed are final: nothing changes a canary afterwards.
enum class CanaryPhase { kPending, kRunning, kCompleted, kFailed };
const char* CanaryPhaseName(CanaryPhase phase);  // "Pending", "Running", ...
// The phase a name written by CanaryPhaseName stands for; nullopt otherwise.
std::optional<CanaryPhase> CanaryPhaseFromName(std::string_view name);

std::string AllocatorName(Allocator allocator);   // "jemalloc"
std::string RolloutModeName(RolloutMode mode);    // "Enforce"
std::string GuardActionName(GuardAction action);  // "Backpressure"
std::string LibcName(Libc libc);                  // "auto", "glibc", "musl"
std::optional<Libc> LibcFromName(std::string_view name);

// Whether allocguard ships a build of `allocator` for `libc`. tcmalloc has no
// musl build: it is C++, and Debian ships no C++ runtime for musl. glibc (the
// allocator) needs no build at all.
bool HasBuildFor(Allocator allocator, Libc libc);

// A short, stable digest of `text` (FNV-1a, 64 bits, as 16 hex digits) for
// names and keys derived from content: not a security boundary, only a way
// to tell two specs apart.
std::string ContentHash(std::string_view text);

}  // namespace allocguard::api
