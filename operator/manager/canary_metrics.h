#pragma once

// Canary verdict metrics, fed by the ReplayCanary informer's updates on the
// leading replica (the one whose reconcilers write the verdicts):
//
//   allocguard_canary_verdicts_total{verdict}      canaries that reached a
//       verdict (Flat, Ratchet, AllocatorRetention, Leak, OOMKilled, Errors,
//       Failed, Inconclusive; anything else counts as Other)
//   allocguard_canary_duration_seconds{verdict}   histogram of the time from
//       status.startTime (else metadata.creationTimestamp) to
//       status.completionTime
//
// Only transitions are counted: a canary already judged when the operator
// starts (the informer's first list) is not counted again.

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "operator/metrics/registry.h"

namespace allocguard::manager {

struct CanaryVerdictReached {
  std::string verdict;  // one of the label values above
  // Absent when the timestamps are missing or unreadable.
  std::optional<double> duration_seconds;
};

// The verdict `after` carries in status.verdict when `before` carried none
// (or is null, for a canary seen first with its verdict: nullopt then, as
// it may be an old one). Pure.
std::optional<CanaryVerdictReached> VerdictReached(const nlohmann::json& before,
                                                   const nlohmann::json& after);

// Thread-safe.
class CanaryMetrics {
 public:
  // registry must outlive this object.
  explicit CanaryMetrics(metrics::Registry& registry);
  // Counts the canary when it reached its verdict between before and after.
  void OnUpdate(const nlohmann::json& before, const nlohmann::json& after);

 private:
  metrics::Counter& verdicts_;
  metrics::Histogram& durations_;
};

}  // namespace allocguard::manager
