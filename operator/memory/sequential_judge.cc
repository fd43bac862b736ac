#include "operator/memory/sequential_judge.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "operator/memory/change_point.h"
#include "operator/memory/distributions.h"
#include "operator/memory/group_sequential.h"
#include "operator/memory/slope_interval.h"
#include "operator/memory/trend_tests.h"

namespace allocguard::memory {
namespace {

std::string Gib(double bytes_per_minute) {
  return FormatSlopeValue(BytesPerMinuteToGiBPerHour(bytes_per_minute));
}

std::string Fixed(double v, const char* format) {
  char buf[32];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string Minutes(int n) { return std::to_string(n) + (n == 1 ? " minute" : " minutes"); }

// "(99.87% interval +1.20 to +4.02 GiB/h)"
std::string IntervalText(const SlopeInterval& iv, double confidence) {
  if (!iv.valid) return "(no interval: too few independent floors)";
  return "(" + Fixed(100 * confidence, "%.2f") + "% interval " + Gib(iv.low) + " to " +
         Gib(iv.high) + " GiB/h)";
}

void Describe(const SlopeInterval& iv, double confidence, FloorJudgement* j) {
  j->slope_gib_per_h = BytesPerMinuteToGiBPerHour(iv.slope);
  j->lag1_autocorrelation = iv.lag1_autocorrelation;
  if (iv.valid) {
    j->slope_low_gib_per_h = BytesPerMinuteToGiBPerHour(iv.low);
    j->slope_high_gib_per_h = BytesPerMinuteToGiBPerHour(iv.high);
    j->confidence = confidence;
  } else {
    // The FloorJudgement contract: no interval, so both ends are the estimate.
    j->slope_low_gib_per_h = j->slope_high_gib_per_h = j->slope_gib_per_h;
    j->confidence = 0;
  }
}

// The late-growth scan judges up to 20 tails at every look: a screen for one
// outlier minute that now and then leaves out an ordinary floor would, over
// that many tails, narrow some tail's interval at almost every look
// (docs/verdicts.md measures it). The tails are judged without it.
SlopeNoise TailNoise(SlopeNoise noise) {
  return noise == SlopeNoise::kScreenedQuadraticResiduals ? SlopeNoise::kQuadraticResiduals : noise;
}

FloorJudgement Undecided(FloorJudgement j, bool final, std::string why) {
  if (!final) return j;
  j.decision = FloorDecision::kInconclusive;
  j.explanation = std::move(why);
  return j;
}

class SequentialJudge final : public FloorJudge {
 public:
  explicit SequentialJudge(const JudgeOptions& options)
      : options_(options), budgets_(PlanLookBudgets(options)) {}

  FloorJudgement Judge(std::span<const MinuteFloor> floors, bool final) const override {
    const int n = static_cast<int>(floors.size());
    const double threshold = GiBPerHourToBytesPerMinute(options_.max_slope_gib_per_h);
    const std::string limit = Fixed(options_.max_slope_gib_per_h, "%.2f");
    const int planned_floors = options_.max_minutes - options_.warmup_minutes;
    const int look = std::min(n, planned_floors) - options_.min_floors;
    const SlopeNoise noise = options_.noise;
    const LookBudget budget =
        look >= 0 && look < static_cast<int>(budgets_.size()) ? budgets_[look] : LookBudget{};
    // Outside the plan no budget is spent; the interval shown is then a plain
    // one at the whole false-Ratchet rate.
    const double shown_alpha = budget.ratchet > 0 ? budget.ratchet : options_.false_ratchet_rate;
    const double confidence = 1 - 2 * shown_alpha;

    FloorJudgement j;
    j.method = "sequential";
    j.minutes_used = n;
    j.trend_p_value = std::nan("");
    j.theil_sen_gib_per_h = std::nan("");
    const SlopeInterval iv = FitSlopeInterval(floors, shown_alpha, noise);
    Describe(iv, confidence, &j);
    if (n < 2) return Undecided(j, final, "only " + std::to_string(n) + " minute floors");
    const double sen = TheilSenSlope(floors);
    const MannKendallResult mk = MannKendallTest(floors, threshold);
    j.theil_sen_gib_per_h = BytesPerMinuteToGiBPerHour(sen);
    j.trend_p_value = mk.p_increasing;
    if (n < options_.min_floors) {
      return Undecided(j, final,
                       "only " + std::to_string(n) + " minute floors (need " +
                           std::to_string(options_.min_floors) + ")");
    }
    if (n > planned_floors) {
      // The budget is spent: a look past the plan could only add false verdicts.
      return Undecided(j, final,
                       "run went past the " + std::to_string(options_.max_minutes) +
                           " minutes the judge planned its looks for; no verdict after " +
                           Minutes(n));
    }

    const std::string rank_trend = "Theil–Sen " + Gib(sen) + " GiB/h";
    const bool rank_agrees = sen > threshold && mk.p_increasing < options_.robust_trend_p;
    if (budget.steps > 0 && rank_agrees) {
      const double ceiling = options_.noise_ceiling_mib * kBytesPerMiB;
      const StepBound steps =
          LargeStepBound(floors, ceiling, options_.noise_ceiling_ar1, budget.steps);
      if (steps.low > threshold) {
        // The interval reported is the rule's own, not the estimated-noise
        // one, which at 4-8 floors can straddle zero beside a Ratchet.
        j.slope_low_gib_per_h = BytesPerMinuteToGiBPerHour(steps.low);
        j.slope_high_gib_per_h = BytesPerMinuteToGiBPerHour(steps.high);
        j.confidence = 1 - 2 * budget.steps;
        j.decision = FloorDecision::kRatchet;
        j.ratchet_rule = FloorJudgement::Rule::kLargeSteps;
        j.explanation = "floor rises " + Gib(iv.slope) + " GiB/h over " + Minutes(n) +
                        ", more than floor noise up to " +
                        Fixed(options_.noise_ceiling_mib, "%.0f") + " MiB can make (at least " +
                        Gib(steps.low) + " GiB/h with any one minute left out), " + rank_trend +
                        ", above " + limit + " GiB/h";
        return j;
      }
    }
    bool differences_agree = true;
    if (options_.ratchet_checks_differences && n >= options_.ratchet_differences_min_floors &&
        iv.valid && iv.low > threshold) {
      const SlopeInterval diff = FitSlopeInterval(floors, shown_alpha, SlopeNoise::kDifferences);
      differences_agree = diff.valid && diff.low > threshold;
      if (!differences_agree) Describe(diff, confidence, &j);
    }
    if (iv.valid && iv.low > threshold && differences_agree && rank_agrees) {
      j.decision = FloorDecision::kRatchet;
      j.explanation = "floor rises " + Gib(iv.slope) + " GiB/h " + IntervalText(iv, confidence) +
                      ", " + rank_trend + ", above " + limit + " GiB/h over " + Minutes(n);
      return j;
    }

    const LateGrowth late = options_.late_growth_hinge
                                ? FindHingeGrowth(floors, threshold, budget.late_growth,
                                                  options_.late_growth_min_floors)
                                : FindLateGrowth(floors, threshold, budget.late_growth,
                                                 options_.late_growth_min_floors, TailNoise(noise));
    if (late.found) {
      const auto tail = floors.subspan(static_cast<size_t>(n - late.tail.n));
      const double tail_sen = TheilSenSlope(tail);
      const MannKendallResult tail_mk = MannKendallTest(tail, threshold);
      const double tail_p =
          options_.late_growth_trend_p > 0 ? options_.late_growth_trend_p : options_.robust_trend_p;
      if (tail_sen > threshold && tail_mk.p_increasing < tail_p) {
        const double tail_confidence = 1 - 2 * budget.late_growth / late.candidates;
        Describe(late.tail, tail_confidence, &j);
        j.theil_sen_gib_per_h = BytesPerMinuteToGiBPerHour(tail_sen);
        j.trend_p_value = tail_mk.p_increasing;
        j.growth_start_minute = late.start_minute;
        j.decision = FloorDecision::kRatchet;
        j.ratchet_rule = FloorJudgement::Rule::kLateGrowth;
        j.explanation = "floor rises " + Gib(late.tail.slope) + " GiB/h since minute " +
                        std::to_string(late.start_minute) + " " +
                        IntervalText(late.tail, tail_confidence) + ", Theil–Sen " + Gib(tail_sen) +
                        " GiB/h, above " + limit + " GiB/h over " + Minutes(n);
        return j;
      }
    }

    const SlopeInterval flat_iv = FitSlopeInterval(floors, budget.flat, noise);
    if (flat_iv.valid && flat_iv.low > -threshold && flat_iv.high < threshold &&
        std::fabs(sen) < threshold) {
      const double flat_confidence = 1 - 2 * budget.flat;
      Describe(flat_iv, flat_confidence, &j);
      j.decision = FloorDecision::kFlat;
      j.explanation = "floor slope " + Gib(flat_iv.slope) + " GiB/h " +
                      IntervalText(flat_iv, flat_confidence) + " is within ±" + limit +
                      " GiB/h over " + Minutes(n);
      return j;
    }

    j.past_planned_end = n >= PlannedEndFloors(options_) && n < planned_floors;
    if (!final && n < planned_floors) return j;
    j.decision = FloorDecision::kInconclusive;
    if (iv.valid && iv.high < -threshold) {
      j.explanation = "floor falls " + Gib(iv.slope) + " GiB/h " + IntervalText(iv, confidence) +
                      ": still settling after warm-up, over " + Minutes(n);
    } else if (iv.valid && iv.low > threshold) {
      j.explanation = "floor slope " + Gib(iv.slope) + " GiB/h " + IntervalText(iv, confidence) +
                      " but the rank trend does not confirm it (" + rank_trend +
                      ", Mann–Kendall p " + Fixed(mk.p_increasing, "%.2f") +
                      "): a few minutes drive it, over " + Minutes(n);
    } else {
      j.explanation = "floor slope " + Gib(iv.slope) + " GiB/h " + IntervalText(iv, confidence) +
                      " is neither clearly above " + limit + " GiB/h nor clearly within ±" + limit +
                      " GiB/h over " + Minutes(n);
    }
    return j;
  }

 private:
  JudgeOptions options_;
  std::vector<LookBudget> budgets_;
};

}  // namespace

StepBound LargeStepBound(std::span<const MinuteFloor> floors, double ceiling_sd_bytes,
                         double ceiling_ar1, double alpha) {
  StepBound out{.low = -std::numeric_limits<double>::infinity(),
                .high = std::numeric_limits<double>::infinity()};
  if (floors.size() < 4) return out;
  const double z = NormalUpperQuantile(alpha);
  out.high = FitFloorSlope(floors).slope_bytes_per_minute +
             z * std::sqrt(WorstCaseSlopeVariance(floors, ceiling_sd_bytes, ceiling_ar1));
  std::vector<MinuteFloor> rest;
  for (size_t left_out = 0; left_out < floors.size(); ++left_out) {
    rest.clear();
    for (size_t i = 0; i < floors.size(); ++i) {
      if (i != left_out) rest.push_back(floors[i]);
    }
    const SlopeFit fit = FitFloorSlope(rest);
    const double sd = std::sqrt(WorstCaseSlopeVariance(rest, ceiling_sd_bytes, ceiling_ar1));
    const double low = fit.slope_bytes_per_minute - z * sd;
    if (left_out == 0 || low < out.low) {
      out.low = low;
      out.weakest_minute = floors[left_out].minute;
    }
  }
  return out;
}

int PlannedLooks(const JudgeOptions& options) {
  return std::max(1, options.max_minutes - options.warmup_minutes - options.min_floors + 1);
}

int PlannedMinutes(const JudgeOptions& options) {
  return options.planned_minutes > 0 ? std::min(options.planned_minutes, options.max_minutes)
                                     : options.max_minutes;
}

int PlannedEndFloors(const JudgeOptions& options) {
  return PlannedMinutes(options) - options.warmup_minutes;
}

std::vector<double> CumulativeSpending(std::span<const double> information, int planned_look,
                                       double alpha, double extension_share, double rho) {
  const int looks = static_cast<int>(information.size());
  planned_look = std::clamp(planned_look, 0, looks - 1);
  const double share = planned_look == looks - 1 ? 0 : extension_share;
  const double planned_info = information[planned_look];
  std::vector<double> out;
  for (int k = 0; k < looks; ++k) {
    if (k <= planned_look) {
      out.push_back(PowerSpending(alpha * (1 - share), information[k] / planned_info, rho));
    } else {
      const double t = (information[k] - planned_info) / (information.back() - planned_info);
      out.push_back(alpha * (1 - share) + PowerSpending(alpha * share, t, rho));
    }
  }
  return out;
}

namespace {

std::vector<LookBudget> ComputeLookBudgets(const JudgeOptions& options) {
  const int looks = PlannedLooks(options);
  std::vector<double> information;
  for (int k = 0; k < looks; ++k) {
    const double n = options.min_floors + k;
    // Sxx of n consecutive minutes; kept strictly increasing for min_floors < 3.
    information.push_back(std::max(n * (n * n - 1) / 12, k == 0 ? 0.5 : information.back() + 0.5));
  }
  const int planned_look = PlannedEndFloors(options) - options.min_floors;
  const auto spend = [&](double alpha) {
    return CumulativeSpending(information, planned_look, alpha, options.extension_share,
                              options.spending_rho);
  };
  const bool steps = options.noise_ceiling_mib > 0;
  const int first_step_look = std::max(options.step_rule_min_floors, options.min_floors);
  const int last_step_look = std::min(options.step_rule_max_floors, options.min_floors + looks - 1);
  const int step_looks = std::max(0, last_step_look - first_step_look + 1);
  const double step_share = steps && step_looks > 0 ? options.step_rule_share : 0;
  const double ratchet_alpha =
      options.false_ratchet_rate * (1 - options.late_growth_share - step_share);
  const double late_alpha = options.false_ratchet_rate * options.late_growth_share;
  const std::vector<double> ratchet = NominalLevelsForSpending(information, spend(ratchet_alpha));
  const std::vector<double> flat =
      NominalLevelsForSpending(information, spend(options.false_flat_rate));
  const std::vector<double> late = spend(late_alpha);
  std::vector<LookBudget> out;
  out.reserve(static_cast<size_t>(std::max(looks, 0)));
  for (int k = 0; k < looks; ++k) {
    const int floors = options.min_floors + k;
    const bool step_look = step_share > 0 && floors >= first_step_look && floors <= last_step_look;
    out.push_back({.ratchet = ratchet[k],
                   .late_growth = late[k] - (k == 0 ? 0 : late[k - 1]),
                   .flat = flat[k],
                   .steps = step_look ? options.false_ratchet_rate * step_share / step_looks : 0});
  }
  return out;
}

}  // namespace

std::vector<LookBudget> PlanLookBudgets(const JudgeOptions& options) {
  // The boundaries take a few milliseconds of numerical integration; every
  // judge with the same plan shares them.
  using Key = std::tuple<int, int, int, int, double, double, double, double, double, double, double,
                         int, int>;
  static std::mutex mu;
  static std::map<Key, std::vector<LookBudget>> cache;
  const Key key{
      options.min_floors,          options.max_minutes,        options.warmup_minutes,
      PlannedEndFloors(options),   options.false_ratchet_rate, options.false_flat_rate,
      options.late_growth_share,   options.spending_rho,       options.extension_share,
      options.noise_ceiling_mib,   options.step_rule_share,    options.step_rule_min_floors,
      options.step_rule_max_floors};
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it == cache.end()) {
    if (cache.size() > 64) cache.clear();  // bounded: plans are few in practice
    it = cache.emplace(key, ComputeLookBudgets(options)).first;
  }
  return it->second;
}

LookBudget BudgetForLook(const JudgeOptions& options, int floors) {
  const std::vector<LookBudget> plan = PlanLookBudgets(options);
  const int look = floors - options.min_floors;
  if (look < 0 || look >= static_cast<int>(plan.size())) return {};
  return plan[look];
}

std::unique_ptr<FloorJudge> NewSequentialJudge(const JudgeOptions& options) {
  return std::make_unique<SequentialJudge>(options);
}

}  // namespace allocguard::memory
