#include "operator/memory/verdict_evaluation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace allocguard::memory {
namespace {

// Decides `decision` once it sees `at` floors; never before.
class DecidesAt final : public FloorJudge {
 public:
  DecidesAt(size_t at, FloorDecision decision) : at_(at), decision_(decision) {}
  FloorJudgement Judge(std::span<const MinuteFloor> floors, bool final) const override {
    FloorJudgement j;
    if (floors.size() >= at_) j.decision = decision_;
    if (final && j.decision == FloorDecision::kContinue) j.decision = FloorDecision::kInconclusive;
    j.minutes_used = static_cast<int>(floors.size());
    return j;
  }

 private:
  size_t at_;
  FloorDecision decision_;
};

std::vector<MinuteFloor> Minutes(int first, int last) {
  std::vector<MinuteFloor> out;
  for (int m = first; m <= last; ++m) out.push_back({.minute = m, .floor_bytes = 1});
  return out;
}

TEST(ReplayJudgeTest, StopsAtTheFirstDecision) {
  // Floors from minute 1: the 4th floor is minute 4, complete at 5 minutes.
  RunOutcome o = ReplayJudge(DecidesAt(4, FloorDecision::kRatchet), Minutes(1, 14));
  EXPECT_EQ(o.judgement.decision, FloorDecision::kRatchet);
  EXPECT_EQ(o.judgement.minutes_used, 4);
  EXPECT_EQ(o.minutes_elapsed, 5);
}

TEST(ReplayJudgeTest, WithoutADecisionTheFinalCallEndsTheRun) {
  RunOutcome o = ReplayJudge(DecidesAt(99, FloorDecision::kFlat), Minutes(1, 14));
  EXPECT_EQ(o.judgement.decision, FloorDecision::kInconclusive);
  EXPECT_EQ(o.minutes_elapsed, 15);
}

// Undecided at the end of every odd-numbered run, Flat at the end of every
// even-numbered one: a rerun always settles it.
class SettlesOnTheSecondRun final : public FloorJudge {
 public:
  FloorJudgement Judge(std::span<const MinuteFloor> floors, bool final) const override {
    FloorJudgement j;
    j.minutes_used = static_cast<int>(floors.size());
    if (!final) return j;
    j.decision = ++finals_ % 2 == 1 ? FloorDecision::kInconclusive : FloorDecision::kFlat;
    return j;
  }

 private:
  mutable int finals_ = 0;
};

// A rule with a rerun judges a fresh trace of the same instance after an
// Inconclusive run; the verdict is the rerun's and the minutes are both runs'.
TEST(EvaluateRulesTest, AnInconclusiveRunIsJudgedAgainOnAFreshTrace) {
  const TraceClass level{.name = "level", .spec = {.minutes = 10}};
  const SettlesOnTheSecondRun once;
  const SettlesOnTheSecondRun twice;
  const RuleUnderTest rules[] = {{"no rerun", &once, 100, 0}, {"one rerun", &twice, 100, 1}};
  const auto counts = EvaluateRules(std::span(&level, 1), 5, 1, rules);
  ASSERT_EQ(counts.size(), 1u);
  // Without a rerun every other trace ends undecided.
  EXPECT_EQ(counts[0][0].inconclusive, 3);
  EXPECT_EQ(counts[0][0].flat, 2);
  // With one, every trace is Flat after 10 + 10 minutes.
  EXPECT_EQ(counts[0][1].flat, 5);
  EXPECT_EQ(counts[0][1].inconclusive, 0);
  EXPECT_EQ(counts[0][1].minutes, std::vector<int>(5, 20));
  EXPECT_NE(RerunFloorSeed(7, 1), 7u);
  EXPECT_NE(RerunFloorSeed(7, 1), RerunFloorSeed(7, 2));
}

// A trace whose growth starts after the last floor a judge saw was level in
// every floor it judged: the count of those lets evaluate-verdicts tell a
// missed ratchet from one no stopping judge could see.
TEST(EvaluateRulesTest, CountsVerdictsGivenBeforeTheGrowthBegan) {
  // Growth from minute 6 (the floor of minute 7 is the first that rises),
  // 15-minute traces: floors of minutes 1..14.
  const TraceClass late{.name = "late",
                        .spec = {.slope_gib_per_h = 5, .growth_start_minute = 6, .minutes = 15},
                        .truth = TraceTruth::kRatchet};
  const DecidesAt flat_at_6(6, FloorDecision::kFlat);        // last floor minute 6: before it
  const DecidesAt flat_at_7(7, FloorDecision::kFlat);        // minute 7: the growth has begun
  const DecidesAt ratchet_at_4(4, FloorDecision::kRatchet);  // a Ratchet is never counted
  const RuleUnderTest rules[] = {
      {"flat 6", &flat_at_6, 100}, {"flat 7", &flat_at_7, 100}, {"ratchet 4", &ratchet_at_4, 100}};
  const auto counts = EvaluateRules(std::span(&late, 1), 4, 1, rules);
  EXPECT_EQ(counts[0][0].flat, 4);
  EXPECT_EQ(counts[0][0].not_ratchet_before_growth, 4);
  EXPECT_EQ(counts[0][1].not_ratchet_before_growth, 0);
  EXPECT_EQ(counts[0][2].ratchet, 4);
  EXPECT_EQ(counts[0][2].not_ratchet_before_growth, 0);
}

// Ratchet as soon as a floor reaches 500 MiB, Flat at the end otherwise.
class RatchetAbove500MiB final : public FloorJudge {
 public:
  FloorJudgement Judge(std::span<const MinuteFloor> floors, bool final) const override {
    FloorJudgement j;
    if (!floors.empty() && floors.back().floor_bytes >= 500 * kBytesPerMiB) {
      j.decision = FloorDecision::kRatchet;
    } else if (final) {
      j.decision = FloorDecision::kFlat;
    }
    j.minutes_used = static_cast<int>(floors.size());
    return j;
  }
};

// With replicas every rule judges their combined floors: a level 300 MiB
// floor with minute 5 held 300 MiB high is a Ratchet on minute 5 for one
// pod, Flat for the mean of three replicas when one of them holds the
// request (300 + 300 / 3 = 400 MiB), a Ratchet again when all three do.
TEST(EvaluateRulesTest, EveryRuleJudgesTheReplicasCombinedFloors) {
  const TraceClass outlier{
      .name = "outlier",
      .spec = {.noise_sd_mib = 0, .outlier_minute = 5, .outlier_mib = 300, .minutes = 10}};
  const RatchetAbove500MiB judge;
  const RuleUnderTest rules[] = {{"above 500", &judge, 100}};
  const auto one = EvaluateRules(std::span(&outlier, 1), 3, 1, rules);
  EXPECT_EQ(one[0][0].ratchet, 3);
  EXPECT_EQ(one[0][0].minutes, std::vector<int>(3, 6));
  const auto three = EvaluateRules(std::span(&outlier, 1), 3, 1, rules, {.replicas = 3});
  EXPECT_EQ(three[0][0].flat, 3);
  EXPECT_EQ(three[0][0].minutes, std::vector<int>(3, 10));
  const auto all = EvaluateRules(std::span(&outlier, 1), 3, 1, rules,
                                 {.replicas = 3, .outlier = ReplicaOutlier::kEveryReplica});
  EXPECT_EQ(all[0][0].ratchet, 3);
}

// Ratchets are counted by the test of the sequential judge that called them.
TEST(VerdictCountsTest, CountsRatchetsByTheTestThatCalledThem) {
  VerdictCounts c;
  FloorJudgement whole{.decision = FloorDecision::kRatchet};
  FloorJudgement late = whole;
  late.ratchet_rule = FloorJudgement::Rule::kLateGrowth;
  FloorJudgement steps = whole;
  steps.ratchet_rule = FloorJudgement::Rule::kLargeSteps;
  FloorJudgement flat{.decision = FloorDecision::kFlat};
  for (const FloorJudgement& j : {whole, late, late, steps, flat}) c.Add({.judgement = j});
  EXPECT_EQ(c.ratchet, 4);
  EXPECT_EQ(c.ratchet_late_growth, 2);
  EXPECT_EQ(c.ratchet_large_steps, 1);
  VerdictCounts twice = c;
  twice.Merge(c);
  EXPECT_EQ(twice.ratchet_late_growth, 4);
  EXPECT_EQ(twice.ratchet_large_steps, 2);
}

TEST(VerdictCountsTest, CountsAndMedian) {
  VerdictCounts c;
  EXPECT_TRUE(std::isnan(c.MedianMinutes()));
  c.Add({.judgement = {.decision = FloorDecision::kRatchet}, .minutes_elapsed = 5});
  c.Add({.judgement = {.decision = FloorDecision::kFlat}, .minutes_elapsed = 9});
  c.Add({.judgement = {.decision = FloorDecision::kInconclusive}, .minutes_elapsed = 15});
  EXPECT_EQ(c.MedianMinutes(), 9);
  c.Add({.judgement = {.decision = FloorDecision::kInconclusive}, .minutes_elapsed = 15});
  EXPECT_EQ(c.MedianMinutes(), 12);  // (9 + 15) / 2
  EXPECT_EQ(c.traces, 4);
  EXPECT_EQ(c.ratchet, 1);
  EXPECT_EQ(c.flat, 1);
  EXPECT_EQ(c.inconclusive, 2);
}

TEST(SummarizeTest, FalseAndMissedRatchetsByTruth) {
  TraceClass flat{.name = "flat", .truth = TraceTruth::kNotRatchet};
  TraceClass ratchet{.name = "ratchet", .truth = TraceTruth::kRatchet};
  TraceClass either{.name = "either", .truth = TraceTruth::kEither};
  auto counts = [](int r, int f, int i) {
    VerdictCounts c;
    for (int k = 0; k < r; ++k) c.Add({.judgement = {.decision = FloorDecision::kRatchet}});
    for (int k = 0; k < f; ++k) c.Add({.judgement = {.decision = FloorDecision::kFlat}});
    for (int k = 0; k < i; ++k) c.Add({.judgement = {.decision = FloorDecision::kInconclusive}});
    return c;
  };
  std::vector<ClassEvaluation> evals = {
      {.trace_class = flat, .old_rule = counts(2, 8, 0), .new_rule = counts(0, 5, 5)},
      {.trace_class = ratchet, .old_rule = counts(10, 0, 0), .new_rule = counts(7, 1, 2)},
      {.trace_class = either, .old_rule = counts(5, 5, 0), .new_rule = counts(9, 0, 1)}};
  RuleSummary old_rule = Summarize(evals, false);
  EXPECT_DOUBLE_EQ(old_rule.FalseRatchetRate(), 0.2);
  EXPECT_DOUBLE_EQ(old_rule.MissedRatchetRate(), 0);
  EXPECT_EQ(old_rule.worst_false_ratchet_class, "flat");
  RuleSummary new_rule = Summarize(evals, true);
  EXPECT_DOUBLE_EQ(new_rule.FalseRatchetRate(), 0);
  EXPECT_DOUBLE_EQ(new_rule.MissedRatchetRate(), 0.3);  // a Flat and two Inconclusive
  EXPECT_EQ(new_rule.worst_missed_ratchet_class, "ratchet");
  EXPECT_EQ(new_rule.not_ratchet_traces, 10);  // "either" counts for neither
}

TEST(EvaluateCorpusTest, DeterministicAndSeparatesTheRules) {
  auto corpus = StandardCorpus(0.5);
  std::vector<TraceClass> some;
  for (const TraceClass& c : corpus) {
    if (c.name == "slope+0.50 white25") some.insert(some.begin(), c);
    if (c.name == "slope+5.00 white10") some.push_back(c);
  }
  ASSERT_EQ(some.size(), 2u);
  auto old_rule = NewFixedDurationJudge({.max_slope_gib_per_h = 0.5});
  auto new_rule = NewSequentialJudge({.max_slope_gib_per_h = 0.5});
  auto a = EvaluateCorpus(some, 50, 3, *old_rule, *new_rule);
  auto b = EvaluateCorpus(some, 50, 3, *old_rule, *new_rule);
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(a[0].trace_class.name, "slope+0.50 white25");
  EXPECT_EQ(a[0].new_rule.minutes, b[0].new_rule.minutes);
  EXPECT_EQ(a[0].old_rule.ratchet, b[0].old_rule.ratchet);
  // At the threshold the seed's rule is a coin toss; the sequential rule
  // almost never says Ratchet there.
  EXPECT_GT(a[0].old_rule.ratchet, 10);
  EXPECT_LE(a[0].new_rule.ratchet, 2);
  // A steep, clean ratchet: both call it, the sequential rule within minutes.
  EXPECT_EQ(a[1].old_rule.ratchet, 50);
  EXPECT_EQ(a[1].new_rule.ratchet, 50);
  EXPECT_LE(a[1].new_rule.MedianMinutes(), 8);
  EXPECT_EQ(a[1].old_rule.MedianMinutes(), 15);
}

TEST(KnownNoiseBoundTest, SlopeVarianceIsSdSquaredOverSxxForWhiteNoise) {
  // 25 MiB per minute is 25 * 60 / 1024 = 1.464844 GiB/h; four minutes have
  // Sxx = 5, so the variance is 1.464844^2 / 5 = 0.429153 (GiB/h)^2.
  EXPECT_NEAR(KnownNoiseSlopeVariance(4, 25, 0), 0.429153, 1e-6);
}

TEST(KnownNoiseBoundTest, TwoFloorsUnderAr1GiveTheVarianceOfTheirDifference) {
  // With two floors the only slope is y2 - y1: variance 2 sd^2 (1 - rho).
  const double sd = 50 * 60 / 1024.0;
  EXPECT_NEAR(KnownNoiseSlopeVariance(2, 50, 0.5), 2 * sd * sd * 0.5, 1e-9);
  // Positive correlation makes 14 floors worth less than 14 independent ones.
  EXPECT_GT(KnownNoiseSlopeVariance(14, 50, 0.5), KnownNoiseSlopeVariance(14, 50, 0));
}

TEST(KnownNoiseBoundTest, RatchetAndFlatPowerByHand) {
  // +2.5 GiB/h over 4 floors of sd 25 MiB at a 1 % test of 0.5 GiB/h:
  // Phi(2 / 0.655107 - 2.326348) = Phi(0.726573) = 0.766274.
  EXPECT_NEAR(RatchetPowerBound(2.5, 0.5, KnownNoiseSlopeVariance(4, 25, 0), 0.01), 0.766274, 1e-5);
  // With the noise level estimated from the same 4 floors (t test, 2 degrees
  // of freedom, critical value 0.98 / sqrt(2 * 0.01 * 0.99) = 6.964557): the
  // noncentral t tail at delta = 2 / 0.655107 = 3.052978: the integral over
  // the chi-square(2) density exp(-v/2)/2 of Q(6.964557 sqrt(v/2) - delta),
  // 0.185147 by a 400 000-step Simpson rule in a separate script (a 2-million
  // sample simulation agrees: 0.1852).
  EXPECT_NEAR(ScaleFreeRatchetPowerBound(2.5, 0.5, KnownNoiseSlopeVariance(4, 25, 0), 4, 0.01),
              0.185147, 2e-4);
  // Many floors: the t test approaches the known-noise bound.
  EXPECT_NEAR(ScaleFreeRatchetPowerBound(1, 0.5, 0.04, 2000, 0.01),
              RatchetPowerBound(1, 0.5, 0.04, 0.01), 0.002);
  // Equivalence within +-0.5 at 5 %: with se 0.1 the acceptance half-width is
  // 0.5 - 1.644854 * 0.1 = 0.335515 (the far tail is negligible), power at 0 is
  // 2 Phi(3.35515) - 1 = 0.999207; with se 0.4 both tails count: C = 0.054655,
  // power 0.108682.
  EXPECT_NEAR(FlatPowerBound(0.5, 0.01, 0.05), 0.999207, 1e-5);
  EXPECT_NEAR(FlatPowerBound(0.5, 0.16, 0.05), 0.108682, 1e-5);
}

TEST(SegmentJudgeOptionsTest, HalfMinuteSegmentsHalveTheSlopeAndDoubleTheLengths) {
  const JudgeOptions o = SegmentJudgeOptions(JudgeOptions{}, 30);
  EXPECT_DOUBLE_EQ(o.max_slope_gib_per_h, 0.25);  // 0.5 GiB/h is 0.25 GiB per 30 "hours"
  EXPECT_EQ(o.max_minutes, 30);
  EXPECT_EQ(o.warmup_minutes, 2);
  EXPECT_EQ(o.min_floors, 6);
  EXPECT_EQ(o.late_growth_min_floors, 10);
  EXPECT_EQ(o.false_ratchet_rate, 0.01);
}

TEST(ReplaySampleRuleTest, SteepClimbIsARatchetAndMinutesCountFromTheRunStart) {
  // +20 GiB/h with little noise: clear within a few minutes under every rule.
  SampleTraceSpec spec{.slope_gib_per_h = 20, .wander_sd_mib = 2, .spike_mean_mib = 5};
  const auto samples = GenerateSampleTrace(spec, 11);
  for (const double segment : {60.0, 30.0}) {
    SampleRule rule{.segment_seconds = segment};
    const RunOutcome o = ReplaySampleRule(rule, samples);
    EXPECT_EQ(o.judgement.decision, FloorDecision::kRatchet) << segment;
    // No verdict before min_floors minutes after the warm-up minute.
    EXPECT_GE(o.minutes_elapsed, 4) << segment;
    EXPECT_LT(o.minutes_elapsed, 15) << segment;
  }
  SampleRule fixed{.sequential = false};
  const RunOutcome o = ReplaySampleRule(fixed, samples);
  EXPECT_EQ(o.judgement.decision, FloorDecision::kRatchet);
  EXPECT_EQ(o.minutes_elapsed, 15);
}

}  // namespace
}  // namespace allocguard::memory
