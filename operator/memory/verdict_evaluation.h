#pragma once

// Runs floor judges over traces the way the replay engine asks them, and counts
// what they conclude: the figures `allocguard evaluate-verdicts` prints.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "operator/memory/floor_judge.h"
#include "operator/memory/floor_trace_generator.h"
#include "operator/memory/sample_trace_generator.h"

namespace allocguard::memory {

struct RunOutcome {
  FloorJudgement judgement;
  // Minutes from the start of the run (warm-up included) until the verdict:
  // the minute of the last floor used, plus one.
  int minutes_elapsed = 0;
};

// Asks the judge after every floor (final == false) and stops at its first
// decision; if none comes, asks once more with final == true over all floors,
// as the replay engine does with early stopping enabled.
RunOutcome ReplayJudge(const FloorJudge& judge, std::span<const MinuteFloor> floors);

struct VerdictCounts {
  int traces = 0;
  int ratchet = 0;
  int flat = 0;
  int inconclusive = 0;
  std::vector<int> minutes;  // minutes_elapsed of every trace
  // Ratchets called by the sequential judge's late-growth scan and by its
  // large-steps rule (FloorJudgement::ratchet_rule); the rest by its
  // whole-run test.
  int ratchet_late_growth = 0;
  int ratchet_large_steps = 0;
  // Traces whose growth starts mid-run (TraceSpec::growth_start_minute) that
  // did not end Ratchet although the last floor judged was before the growth
  // began: no judge that stops there could have seen it (EvaluateRules).
  int not_ratchet_before_growth = 0;
  // Of those, the ones that ended Flat (the rest ended Inconclusive).
  int flat_before_growth = 0;

  void Add(const RunOutcome& outcome);
  void Merge(const VerdictCounts& other);
  double MedianMinutes() const;  // NaN when empty
};

// Recorded runs (docs/verdicts.md, "Recorded runs of 30 minutes").

// Residuals of points (MiB) around their own least-squares line against
// `minutes`, their sd (n - 2 degrees of freedom) and lag-1 autocorrelation
// (sum of r_i r_{i+1} over sum of r_i^2). Empty below three points.
struct LineResiduals {
  std::vector<double> mib;
  double sd = 0;
  double lag1 = 0;
};
LineResiduals ResidualsAroundLine(std::span<const double> minutes, std::span<const double> mib);

// Recordings of the same variant and load run side by side (canary
// replicas): over the minutes every one has a floor, each one's residuals
// around its own line, the correlation of every pair's residuals in the same
// minute (R, the --replica-correlation of the wide corpus; pairs in the order
// (0,1), (0,2), ..., (1,2), ...), and the residuals of the mean and of the
// median of their floors, which a judge of the replicas' combined floor would
// see (the median of two is their mean).
struct ReplicaNoise {
  int minutes = 0;
  std::vector<LineResiduals> each;
  std::vector<double> correlations;
  LineResiduals mean;
  LineResiduals median;
};
ReplicaNoise MeasureReplicas(std::span<const std::vector<MinuteFloor>> replicas);

// A recording longer than a canary's plan, judged as if a canary had started
// at each of its minutes: window s is the floors from the (s+1)-th on,
// renumbered so that the first is the first judged minute of a run, up to the
// judge's last look (last_minute, warm-up included: the canary's
// maxDuration). The judge stops at its verdict. A window that reaches the
// recording's end undecided before that look is censored: a canary would
// still be running. `letters` has one character per start:
// R Ratchet, F Flat, I Inconclusive, . censored; `counts` the decided ones.
struct WindowVerdicts {
  std::string letters;
  VerdictCounts counts;
  RunOutcome from_start;  // the window of start 0
};
WindowVerdicts JudgeFromEachStart(const FloorJudge& judge, std::span<const MinuteFloor> floors,
                                  int last_minute);

struct ClassEvaluation {
  TraceClass trace_class;
  VerdictCounts old_rule;
  VerdictCounts new_rule;
};

// Evaluates both judges on traces_per_class traces of every class; trace i of
// class k is generated from a seed derived from (seed, k, i).
std::vector<ClassEvaluation> EvaluateCorpus(std::span<const TraceClass> corpus,
                                            int traces_per_class, uint64_t seed,
                                            const FloorJudge& old_rule, const FloorJudge& new_rule);

// A judge under evaluation and the floors it may see: a rule planned for a
// shorter run than the traces is given only its first max_floors floors.
//
// reruns: as a canary does with an Inconclusive candidate
// (canary.inconclusiveReruns), a trace that ends Inconclusive is followed by
// up to this many fresh traces of the same instance (the same true slope and
// noise class, new noise: RerunFloorSeed); the last run's verdict counts, and
// its minutes are the sum over the runs.
struct RuleUnderTest {
  std::string name;
  const FloorJudge* judge = nullptr;
  int max_floors = 0;
  int reruns = 0;
};

// The generator seed of rerun `rerun` (>= 1) of the trace generated from
// `trace_seed`.
uint64_t RerunFloorSeed(uint64_t trace_seed, int rerun);

// Every rule on traces_per_class traces of every class (trace i of class k
// generated as EvaluateCorpus does); result[k][r] is rule r on class k.
// replicas: each trace (and each rerun) is that many canary replicas side by
// side, and every rule sees their combined floors (GenerateCombinedFloorTrace;
// with one replica, the trace itself).
std::vector<std::vector<VerdictCounts>> EvaluateRules(std::span<const TraceClass> corpus,
                                                      int traces_per_class, uint64_t seed,
                                                      std::span<const RuleUnderTest> rules,
                                                      const ReplicaOptions& replicas = {});

// The q-quantile (0 < q <= 1) of minutes, nearest rank; NaN when empty.
double MinutesQuantile(std::vector<int> minutes, double q);

// Pooled figures of one rule over a corpus evaluation.
struct RuleSummary {
  int not_ratchet_traces = 0;
  int false_ratchets = 0;  // Ratchet on a kNotRatchet trace
  int ratchet_traces = 0;
  int missed_ratchets = 0;              // anything but Ratchet on a kRatchet trace
  double worst_false_ratchet_rate = 0;  // highest rate of a single class
  std::string worst_false_ratchet_class;
  double worst_missed_ratchet_rate = 0;
  std::string worst_missed_ratchet_class;
  double FalseRatchetRate() const;
  double MissedRatchetRate() const;
};

RuleSummary Summarize(std::span<const ClassEvaluation> evaluations, bool new_rule);

// The same figures for any rule: counts[k] are the rule's outcomes on class k,
// whose name and truth are names[k] and truths[k].
RuleSummary SummarizeCounts(std::span<const std::string> names, std::span<const TraceTruth> truths,
                            std::span<const VerdictCounts> counts);

// A way of judging 2-second samples: reduce them to floors (segment length,
// quantile; see ComputeSegmentFloors), then ask a judge after every floor.
// With segments shorter than a minute the judge works in segments: its
// threshold, run length, warm-up and minimum floors are converted
// (SegmentJudgeOptions), and the minutes to a verdict are converted back.
struct SampleRule {
  std::string name;
  double segment_seconds = 60;
  double quantile = 0;
  bool sequential = true;  // false: the fixed-duration rule
  JudgeOptions options;    // in minutes
};

// Judge options for floors of segment_seconds: slopes per segment, lengths in
// segments. REQUIRES: 60 is a multiple of segment_seconds.
JudgeOptions SegmentJudgeOptions(const JudgeOptions& per_minute, double segment_seconds);

// Judges one sample trace with a rule as the replay engine would.
RunOutcome ReplaySampleRule(const SampleRule& rule, std::span<const MemorySample> samples);

struct SampleClassEvaluation {
  SampleTraceClass trace_class;
  std::vector<VerdictCounts> rules;  // one per rule, in the order given
};

// Every rule on traces_per_class traces of every class; trace i of class k is
// generated from a seed derived from (seed, k, i), the same for every rule.
std::vector<SampleClassEvaluation> EvaluateSampleCorpus(std::span<const SampleTraceClass> corpus,
                                                        int traces_per_class, uint64_t seed,
                                                        std::span<const SampleRule> rules);

}  // namespace allocguard::memory

namespace allocguard::memory {

// What no rule can beat on per-minute floors: bounds for a judge that knew
// the noise exactly (Gaussian, stationary AR(1) of known sd and lag-1
// correlation) and kept its false-Ratchet rate at most alpha_ratchet and its
// false-Flat rate at most alpha_flat at a true slope of exactly ±threshold,
// whatever the noise. The estimators and tests behind them are the best
// possible ones (the generalized least-squares slope and the Neyman–Pearson
// and uniformly most powerful equivalence tests), so every real judge, which
// has to estimate the noise from the same floors, does worse. All slopes in
// GiB/h.

// Variance of the generalized least-squares slope of floors at minutes 1..n
// under stationary AR(1) noise with marginal sd sd_mib and lag-1 correlation
// ar1, in (GiB/h)^2. With ar1 = 0 this is sd^2 / Sxx.
double KnownNoiseSlopeVariance(int n, double sd_mib, double ar1);

// The highest chance of a Ratchet verdict from the first n floors for a true
// slope `slope` > threshold: Phi((slope - threshold) / se - z_alpha).
double RatchetPowerBound(double slope, double threshold, double variance, double alpha_ratchet);

// The same chance when the noise level is not known and has to be estimated
// from the same n floors (its correlation still known): the power of the
// one-sided t test with n - 2 degrees of freedom at level alpha_ratchet, the
// most powerful test whose answer does not depend on the scale of the noise
// (uniformly most powerful invariant); a rule can beat it at one noise level
// only by doing worse at another. A noncentral t tail, by numerical
// integration over the chi-square of the noise estimate.
double ScaleFreeRatchetPowerBound(double slope, double threshold, double variance, int n,
                                  double alpha_ratchet);

// The highest chance of a Flat verdict from the first n floors of a level
// floor (true slope 0): the power at 0 of the uniformly most powerful test of
// |slope| >= threshold at level alpha_flat, which rejects when
// |estimate| < C with Phi((C - threshold) / se) - Phi((-C - threshold) / se)
// = alpha_flat.
double FlatPowerBound(double threshold, double variance, double alpha_flat);

}  // namespace allocguard::memory
