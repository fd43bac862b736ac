#pragma once

// The bake-off: a replay of one workload under a matrix of allocators and
// tunings, ranked, with a recommendation that states its costs and an
// AllocatorPolicy snippet for it (`allocguard replay --bake-off`,
// docs/replay.md "The bake-off").
//
// Ranking, in order (docs/replay.md says why):
//   1. Every Flat variant before every other; among the others, Inconclusive
//      before Ratchet, AllocatorRetention and Leak, then the runs that did not
//      measure (OOMKilled, Errors, Failed).
//   2. Lower floor level (the median per-minute floor) first; floors within
//      kBakeOffTieFraction of each other, counted in steps of that fraction
//      up from the lowest floor of the same group, tie.
//   3. Less CPU per request first, with the same tolerance.
//   4. Lower p99 latency first (a run without one last); then the matrix order.
// The first variant of the matrix is the current allocator: every cost is
// given against it ("floor -62 %, CPU +18 %, p99 +9 %"). The recommendation
// is the first-ranked Flat variant; none when no variant stayed Flat (a leak
// or a load that does not settle: no allocator is the answer), and "keep" when
// it is the current allocator itself.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/common/status.h"
#include "operator/replay/variant_result.h"

namespace allocguard::replay {

// Two floors (or two CPU costs per request) within this fraction of each
// other rank as equal, and the next criterion decides.
inline constexpr double kBakeOffTieFraction = 0.10;

// The default matrix (common/bake_off_matrix.h, which a policy's
// canary.bakeOff runs too) as --variant specs (allocator_variant.h): glibc as
// it is and with two arenas; jemalloc as it is and with background purging
// and a 1-second decay; mimalloc; tcmalloc. The first is the current
// allocator.
std::vector<std::string> DefaultBakeOffMatrix();

// One ranked variant and its costs against the current allocator (the
// matrix's first variant). A cost is absent when either figure is missing.
struct BakeOffEntry {
  int rank = 0;  // 1 = best
  const VariantResult* result = nullptr;
  std::optional<double> cpu_ms_per_request;
  std::optional<double> floor_change;  // fraction: -0.62 = 62 % lower
  std::optional<double> cpu_change;    // per request
  std::optional<double> p99_change;
};

struct BakeOff {
  std::string current;  // the current allocator's variant name
  std::vector<BakeOffEntry> ranked;
  // Index into `ranked` of the recommendation; empty when no variant is Flat.
  std::optional<size_t> recommended;
  // One paragraph: what to do, and what it costs.
  std::string recommendation;
  // An AllocatorPolicy spec.allocator for the recommendation (YAML), with a
  // comment per variant setting it cannot express; empty without one.
  std::string policy_snippet;
};

// Ranks the variants of `summary` (which must outlive the result). An error
// when it holds no variant.
Result<BakeOff> RankBakeOff(const ReplaySummary& summary);

// "floor -62 %, CPU +18 %, p99 +9 %" (what is missing left out).
std::string FormatBakeOffCosts(const BakeOffEntry& entry);

// The ranked table for the terminal, then the recommendation and the snippet.
std::string FormatBakeOff(const BakeOff& bake_off);

// camelCase JSON, as the other replay outputs: rank, variant, verdict, floor,
// CPU per request, p99, the changes, the recommendation and the snippet.
nlohmann::json ToJson(const BakeOff& bake_off);

// The AllocatorPolicy spec.allocator for a variant (YAML lines). Variant
// environment the policy maps: MALLOC_ARENA_MAX -> glibc.arenaMax,
// MALLOC_TRIM_THRESHOLD_ / MALLOC_MMAP_THRESHOLD_ -> glibc.trimThreshold /
// mmapThreshold, MALLOC_CONF -> jemalloc.mallocConf, MIMALLOC_<OPTION> ->
// mimalloc.options, TCMALLOC_RELEASE_RATE / TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES
// -> tcmalloc.releaseRate / maxTotalThreadCacheBytes; any other variable is
// named in a comment, since no policy field sets it.
std::string PolicySnippet(const VariantResult& variant);

}  // namespace allocguard::replay
