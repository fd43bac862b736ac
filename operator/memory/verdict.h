#pragma once

// Verdicts: what one variant's run means, and what the variants of one load,
// side by side, mean together. Pure functions over what a run observed.

#include <optional>
#include <string>
#include <vector>

#include "operator/common/verdict.h"
#include "operator/memory/floor_judge.h"

namespace allocguard::memory {

// The verdict enum and its names are shared with the status and the gate
// (operator/common/verdict.h). A variant's run ends in Flat, Ratchet,
// OOMKilled, Errors, Failed or Inconclusive; AllocatorRetention and Leak
// come only from comparing variants (ClassifyVariants).
using allocguard::Verdict;
using allocguard::VerdictName;

// What a variant's run observed besides its floors.
struct RunFacts {
  int64_t requests_completed = 0;
  int64_t requests_late = 0;
  int64_t unexpected_responses = 0;
  // First minute (from the start of the load) in which an OOM kill was seen.
  std::optional<int> oom_minute;
  // Set when the workload did not start or exited during the run.
  std::optional<std::string> failure;
};

struct VerdictOptions {
  // A run with more late requests than this fraction fell behind its schedule.
  double max_late_fraction = 0.01;
  // More unexpected responses than this make the verdict Errors.
  int64_t max_unexpected_responses = 0;
};

struct VariantVerdict {
  Verdict verdict = Verdict::kInconclusive;
  std::string explanation;  // one line a person reads
};

// Order of precedence: Failed, OOMKilled, Errors, fell behind (Inconclusive),
// then the floor judgement.
VariantVerdict DecideVariantVerdict(const RunFacts& facts, const FloorJudgement& judgement,
                                    const VerdictOptions& options);

// Across variants run on the identical load.
enum class Classification {
  kNone,                // a single variant, or nothing to compare
  kAllocatorRetention,  // the candidate ratchets, another allocator stays flat
  kLeak,                // every variant ratchets
};

const char* ClassificationName(Classification c);

struct NamedVerdict {
  std::string variant;
  std::string allocator;
  Verdict verdict;
};

struct OverallVerdict {
  // The candidate's verdict, or AllocatorRetention / Leak when classified.
  Verdict verdict = Verdict::kInconclusive;
  Classification classification = Classification::kNone;
  std::vector<std::string> flat_variants;  // the fix, for AllocatorRetention
  std::string explanation;
};

// The first entry is the candidate. REQUIRES: !variants.empty().
OverallVerdict ClassifyVariants(const std::vector<NamedVerdict>& variants);

// The memory limit to recommend for a workload whose peak was peak_bytes:
// 25 % headroom, rounded up to a multiple of 64 MiB. Peaks are legitimate;
// they size the limit, the floor's slope judges retention.
double RecommendedLimitBytes(double peak_bytes);

// Process exit codes of `allocguard replay` and `allocguard analyze`, one per
// overall verdict (documented in docs/replay.md): common/verdict.h.
using allocguard::ExitCodeForVerdict;

}  // namespace allocguard::memory
