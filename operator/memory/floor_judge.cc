#include "operator/memory/floor_judge.h"

#include <cmath>
#include <cstdio>

#include "operator/common/verdict.h"

namespace allocguard::memory {

const char* FloorDecisionName(FloorDecision d) {
  switch (d) {
    case FloorDecision::kContinue:
      return "Continue";
    // A decision that ends a run is named as the verdict it becomes.
    case FloorDecision::kFlat:
      return VerdictName(Verdict::kFlat);
    case FloorDecision::kRatchet:
      return VerdictName(Verdict::kRatchet);
    case FloorDecision::kInconclusive:
      return VerdictName(Verdict::kInconclusive);
  }
  return "Unknown";
}

SlopeFit FitFloorSlope(std::span<const MinuteFloor> floors) {
  SlopeFit fit;
  fit.n = static_cast<int>(floors.size());
  if (fit.n < 2) {
    if (fit.n == 1) fit.intercept_bytes = floors[0].floor_bytes;
    return fit;
  }
  double mean_x = 0;
  double mean_y = 0;
  for (const MinuteFloor& f : floors) {
    mean_x += f.minute;
    mean_y += f.floor_bytes;
  }
  mean_x /= fit.n;
  mean_y /= fit.n;
  double sxx = 0;
  double sxy = 0;
  for (const MinuteFloor& f : floors) {
    sxx += (f.minute - mean_x) * (f.minute - mean_x);
    sxy += (f.minute - mean_x) * (f.floor_bytes - mean_y);
  }
  fit.sxx = sxx;
  if (sxx == 0) {
    fit.intercept_bytes = mean_y;
    return fit;
  }
  fit.slope_bytes_per_minute = sxy / sxx;
  fit.intercept_bytes = mean_y - fit.slope_bytes_per_minute * mean_x;
  if (fit.n >= 3) {
    double sse = 0;
    for (const MinuteFloor& f : floors) {
      double r = f.floor_bytes - (fit.intercept_bytes + fit.slope_bytes_per_minute * f.minute);
      sse += r * r;
    }
    fit.slope_std_error = std::sqrt(sse / (fit.n - 2) / sxx);
  }
  return fit;
}

std::optional<int> MoreFloorsNeeded(const FloorJudgement& j, double max_slope_gib_per_h) {
  if (j.confidence <= 0 || j.minutes_used < 1) return std::nullopt;
  const double half_width = (j.slope_high_gib_per_h - j.slope_low_gib_per_h) / 2;
  const double b = j.slope_gib_per_h;
  const double room =
      b > max_slope_gib_per_h ? b - max_slope_gib_per_h : max_slope_gib_per_h - std::fabs(b);
  // Within a twentieth of the threshold of a boundary, any promise would be
  // hundreds of minutes.
  if (!(half_width > 0) || room < max_slope_gib_per_h / 20) return std::nullopt;
  if (half_width <= room) return 0;
  const double floors = j.minutes_used * std::pow(half_width / room, 2.0 / 3.0);
  return static_cast<int>(std::ceil(floors - j.minutes_used));
}

std::string FormatSlopeValue(double gib_per_hour) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.2f", gib_per_hour);
  return buf;
}

std::string FormatSlope(double gib_per_hour) { return FormatSlopeValue(gib_per_hour) + " GiB/h"; }

namespace {

class FixedDurationJudge final : public FloorJudge {
 public:
  explicit FixedDurationJudge(const JudgeOptions& options) : options_(options) {}

  FloorJudgement Judge(std::span<const MinuteFloor> floors, bool final) const override {
    FloorJudgement j;
    j.method = "fixed-duration";
    j.minutes_used = static_cast<int>(floors.size());
    j.theil_sen_gib_per_h = std::nan("");
    j.trend_p_value = std::nan("");
    if (floors.size() >= 2) {
      SlopeFit fit = FitFloorSlope(floors);
      j.slope_gib_per_h = fit.SlopeGiBPerHour();
    }
    j.slope_low_gib_per_h = j.slope_high_gib_per_h = j.slope_gib_per_h;
    if (!final) return j;  // this rule only ever decides at the end
    const std::string limit = FormatSlopeValue(options_.max_slope_gib_per_h).substr(1);
    if (j.minutes_used < options_.min_floors) {
      j.decision = FloorDecision::kInconclusive;
      j.explanation = "only " + std::to_string(j.minutes_used) + " minute floors (need " +
                      std::to_string(options_.min_floors) + ")";
    } else if (std::fabs(j.slope_gib_per_h) <= options_.max_slope_gib_per_h) {
      j.decision = FloorDecision::kFlat;
      j.explanation = "floor slope " + FormatSlopeValue(j.slope_gib_per_h) + " GiB/h is within ±" +
                      limit + " GiB/h over " + std::to_string(j.minutes_used) + " minutes";
    } else if (j.slope_gib_per_h > options_.max_slope_gib_per_h) {
      j.decision = FloorDecision::kRatchet;
      j.explanation = "floor slope " + FormatSlopeValue(j.slope_gib_per_h) + " GiB/h exceeds " +
                      limit + " GiB/h over " + std::to_string(j.minutes_used) + " minutes";
    } else {
      // A floor that falls faster than the threshold is not a ratchet, but it
      // is not a steady state either: the run was still settling.
      j.decision = FloorDecision::kInconclusive;
      j.explanation = "floor falls at " + FormatSlopeValue(j.slope_gib_per_h) +
                      " GiB/h: still settling after warm-up";
    }
    return j;
  }

 private:
  JudgeOptions options_;
};

}  // namespace

std::unique_ptr<FloorJudge> NewFixedDurationJudge(const JudgeOptions& options) {
  return std::make_unique<FixedDurationJudge>(options);
}

// The sequential judge: statistically bounded error over all its looks, and
// early verdicts when the evidence is clear (docs/verdicts.md).
JudgeOptions StepJudgeOptions(JudgeOptions base) {
  base.noise_ceiling_mib = 64;
  base.noise_ceiling_ar1 = 0.9;
  base.ratchet_checks_differences = true;
  base.false_flat_rate = 0.15;
  base.extension_share = 0.4;
  base.noise = SlopeNoise::kScreenedQuadraticResiduals;
  base.late_growth_hinge = true;
  base.late_growth_trend_p = 0.01;
  return base;
}

std::unique_ptr<FloorJudge> NewDefaultJudge(const JudgeOptions& options) {
  return NewSequentialJudge(StepJudgeOptions(options));
}

}  // namespace allocguard::memory
