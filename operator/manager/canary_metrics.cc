#include "operator/manager/canary_metrics.h"

#include "operator/api/canary_status.h"
#include "operator/common/rfc3339.h"
#include "operator/common/verdict.h"
#include "operator/kube/credentials.h"
#include "operator/kube/object.h"

namespace allocguard::manager {
namespace {

using nlohmann::json;

// The verdict label: one of the names allocguard writes, or "Other".
std::string VerdictLabel(const std::string& verdict) {
  return VerdictFromName(verdict).has_value() ? verdict : "Other";
}

std::optional<std::chrono::system_clock::time_point> Time(const std::string& text) {
  if (text.empty()) return std::nullopt;
  auto t = ParseRfc3339(text);
  if (!t.ok()) return std::nullopt;
  return t.value();
}

}  // namespace

std::optional<CanaryVerdictReached> VerdictReached(const json& before, const json& after) {
  if (!before.is_object()) return std::nullopt;
  if (api::CanaryStatusOf(before).verdict.has_value()) return std::nullopt;
  const api::ReplayCanaryStatus status = api::CanaryStatusOf(after);
  const std::string verdict = api::RecordedVerdictName(status.verdict, status.unknown_verdict);
  if (verdict.empty()) return std::nullopt;
  CanaryVerdictReached out{VerdictLabel(verdict), std::nullopt};
  auto start = Time(status.start_time);
  if (!start.has_value()) {
    start = Time(kube::StringField(kube::FieldOrNull(after, "metadata"), "creationTimestamp"));
  }
  auto end = Time(status.completion_time);
  if (start.has_value() && end.has_value() && *end >= *start) {
    out.duration_seconds = std::chrono::duration<double>(*end - *start).count();
  }
  return out;
}

CanaryMetrics::CanaryMetrics(metrics::Registry& registry)
    : verdicts_(registry.AddCounter("allocguard_canary_verdicts_total",
                                    "ReplayCanaries that reached a verdict, by verdict.",
                                    {"verdict"})),
      durations_(registry.AddHistogram(
          "allocguard_canary_duration_seconds",
          "Time from a canary's start to its verdict, by verdict.", {"verdict"},
          // 1 minute to about 4.5 hours: canaries run for minutes to hours.
          metrics::ExponentialBuckets(60, 2, 9))) {
  for (Verdict v : kAllVerdicts) verdicts_.With({VerdictName(v)});
}

void CanaryMetrics::OnUpdate(const json& before, const json& after) {
  auto reached = VerdictReached(before, after);
  if (!reached.has_value()) return;
  verdicts_.With({reached->verdict}).Inc();
  if (reached->duration_seconds.has_value()) {
    durations_.With({reached->verdict}).Observe(*reached->duration_seconds);
  }
}

}  // namespace allocguard::manager
