#include "operator/memory/verdict.h"

#include <cmath>
#include <cstdio>

namespace allocguard::memory {

const char* ClassificationName(Classification c) {
  switch (c) {
    case Classification::kNone:
      return "None";
    case Classification::kAllocatorRetention:
      return VerdictName(Verdict::kAllocatorRetention);
    case Classification::kLeak:
      return VerdictName(Verdict::kLeak);
  }
  return "Unknown";
}

VariantVerdict DecideVariantVerdict(const RunFacts& facts, const FloorJudgement& judgement,
                                    const VerdictOptions& options) {
  if (facts.failure) return {Verdict::kFailed, *facts.failure};
  if (facts.oom_minute) {
    return {Verdict::kOOMKilled, "OOM-killed in minute " + std::to_string(*facts.oom_minute) +
                                     ": the cgroup limit was reached"};
  }
  if (facts.unexpected_responses > options.max_unexpected_responses) {
    return {Verdict::kErrors,
            std::to_string(facts.unexpected_responses) +
                " responses outside the expected statuses (see the .errors file)"};
  }
  if (facts.requests_completed > 0) {
    double late =
        static_cast<double>(facts.requests_late) / static_cast<double>(facts.requests_completed);
    if (late > options.max_late_fraction) {
      char buf[256];
      std::snprintf(buf, sizeof buf,
                    "the workload fell behind: %lld of %lld requests (%.1f%%) started late, so the "
                    "floors measure the backlog, not the allocator",
                    static_cast<long long>(facts.requests_late),
                    static_cast<long long>(facts.requests_completed), 100 * late);
      return {Verdict::kInconclusive, buf};
    }
  }
  switch (judgement.decision) {
    case FloorDecision::kFlat:
      return {Verdict::kFlat, judgement.explanation};
    case FloorDecision::kRatchet:
      return {Verdict::kRatchet, judgement.explanation};
    case FloorDecision::kInconclusive:
    case FloorDecision::kContinue:
      break;
  }
  return {Verdict::kInconclusive,
          judgement.explanation.empty() ? "no decision from the floors" : judgement.explanation};
}

OverallVerdict ClassifyVariants(const std::vector<NamedVerdict>& variants) {
  OverallVerdict out;
  const NamedVerdict& candidate = variants.front();
  out.verdict = candidate.verdict;
  if (variants.size() == 1) {
    out.explanation = candidate.variant + ": " + VerdictName(out.verdict);
    return out;
  }
  bool all_ratchet = true;
  for (const NamedVerdict& v : variants) {
    all_ratchet = all_ratchet && v.verdict == Verdict::kRatchet;
    if (&v != &candidate && v.verdict == Verdict::kFlat) out.flat_variants.push_back(v.variant);
  }
  if (candidate.verdict != Verdict::kRatchet) {
    out.explanation = candidate.variant + ": " + VerdictName(out.verdict);
    return out;
  }
  if (all_ratchet) {
    out.classification = Classification::kLeak;
    out.verdict = Verdict::kLeak;
    out.explanation =
        "every variant ratchets on the identical load: the workload leaks, whatever "
        "the allocator";
  } else if (!out.flat_variants.empty()) {
    out.classification = Classification::kAllocatorRetention;
    out.verdict = Verdict::kAllocatorRetention;
    std::string names;
    for (const std::string& n : out.flat_variants) names += (names.empty() ? "" : ", ") + n;
    out.explanation = candidate.variant + " ratchets while " + names +
                      " stays flat on the identical load: memory is retained by the allocator; "
                      "switch to " +
                      names;
  } else {
    out.explanation = candidate.variant +
                      " ratchets; no other variant gave a clear verdict, so the cause is not "
                      "classified";
  }
  return out;
}

double RecommendedLimitBytes(double peak_bytes) {
  const double step = 64.0 * 1024 * 1024;
  return std::ceil(peak_bytes * 1.25 / step) * step;
}

}  // namespace allocguard::memory
