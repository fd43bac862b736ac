#include "operator/memory/verdict_evaluation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "operator/memory/distributions.h"

namespace allocguard::memory {

RunOutcome ReplayJudge(const FloorJudge& judge, std::span<const MinuteFloor> floors) {
  RunOutcome outcome;
  for (size_t n = 1; n <= floors.size(); ++n) {
    outcome.judgement = judge.Judge(floors.first(n), /*final=*/false);
    if (outcome.judgement.decision != FloorDecision::kContinue) {
      outcome.minutes_elapsed = floors[n - 1].minute + 1;
      return outcome;
    }
  }
  outcome.judgement = judge.Judge(floors, /*final=*/true);
  outcome.minutes_elapsed = floors.empty() ? 0 : floors.back().minute + 1;
  return outcome;
}

LineResiduals ResidualsAroundLine(std::span<const double> minutes, std::span<const double> mib) {
  LineResiduals out;
  const size_t n = std::min(minutes.size(), mib.size());
  if (n < 3) return out;
  const auto count = static_cast<double>(n);
  double mx = 0;
  double my = 0;
  for (size_t i = 0; i < n; ++i) {
    mx += minutes[i] / count;
    my += mib[i] / count;
  }
  double sxx = 0;
  double sxy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxx += (minutes[i] - mx) * (minutes[i] - mx);
    sxy += (minutes[i] - mx) * (mib[i] - my);
  }
  if (sxx <= 0) return out;
  const double b = sxy / sxx;
  double sse = 0;
  double lag = 0;
  for (size_t i = 0; i < n; ++i) out.mib.push_back(mib[i] - my - b * (minutes[i] - mx));
  for (size_t i = 0; i < n; ++i) {
    sse += out.mib[i] * out.mib[i];
    if (i + 1 < n) lag += out.mib[i] * out.mib[i + 1];
  }
  out.sd = std::sqrt(sse / (count - 2));
  out.lag1 = sse > 0 ? lag / sse : 0;
  return out;
}

ReplicaNoise MeasureReplicas(std::span<const std::vector<MinuteFloor>> replicas) {
  ReplicaNoise out;
  if (replicas.empty()) return out;
  std::vector<double> t;
  std::vector<std::vector<double>> y(replicas.size());
  std::vector<double> mean;
  std::vector<double> median;
  for (const MinuteFloor& first : replicas[0]) {
    std::vector<double> at;  // every replica's floor of this minute, MiB
    for (const std::vector<MinuteFloor>& r : replicas) {
      auto it = std::find_if(r.begin(), r.end(),
                             [&](const MinuteFloor& f) { return f.minute == first.minute; });
      if (it == r.end()) break;
      at.push_back(it->floor_bytes / kBytesPerMiB);
    }
    if (at.size() != replicas.size()) continue;
    t.push_back(first.minute);
    double sum = 0;
    for (size_t k = 0; k < at.size(); ++k) {
      y[k].push_back(at[k]);
      sum += at[k];
    }
    mean.push_back(sum / static_cast<double>(at.size()));
    std::sort(at.begin(), at.end());
    const size_t mid = at.size() / 2;
    median.push_back(at.size() % 2 == 1 ? at[mid] : (at[mid - 1] + at[mid]) / 2);
  }
  out.minutes = static_cast<int>(t.size());
  for (const std::vector<double>& series : y) out.each.push_back(ResidualsAroundLine(t, series));
  out.mean = ResidualsAroundLine(t, mean);
  out.median = ResidualsAroundLine(t, median);
  for (size_t i = 0; i < out.each.size(); ++i) {
    for (size_t j = i + 1; j < out.each.size(); ++j) {
      const std::vector<double>& a = out.each[i].mib;
      const std::vector<double>& b = out.each[j].mib;
      double ab = 0;
      double aa = 0;
      double bb = 0;
      for (size_t m = 0; m < a.size() && m < b.size(); ++m) {
        ab += a[m] * b[m];
        aa += a[m] * a[m];
        bb += b[m] * b[m];
      }
      out.correlations.push_back(aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0);
    }
  }
  return out;
}

WindowVerdicts JudgeFromEachStart(const FloorJudge& judge, std::span<const MinuteFloor> floors,
                                  int last_minute) {
  WindowVerdicts out;
  if (floors.empty()) return out;
  const int first = floors.front().minute;
  for (size_t s = 0; s < floors.size(); ++s) {
    std::vector<MinuteFloor> window;
    const int shift = floors[s].minute - first;
    for (size_t i = s; i < floors.size() && floors[i].minute - shift < last_minute; ++i) {
      window.push_back(floors[i]);
      window.back().minute -= shift;
    }
    if (window.empty()) break;  // the plan's last look comes before the first floor
    const RunOutcome o = ReplayJudge(judge, window);
    if (s == 0) out.from_start = o;
    // Undecided when the recording ended, before the judge's last look.
    const bool censored = o.minutes_elapsed == window.back().minute + 1 &&
                          o.minutes_elapsed < last_minute &&
                          judge.Judge(window, /*final=*/false).decision == FloorDecision::kContinue;
    if (censored) {
      out.letters.push_back('.');
      continue;
    }
    out.letters.push_back(o.judgement.decision == FloorDecision::kRatchet ? 'R'
                          : o.judgement.decision == FloorDecision::kFlat  ? 'F'
                                                                          : 'I');
    out.counts.Add(o);
  }
  return out;
}

void VerdictCounts::Add(const RunOutcome& outcome) {
  ++traces;
  switch (outcome.judgement.decision) {
    case FloorDecision::kRatchet:
      ++ratchet;
      ratchet_late_growth += outcome.judgement.ratchet_rule == FloorJudgement::Rule::kLateGrowth;
      ratchet_large_steps += outcome.judgement.ratchet_rule == FloorJudgement::Rule::kLargeSteps;
      break;
    case FloorDecision::kFlat:
      ++flat;
      break;
    case FloorDecision::kInconclusive:
    case FloorDecision::kContinue:  // a judge that never decides counts as no verdict
      ++inconclusive;
      break;
  }
  minutes.push_back(outcome.minutes_elapsed);
}

void VerdictCounts::Merge(const VerdictCounts& other) {
  traces += other.traces;
  ratchet += other.ratchet;
  flat += other.flat;
  inconclusive += other.inconclusive;
  ratchet_late_growth += other.ratchet_late_growth;
  ratchet_large_steps += other.ratchet_large_steps;
  not_ratchet_before_growth += other.not_ratchet_before_growth;
  flat_before_growth += other.flat_before_growth;
  minutes.insert(minutes.end(), other.minutes.begin(), other.minutes.end());
}

double VerdictCounts::MedianMinutes() const {
  if (minutes.empty()) return std::nan("");
  std::vector<int> sorted = minutes;
  std::sort(sorted.begin(), sorted.end());
  const size_t mid = sorted.size() / 2;
  if (sorted.size() % 2 == 1) return sorted[mid];
  return (sorted[mid - 1] + sorted[mid]) / 2.0;
}

uint64_t RerunFloorSeed(uint64_t trace_seed, int rerun) {
  return trace_seed ^ (0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(rerun));
}

std::vector<std::vector<VerdictCounts>> EvaluateRules(std::span<const TraceClass> corpus,
                                                      int traces_per_class, uint64_t seed,
                                                      std::span<const RuleUnderTest> rules,
                                                      const ReplicaOptions& replicas) {
  std::vector<std::vector<VerdictCounts>> out(corpus.size(),
                                              std::vector<VerdictCounts>(rules.size()));
  for (size_t k = 0; k < corpus.size(); ++k) {
    const uint64_t class_seed = seed * 1000003ULL + k;
    for (int i = 0; i < traces_per_class; ++i) {
      const TraceSpec spec = InstanceSpec(corpus[k], class_seed, i);
      const uint64_t trace_seed = class_seed * 7919ULL + static_cast<uint64_t>(i);
      const auto floors = GenerateCombinedFloorTrace(spec, replicas, trace_seed);
      for (size_t r = 0; r < rules.size(); ++r) {
        const auto judge = [&](const std::vector<MinuteFloor>& trace) {
          const size_t seen = std::min(trace.size(), static_cast<size_t>(rules[r].max_floors));
          return ReplayJudge(*rules[r].judge, std::span(trace).first(seen));
        };
        RunOutcome outcome = judge(floors);
        // Minutes into the last run (the one whose verdict counts) at its verdict.
        int last_run_minutes = outcome.minutes_elapsed;
        for (int rerun = 1;
             rerun <= rules[r].reruns && outcome.judgement.decision == FloorDecision::kInconclusive;
             ++rerun) {
          RunOutcome next =
              judge(GenerateCombinedFloorTrace(spec, replicas, RerunFloorSeed(trace_seed, rerun)));
          last_run_minutes = next.minutes_elapsed;
          next.minutes_elapsed += outcome.minutes_elapsed;
          outcome = next;
        }
        out[k][r].Add(outcome);
        // The last floor judged is that of minute last_run_minutes - 1; the
        // floor first rises at minute growth_start_minute + 1.
        if (spec.growth_start_minute > 0 && outcome.judgement.decision != FloorDecision::kRatchet &&
            last_run_minutes - 1 <= spec.growth_start_minute) {
          ++out[k][r].not_ratchet_before_growth;
          out[k][r].flat_before_growth += outcome.judgement.decision == FloorDecision::kFlat;
        }
      }
    }
  }
  return out;
}

std::vector<ClassEvaluation> EvaluateCorpus(std::span<const TraceClass> corpus,
                                            int traces_per_class, uint64_t seed,
                                            const FloorJudge& old_rule,
                                            const FloorJudge& new_rule) {
  constexpr int kAll = std::numeric_limits<int>::max();
  const RuleUnderTest rules[] = {{"old", &old_rule, kAll}, {"new", &new_rule, kAll}};
  const auto counts = EvaluateRules(corpus, traces_per_class, seed, rules);
  std::vector<ClassEvaluation> out;
  for (size_t k = 0; k < corpus.size(); ++k) {
    out.push_back({.trace_class = corpus[k], .old_rule = counts[k][0], .new_rule = counts[k][1]});
  }
  return out;
}

double MinutesQuantile(std::vector<int> minutes, double q) {
  if (minutes.empty()) return std::nan("");
  std::sort(minutes.begin(), minutes.end());
  const double rank = std::ceil(q * static_cast<double>(minutes.size()));
  const size_t index =
      static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(minutes.size()))) - 1;
  return minutes[index];
}

double RuleSummary::FalseRatchetRate() const {
  return not_ratchet_traces ? static_cast<double>(false_ratchets) / not_ratchet_traces : 0;
}

double RuleSummary::MissedRatchetRate() const {
  return ratchet_traces ? static_cast<double>(missed_ratchets) / ratchet_traces : 0;
}

RuleSummary SummarizeCounts(std::span<const std::string> names, std::span<const TraceTruth> truths,
                            std::span<const VerdictCounts> counts) {
  RuleSummary s;
  for (size_t k = 0; k < counts.size(); ++k) {
    const VerdictCounts& c = counts[k];
    if (c.traces == 0) continue;
    if (truths[k] == TraceTruth::kNotRatchet) {
      s.not_ratchet_traces += c.traces;
      s.false_ratchets += c.ratchet;
      const double rate = static_cast<double>(c.ratchet) / c.traces;
      if (rate > s.worst_false_ratchet_rate) {
        s.worst_false_ratchet_rate = rate;
        s.worst_false_ratchet_class = names[k];
      }
    } else if (truths[k] == TraceTruth::kRatchet) {
      const int missed = c.traces - c.ratchet;
      s.ratchet_traces += c.traces;
      s.missed_ratchets += missed;
      const double rate = static_cast<double>(missed) / c.traces;
      if (rate > s.worst_missed_ratchet_rate) {
        s.worst_missed_ratchet_rate = rate;
        s.worst_missed_ratchet_class = names[k];
      }
    }
  }
  return s;
}

RuleSummary Summarize(std::span<const ClassEvaluation> evaluations, bool new_rule) {
  std::vector<std::string> names;
  std::vector<TraceTruth> truths;
  std::vector<VerdictCounts> counts;
  for (const ClassEvaluation& e : evaluations) {
    names.push_back(e.trace_class.name);
    truths.push_back(e.trace_class.truth);
    counts.push_back(new_rule ? e.new_rule : e.old_rule);
  }
  return SummarizeCounts(names, truths, counts);
}

JudgeOptions SegmentJudgeOptions(const JudgeOptions& per_minute, double segment_seconds) {
  const int per = static_cast<int>(std::lround(60.0 / segment_seconds));
  JudgeOptions o = per_minute;
  o.max_slope_gib_per_h = per_minute.max_slope_gib_per_h / per;
  o.max_minutes = per_minute.max_minutes * per;
  o.warmup_minutes = per_minute.warmup_minutes * per;
  o.min_floors = per_minute.min_floors * per;
  o.late_growth_min_floors = per_minute.late_growth_min_floors * per;
  return o;
}

namespace {

std::unique_ptr<FloorJudge> NewRuleJudge(const SampleRule& rule) {
  const JudgeOptions options = SegmentJudgeOptions(rule.options, rule.segment_seconds);
  return rule.sequential ? NewSequentialJudge(options) : NewFixedDurationJudge(options);
}

RunOutcome ReplaySampleRuleWith(const SampleRule& rule, const FloorJudge& judge,
                                std::span<const MemorySample> samples) {
  const auto floors =
      ComputeSegmentFloors(samples, {.segment_seconds = rule.segment_seconds,
                                     .quantile = rule.quantile,
                                     .warmup_minutes = rule.options.warmup_minutes});
  RunOutcome outcome = ReplayJudge(judge, floors);
  // ReplayJudge counts segments; a verdict after segment k is available at
  // the end of that segment.
  outcome.minutes_elapsed =
      static_cast<int>(std::ceil(outcome.minutes_elapsed * rule.segment_seconds / 60.0 - 1e-9));
  return outcome;
}

}  // namespace

RunOutcome ReplaySampleRule(const SampleRule& rule, std::span<const MemorySample> samples) {
  return ReplaySampleRuleWith(rule, *NewRuleJudge(rule), samples);
}

std::vector<SampleClassEvaluation> EvaluateSampleCorpus(std::span<const SampleTraceClass> corpus,
                                                        int traces_per_class, uint64_t seed,
                                                        std::span<const SampleRule> rules) {
  std::vector<std::unique_ptr<FloorJudge>> judges;
  for (const SampleRule& rule : rules) judges.push_back(NewRuleJudge(rule));
  std::vector<SampleClassEvaluation> out;
  for (size_t k = 0; k < corpus.size(); ++k) {
    SampleClassEvaluation e{.trace_class = corpus[k],
                            .rules = std::vector<VerdictCounts>(rules.size())};
    const uint64_t class_seed = seed * 1000003ULL + k;
    for (int i = 0; i < traces_per_class; ++i) {
      const SampleTraceSpec spec = InstanceSampleSpec(corpus[k], class_seed, i);
      const auto samples =
          GenerateSampleTrace(spec, class_seed * 7919ULL + static_cast<uint64_t>(i));
      for (size_t r = 0; r < rules.size(); ++r) {
        e.rules[r].Add(ReplaySampleRuleWith(rules[r], *judges[r], samples));
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace allocguard::memory

namespace allocguard::memory {
namespace {

double Phi(double z) { return 1 - NormalUpperTail(z); }

}  // namespace

double KnownNoiseSlopeVariance(int n, double sd_mib, double ar1) {
  // The inverse of the AR(1) covariance sd^2 rho^|i-j| is tridiagonal:
  // (1 / (sd^2 (1 - rho^2))) T with T_ii = 1 + rho^2 inside, 1 at both ends,
  // T_i,i+1 = -rho. The GLS slope's variance is the (2,2) entry of
  // (X' Sigma^-1 X)^-1 with X = [1, minute].
  double a11 = 0;
  double a12 = 0;
  double a22 = 0;
  for (int i = 1; i <= n; ++i) {
    for (int j = std::max(1, i - 1); j <= std::min(n, i + 1); ++j) {
      double t;
      if (i != j) {
        t = -ar1;
      } else {
        t = (i == 1 || i == n) ? 1 : 1 + ar1 * ar1;
      }
      a11 += t;
      a12 += t * j;
      a22 += t * i * j;
    }
  }
  const double sd = sd_mib * kBytesPerMiB * 60.0 / kBytesPerGiB;  // MiB -> GiB/h per minute
  const double det = a11 * a22 - a12 * a12;
  return sd * sd * (1 - ar1 * ar1) * a11 / det;
}

double RatchetPowerBound(double slope, double threshold, double variance, double alpha_ratchet) {
  return Phi((slope - threshold) / std::sqrt(variance) - NormalUpperQuantile(alpha_ratchet));
}

double ScaleFreeRatchetPowerBound(double slope, double threshold, double variance, int n,
                                  double alpha_ratchet) {
  const double dof = n - 2;
  if (dof < 1) return 0;
  const double delta = (slope - threshold) / std::sqrt(variance);
  const double c = StudentTUpperQuantile(alpha_ratchet, dof);
  // P((Z + delta) / sqrt(V / dof) > c) with V ~ chi-square(dof):
  // the integral over v of P(Z > c sqrt(v / dof) - delta) times the density
  // of V, by Simpson's rule on [0, dof + 60 sqrt(2 dof) + 60].
  const double log_norm = -(dof / 2) * std::log(2.0) - std::lgamma(dof / 2);
  const double hi = dof + 60 * std::sqrt(2 * dof) + 60;
  const int steps = 20000;
  const double h = hi / steps;
  double sum = 0;
  for (int i = 0; i <= steps; ++i) {
    const double v = i * h;
    double density = 0;
    if (v > 0) density = std::exp(log_norm + (dof / 2 - 1) * std::log(v) - v / 2);
    if (v == 0 && dof == 2) density = 0.5;  // the chi-square(2) density at 0
    const double w = (i == 0 || i == steps) ? 1 : (i % 2 == 1 ? 4 : 2);
    sum += w * density * NormalUpperTail(c * std::sqrt(v / dof) - delta);
  }
  return sum * h / 3;
}

double FlatPowerBound(double threshold, double variance, double alpha_flat) {
  const double se = std::sqrt(variance);
  auto size = [&](double c) { return Phi((c - threshold) / se) - Phi((-c - threshold) / se); };
  double lo = 0;
  double hi = threshold;
  if (size(hi) <= alpha_flat) return 2 * Phi(hi / se) - 1;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (size(mid) > alpha_flat ? hi : lo) = mid;
  }
  return 2 * Phi(lo / se) - 1;
}

}  // namespace allocguard::memory
