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

// Residuals [1, -1, 0, -1, 1] sum to 0 and are orthogonal to t = 1..5, so
// they are exactly what is left around the line 2t: sse 4, sd sqrt(4 / 3),
// lag-1 (-1 + 0 + 0 - 1) / 4.
TEST(ResidualsAroundLineTest, HandComputedSdAndLag1) {
  const std::vector<double> t = {1, 2, 3, 4, 5};
  const std::vector<double> mib = {3, 3, 6, 7, 11};
  const LineResiduals r = ResidualsAroundLine(t, mib);
  ASSERT_EQ(r.mib.size(), 5U);
  const double want[] = {1, -1, 0, -1, 1};
  for (size_t i = 0; i < 5; ++i) EXPECT_NEAR(r.mib[i], want[i], 1e-9) << i;
  EXPECT_NEAR(r.sd, std::sqrt(4.0 / 3), 1e-9);
  EXPECT_NEAR(r.lag1, -0.5, 1e-9);
  EXPECT_TRUE(
      ResidualsAroundLine(std::vector<double>{1, 2}, std::vector<double>{1, 2}).mib.empty());
}

// Replica a: 100 + 2t + [1, -1, 0, -1, 1] MiB; replica b: 300 + 5t + [1, 1,
// -4, 1, 1] MiB and one more minute a does not have. Over the five common
// minutes the residuals are uncorrelated (1 - 1 + 0 - 1 + 1 = 0); b's sd is
// sqrt(20 / 3), its lag-1 (1 - 4 - 4 + 1) / 20; the mean's residuals (and the
// median's, of two) are [1, 0, -2, 0, 1]: sd sqrt(6 / 3), lag-1 0.
TEST(MeasureReplicasTest, HandComputedCorrelationAndNoiseOfTheMean) {
  const double ra[] = {1, -1, 0, -1, 1};
  const double rb[] = {1, 1, -4, 1, 1, 0};
  std::vector<MinuteFloor> a;
  std::vector<MinuteFloor> b;
  for (int m = 1; m <= 6; ++m) {
    if (m <= 5) a.push_back({.minute = m, .floor_bytes = (100 + 2 * m + ra[m - 1]) * kBytesPerMiB});
    b.push_back({.minute = m, .floor_bytes = (300 + 5 * m + rb[m - 1]) * kBytesPerMiB});
  }
  const std::vector<std::vector<MinuteFloor>> pair = {a, b};
  const ReplicaNoise p = MeasureReplicas(pair);
  EXPECT_EQ(p.minutes, 5);
  ASSERT_EQ(p.correlations.size(), 1U);
  EXPECT_NEAR(p.correlations[0], 0, 1e-9);
  ASSERT_EQ(p.each.size(), 2U);
  EXPECT_NEAR(p.each[0].sd, std::sqrt(4.0 / 3), 1e-9);
  EXPECT_NEAR(p.each[1].sd, std::sqrt(20.0 / 3), 1e-9);
  EXPECT_NEAR(p.each[1].lag1, -0.3, 1e-9);
  EXPECT_NEAR(p.mean.sd, std::sqrt(2.0), 1e-9);
  EXPECT_NEAR(p.mean.lag1, 0, 1e-9);
  EXPECT_NEAR(p.median.sd, std::sqrt(2.0), 1e-9);
  // The same noise in both: R = 1.
  const std::vector<std::vector<MinuteFloor>> same = {a, a};
  EXPECT_NEAR(MeasureReplicas(same).correlations[0], 1, 1e-9);
}

// Three replicas level at 100 MiB, one minute each held 30 MiB high in turn
// (minutes 1, 2, 3) and the rest level: the median never moves, the mean is
// 110 MiB in those three minutes and 100 after (residual sd 2.988072 MiB,
// lag-1 2/15 around its line, computed by hand in a script). Each replica's
// residuals are a spike, and two spikes in different minutes correlate
// negatively: -0.512148, -0.361158, -0.277449 for the pairs (0,1), (0,2),
// (1,2).
TEST(MeasureReplicasTest, TheMedianOfThreeIgnoresOneReplicasHighMinute) {
  std::vector<std::vector<MinuteFloor>> r(3);
  for (int m = 1; m <= 8; ++m) {
    for (int k = 0; k < 3; ++k) {
      const double mib = 100 + (m == k + 1 ? 30 : 0);
      r[k].push_back({.minute = m, .floor_bytes = mib * kBytesPerMiB});
    }
  }
  const ReplicaNoise n = MeasureReplicas(r);
  EXPECT_EQ(n.minutes, 8);
  ASSERT_EQ(n.correlations.size(), 3U);
  EXPECT_NEAR(n.median.sd, 0, 1e-9);
  EXPECT_NEAR(n.mean.sd, 2.988072, 1e-6);
  EXPECT_NEAR(n.mean.lag1, 2.0 / 15, 1e-9);
  EXPECT_NEAR(n.correlations[0], -0.512148, 1e-6);
  EXPECT_NEAR(n.correlations[1], -0.361158, 1e-6);
  EXPECT_NEAR(n.correlations[2], -0.277449, 1e-6);
}

// Ten floors (minutes 1..10), a judge that is Flat on its 4th floor: the
// windows starting at minutes 0..6 are Flat 5 minutes into the run (the 4th
// floor renumbered to minute 4), the last three end with the recording.
// When the judge's last look is at 4 minutes (3 floors), it never sees a 4th
// floor: a window that reached that look is Inconclusive there, one that
// ended before it is censored.
TEST(JudgeFromEachStartTest, RenumbersEachWindowAndCensorsTheOnesTheRecordingCutShort) {
  const DecidesAt judge(4, FloorDecision::kFlat);
  const WindowVerdicts w = JudgeFromEachStart(judge, Minutes(1, 10), /*last_minute=*/30);
  EXPECT_EQ(w.letters, "FFFFFFF...");
  EXPECT_EQ(w.counts.traces, 7);
  EXPECT_EQ(w.counts.flat, 7);
  EXPECT_EQ(w.counts.MedianMinutes(), 5);
  EXPECT_EQ(w.from_start.judgement.decision, FloorDecision::kFlat);
  EXPECT_EQ(w.from_start.minutes_elapsed, 5);
  const WindowVerdicts short_plan = JudgeFromEachStart(judge, Minutes(1, 10), /*last_minute=*/4);
  EXPECT_EQ(short_plan.letters, "IIIIIIII..");
  EXPECT_EQ(short_plan.counts.inconclusive, 8);
  EXPECT_EQ(short_plan.counts.MedianMinutes(), 4);
  EXPECT_TRUE(JudgeFromEachStart(judge, {}, 30).letters.empty());
  // A plan that ends before the first floor (minute 1) has no window.
  EXPECT_TRUE(JudgeFromEachStart(judge, Minutes(1, 10), /*last_minute=*/1).letters.empty());
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
  EXPECT_EQ(counts[0][0].flat_before_growth, 4);
  EXPECT_EQ(counts[0][1].not_ratchet_before_growth, 0);
  EXPECT_EQ(counts[0][1].flat_before_growth, 0);
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
