// `allocguard evaluate-verdicts`: how often the floor judges are wrong, and
// how long they take, on a synthetic corpus with known truth (and, given
// replay CSVs, what they conclude on real recorded runs). docs/verdicts.md
// explains the corpus and shows the figures.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "operator/cli/cli_util.h"
#include "operator/cli/commands.h"
#include "operator/common/status.h"
#include "operator/memory/floor_judge.h"
#include "operator/memory/floor_trace_generator.h"
#include "operator/memory/memory_sample.h"
#include "operator/memory/sample_trace_generator.h"
#include "operator/memory/sequential_judge.h"
#include "operator/memory/verdict_evaluation.h"
#include "operator/replay/sample_csv.h"
#include "operator/replay/variant_result.h"

namespace allocguard::cli {
namespace {

using memory::ClassEvaluation;
using memory::RuleSummary;
using memory::VerdictCounts;

struct EvaluateArgs {
  // The new judge's large-steps rule and wander check (JudgeOptions).
  double noise_ceiling_mib = memory::StepJudgeOptions({}).noise_ceiling_mib;
  bool ratchet_checks_differences = memory::StepJudgeOptions({}).ratchet_checks_differences;
  double new_false_flat_rate = memory::StepJudgeOptions({}).false_flat_rate;
  double new_spending_rho = memory::StepJudgeOptions({}).spending_rho;
  double new_extension_share = memory::StepJudgeOptions({}).extension_share;
  bool late_growth_hinge = memory::StepJudgeOptions({}).late_growth_hinge;
  double late_growth_trend_p = memory::StepJudgeOptions({}).late_growth_trend_p;
  bool outlier_screen =
      memory::StepJudgeOptions({}).noise == memory::SlopeNoise::kScreenedQuadraticResiduals;
  int traces_per_class = 1000;
  uint64_t seed = 1;
  double max_slope_gib_per_h = 0.5;
  // The planned run (warm-up included): the run length of the fixed rule,
  // today's sequential judge and the standard corpus.
  int planned_minutes = 15;
  // How long the extended judge may run on when undecided at the planned end.
  int max_minutes = 30;
  double extension_share = memory::JudgeOptions{}.extension_share;
  std::string corpus = "wide";
  double spending_rho = memory::JudgeOptions{}.spending_rho;
  std::vector<std::string> csv_paths;
  // Groups of recordings of one variant run side by side ("a.csv,b.csv[,...]"):
  // the noise they share.
  std::vector<std::string> side_by_side;
  int sample_traces_per_class = 0;
  // Canary replicas of one variant side by side (wide corpus): how many, the
  // correlation of their floor noise, how their floors are combined and
  // whether an outlier minute is in one replica or in all.
  int replicas = 1;
  double replica_correlation = 0;
  std::string replica_combine = "mean";
  std::string replica_outlier = "one";
};

// The judge options of the new rule for a plan: `base` with the large-steps
// rule and the wander check as the flags set them.
memory::JudgeOptions NewJudgeOptions(const memory::JudgeOptions& base, const EvaluateArgs& args) {
  memory::JudgeOptions out = memory::StepJudgeOptions(base);
  out.noise_ceiling_mib = args.noise_ceiling_mib;
  out.ratchet_checks_differences = args.ratchet_checks_differences;
  out.false_flat_rate = args.new_false_flat_rate;
  out.spending_rho = args.new_spending_rho;
  out.extension_share = args.new_extension_share;
  out.late_growth_hinge = args.late_growth_hinge;
  out.late_growth_trend_p = args.late_growth_trend_p;
  out.noise = args.outlier_screen ? memory::SlopeNoise::kScreenedQuadraticResiduals
                                  : memory::SlopeNoise::kQuadraticResiduals;
  return out;
}

std::string Percent(int count, int total) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%5.1f%%", total ? 100.0 * count / total : 0.0);
  return buf;
}

std::string Rate(double r) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.2f%%", 100 * r);
  return buf;
}

void PrintCounts(const VerdictCounts& c) {
  std::printf(" %s %s %s %6.1f |", Percent(c.ratchet, c.traces).c_str(),
              Percent(c.flat, c.traces).c_str(), Percent(c.inconclusive, c.traces).c_str(),
              c.MedianMinutes());
}

// Median minutes over every class whose spec matches, pooled over noises.
double PooledMedian(const std::vector<ClassEvaluation>& evals, bool new_rule,
                    bool (*match)(const memory::TraceClass&)) {
  VerdictCounts pooled;
  for (const ClassEvaluation& e : evals) {
    if (match(e.trace_class)) pooled.Merge(new_rule ? e.new_rule : e.old_rule);
  }
  return pooled.MedianMinutes();
}

bool PlainClass(const memory::TraceClass& c) {
  return c.varies == memory::TraceClass::Varies::kNothing && c.spec.step_mib == 0 &&
         c.spec.outlier_mib == 0;
}

void PrintMedianRow(const char* label, const std::vector<ClassEvaluation>& evals,
                    bool (*match)(const memory::TraceClass&), const char* target) {
  std::printf("%-44s %10.1f %10.1f   %s\n", label, PooledMedian(evals, false, match),
              PooledMedian(evals, true, match), target);
}

// Share of the traces of matching classes that had a verdict by `minutes`.
double PooledShareBy(const std::vector<ClassEvaluation>& evals, bool new_rule,
                     bool (*match)(const memory::TraceClass&), int minutes) {
  int total = 0;
  int by = 0;
  for (const ClassEvaluation& e : evals) {
    if (!match(e.trace_class)) continue;
    for (int m : (new_rule ? e.new_rule : e.old_rule).minutes) {
      ++total;
      by += m <= minutes;
    }
  }
  return total ? static_cast<double>(by) / total : 0;
}

// The known-noise bounds of verdict_evaluation.h for the corpus' targets,
// pooled over the plain classes (a constant slope in stationary noise) the
// targets are measured on. Classes with steps, outliers or late growth get no
// bound (counted as 0 missed), so the pooled missed-Ratchet bound stays a
// lower bound.
void PrintKnownNoiseBounds(const std::vector<ClassEvaluation>& evals,
                           const memory::JudgeOptions& options) {
  const double threshold = options.max_slope_gib_per_h;
  const double alpha_r = options.false_ratchet_rate;
  const double alpha_f = options.false_flat_rate;
  const int last_floors = options.max_minutes - options.warmup_minutes;
  const int ratchet_floors = 5 - options.warmup_minutes;  // a verdict by minute 5
  const int flat_floors = 10 - options.warmup_minutes;    // a verdict by minute 10
  double missed = 0;
  double ratchet_by5 = 0;
  double ratchet_by5_estimated = 0;
  double flat_by10 = 0;
  int ratchet_classes = 0;
  int fast_classes = 0;
  int flat_classes = 0;
  std::string worst;
  for (const ClassEvaluation& e : evals) {
    const memory::TraceClass& c = e.trace_class;
    const double s = c.spec.slope_gib_per_h;
    const auto var = [&](int n) {
      return memory::KnownNoiseSlopeVariance(n, c.spec.noise_sd_mib, c.spec.noise_ar1);
    };
    if (c.truth == memory::TraceTruth::kRatchet) {
      ++ratchet_classes;
      if (PlainClass(c)) {
        const double m = 1 - memory::RatchetPowerBound(s, threshold, var(last_floors), alpha_r);
        missed += m;
        if (m >= 0.005) {
          char buf[96];
          std::snprintf(buf, sizeof buf, "%s%s %.1f%%", worst.empty() ? "" : ", ", c.name.c_str(),
                        100 * m);
          worst += buf;
        }
      }
    }
    if (PlainClass(c) && s == 2.5) {
      ++fast_classes;
      const double v = var(ratchet_floors);
      // A Ratchet, or a (false) Flat, from the first floors.
      const double false_flat = memory::RatchetPowerBound(-s, -threshold, v, alpha_f);
      ratchet_by5 += memory::RatchetPowerBound(s, threshold, v, alpha_r) + false_flat;
      ratchet_by5_estimated +=
          memory::ScaleFreeRatchetPowerBound(s, threshold, v, ratchet_floors, alpha_r) + false_flat;
    }
    if (PlainClass(c) && s == 0) {
      ++flat_classes;
      const double v = var(flat_floors);
      flat_by10 += memory::FlatPowerBound(threshold, v, alpha_f) +
                   memory::RatchetPowerBound(0, threshold, v, alpha_r);
    }
  }
  std::printf(
      "\nwhat no rule can beat on per-minute floors: a judge that knew the noise exactly (sd and\n"
      "AR(1) correlation of each class) and kept false Ratchet <= %.0f%% and false Flat <= %.0f%% "
      "at\nslope = +-threshold in every class (verdict_evaluation.h):\n",
      100 * alpha_r, 100 * alpha_f);
  std::printf("%-44s %10s %10s %10s\n", "", "old", "new", "bound");
  std::printf("%-44s %10s %10s %10s\n", "missed Ratchet (slope >= 2x threshold, pooled)", "", "",
              (">= " + Rate(ratchet_classes ? missed / ratchet_classes : 0)).c_str());
  std::printf("  (classes with a bound >= 0.5%%: %s)\n", worst.empty() ? "none" : worst.c_str());
  std::printf("%-44s %10s %10s %10s\n", "verdict by minute 5, +2.50 GiB/h (pooled)",
              Rate(PooledShareBy(
                       evals, false,
                       [](const memory::TraceClass& c) {
                         return PlainClass(c) && c.spec.slope_gib_per_h == 2.5;
                       },
                       5))
                  .c_str(),
              Rate(PooledShareBy(
                       evals, true,
                       [](const memory::TraceClass& c) {
                         return PlainClass(c) && c.spec.slope_gib_per_h == 2.5;
                       },
                       5))
                  .c_str(),
              ("<= " + Rate(fast_classes ? ratchet_by5 / fast_classes : 0)).c_str());
  std::printf("%-44s %10s %10s %10s\n", "  the same, noise level estimated (t test)", "", "",
              ("<= " + Rate(fast_classes ? ratchet_by5_estimated / fast_classes : 0)).c_str());
  std::printf("%-44s %10s %10s %10s\n", "verdict by minute 10, flat (pooled)",
              Rate(PooledShareBy(
                       evals, false,
                       [](const memory::TraceClass& c) {
                         return PlainClass(c) && c.spec.slope_gib_per_h == 0;
                       },
                       10))
                  .c_str(),
              Rate(PooledShareBy(
                       evals, true,
                       [](const memory::TraceClass& c) {
                         return PlainClass(c) && c.spec.slope_gib_per_h == 0;
                       },
                       10))
                  .c_str(),
              ("<= " + Rate(flat_classes ? flat_by10 / flat_classes : 0)).c_str());
  std::printf(
      "(a median of at most 5 or 10 minutes needs a verdict by then on at least 50%% of the "
      "traces)\n");
}

// The noise of a per-segment statistic of a recorded run: the judged bytes of
// complete minutes after warm-up, cut into segments of segment_s seconds, each
// summarized by its `quantile` (0: the minimum, which is the floor when the
// segment is a minute), fitted with a straight line against time.
struct SegmentNoise {
  int points = 0;
  double sd_mib = 0;        // residual sd, n - 2 degrees of freedom
  double lag1 = 0;          // lag-1 autocorrelation of the residuals
  double se_gib_per_h = 0;  // the slope's standard error for white residuals
};

SegmentNoise MeasureSegmentNoise(const std::vector<memory::MemorySample>& samples, double start_s,
                                 double end_s, double segment_s, double quantile) {
  std::vector<double> x;
  std::vector<double> y;
  for (double a = start_s; a + segment_s <= end_s + 1e-9; a += segment_s) {
    std::vector<double> v;
    for (const memory::MemorySample& m : samples) {
      if (m.t_seconds >= a && m.t_seconds < a + segment_s) {
        v.push_back(static_cast<double>(m.JudgedBytes()) / memory::kBytesPerMiB);
      }
    }
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    const double pos = quantile * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<size_t>(pos);
    const double frac = pos - static_cast<double>(lo);
    y.push_back(lo + 1 < v.size() ? v[lo] * (1 - frac) + v[lo + 1] * frac : v[lo]);
    x.push_back((a + segment_s / 2) / 60);
  }
  SegmentNoise out;
  out.points = static_cast<int>(x.size());
  const memory::LineResiduals r = memory::ResidualsAroundLine(x, y);
  if (r.mib.empty()) return out;
  double mx = 0;
  for (double v : x) mx += v / static_cast<double>(x.size());
  double sxx = 0;
  for (double v : x) sxx += (v - mx) * (v - mx);
  out.sd_mib = r.sd;
  out.lag1 = r.lag1;
  out.se_gib_per_h = out.sd_mib / std::sqrt(sxx) * 60 / 1024;
  return out;
}

void PrintSegmentNoise(const std::string& path, const std::vector<memory::MemorySample>& samples,
                       const std::vector<memory::MinuteFloor>& floors) {
  if (floors.empty()) return;
  const double start_s = 60.0 * floors.front().minute;
  const double end_s = 60.0 * (floors.back().minute + 1);
  struct Kind {
    const char* name;
    double segment_s;
    double quantile;
  };
  const Kind kinds[] = {{"min/60s (floor)", 60, 0},
                        {"p10/60s", 60, 0.1},
                        {"median/60s", 60, 0.5},
                        {"min/30s", 30, 0},
                        {"min/10s", 10, 0}};
  for (const Kind& k : kinds) {
    const SegmentNoise sn = MeasureSegmentNoise(samples, start_s, end_s, k.segment_s, k.quantile);
    std::printf(
        "  %-40s %-16s %4d points  residual sd %6.1f MiB  lag-1 %+5.2f  slope se %.3f GiB/h\n",
        path.c_str(), k.name, sn.points, sn.sd_mib, sn.lag1, sn.se_gib_per_h);
  }
}

std::vector<memory::SampleRule> SampleRules(const memory::JudgeOptions& options);

// A recorded run's samples and the judge settings its CSV header recorded
// (threshold, warm-up, sample interval, duration), falling back to the
// command's flags.
struct RecordedRun {
  std::vector<memory::MemorySample> samples;
  replay::JudgeSettings settings;
  memory::JudgeOptions options;
};

Result<RecordedRun> ReadRecordedRun(const std::string& path, const EvaluateArgs& args) {
  auto run = replay::ReadSampleCsv(path);
  if (!run.ok()) return run.status();
  RecordedRun r;
  r.settings.max_slope_gib_per_h = args.max_slope_gib_per_h;
  r.settings.FromHeader(*run);
  int max_minutes = args.planned_minutes;
  try {
    const std::string duration = run->Header("duration_s");
    if (!duration.empty()) max_minutes = static_cast<int>(std::ceil(std::stod(duration) / 60));
  } catch (const std::exception&) {
    // A header we cannot read keeps the flag's value.
  }
  for (const replay::SampleRow& row : run->rows) r.samples.push_back(row.memory);
  r.options = {.max_slope_gib_per_h = r.settings.max_slope_gib_per_h,
               .max_minutes = max_minutes,
               .warmup_minutes = r.settings.warmup_minutes,
               .spending_rho = args.spending_rho};
  return r;
}

// A recorded run's per-minute floors, with the warm-up and sample interval its
// header recorded.
std::vector<memory::MinuteFloor> FloorsOf(const RecordedRun& run) {
  return memory::ComputeMinuteFloors(
      run.samples, {.warmup_minutes = run.settings.warmup_minutes,
                    .sample_interval_seconds = run.settings.sample_interval_seconds});
}

// The files of one --side-by-side group, "a.csv,b.csv[,...]".
std::vector<std::string> SideBySidePaths(const std::string& group) {
  std::vector<std::string> paths;
  for (size_t start = 0; start <= group.size();) {
    size_t comma = group.find(',', start);
    if (comma == std::string::npos) comma = group.size();
    paths.push_back(group.substr(start, comma - start));
    start = comma + 1;
  }
  return paths;
}

// The recorded runs that are longer than a canary's plan, judged from every
// start minute by the three rules with the canary defaults (planned
// --planned-minutes, the new judge running on to --max-minutes), and the
// groups recorded side by side (docs/verdicts.md, "Recorded runs of 32
// minutes").
int PrintLongRecordings(const EvaluateArgs& args) {
  const memory::JudgeOptions planned{.max_slope_gib_per_h = args.max_slope_gib_per_h,
                                     .max_minutes = args.planned_minutes,
                                     .spending_rho = args.spending_rho};
  memory::JudgeOptions run_on = planned;
  run_on.planned_minutes = args.planned_minutes;
  run_on.max_minutes = args.max_minutes;
  const auto fixed = memory::NewFixedDurationJudge(planned);
  const auto seq = memory::NewSequentialJudge(planned);
  const auto judged = memory::NewSequentialJudge(NewJudgeOptions(run_on, args));
  bool header = false;
  for (const std::string& path : args.csv_paths) {
    auto run = ReadRecordedRun(path, args);
    if (!run.ok()) continue;  // EvaluateReplayCsvs has said why
    const auto floors = FloorsOf(*run);
    if (static_cast<int>(floors.size()) < args.planned_minutes) continue;
    if (!header) {
      std::printf(
          "\nRecorded runs longer than the plan, judged as a canary started at each minute "
          "(planned %d, new judge on to %d minutes; one letter per start minute s = 0, 1, ...: "
          "R Ratchet, F Flat, I Inconclusive, . recording ended first)\n",
          args.planned_minutes, args.max_minutes);
      header = true;
    }
    std::printf("%s (%zu floors)\n", path.c_str(), floors.size());
    struct Rule {
      std::string name;
      const memory::FloorJudge* judge;
      int last_minute;
    };
    const std::string plan = std::to_string(args.planned_minutes);
    const Rule rules[] = {{"fixed " + plan, fixed.get(), args.planned_minutes},
                          {"seq " + plan, seq.get(), args.planned_minutes},
                          {"new " + plan + " of " + std::to_string(args.max_minutes), judged.get(),
                           args.max_minutes}};
    for (const Rule& r : rules) {
      const memory::WindowVerdicts w = memory::JudgeFromEachStart(*r.judge, floors, r.last_minute);
      std::printf(
          "  %-13s %s  from the start %s at %d min; Ratchet %d, Flat %d, Inconclusive %d of %d "
          "decided; median %.0f min\n",
          r.name.c_str(), w.letters.c_str(),
          w.letters.front() == '.' ? "still running"
                                   : FloorDecisionName(w.from_start.judgement.decision),
          w.from_start.minutes_elapsed, w.counts.ratchet, w.counts.flat, w.counts.inconclusive,
          w.counts.traces, w.counts.MedianMinutes());
    }
  }
  for (const std::string& group : args.side_by_side) {
    const std::vector<std::string> paths = SideBySidePaths(group);
    std::vector<std::vector<memory::MinuteFloor>> floors;
    for (const std::string& path : paths) {
      auto run = ReadRecordedRun(path, args);
      if (!run.ok()) {
        std::fprintf(stderr, "evaluate-verdicts: --side-by-side %s: %s\n", path.c_str(),
                     run.status().ToString().c_str());
        return kExitError;
      }
      floors.push_back(FloorsOf(*run));
    }
    const memory::ReplicaNoise n = memory::MeasureReplicas(floors);
    std::printf("\nSide by side, %d common minutes (residuals around each one's own line):\n",
                n.minutes);
    for (size_t k = 0; k < paths.size(); ++k) {
      std::printf("  %-48s sd %6.1f MiB  lag-1 %+5.2f\n", paths[k].c_str(), n.each[k].sd,
                  n.each[k].lag1);
    }
    std::printf("  correlation in the same minute, each pair:");
    for (double r : n.correlations) std::printf(" %+.2f", r);
    std::printf("\n  their mean:   sd %6.1f MiB (%.2f of the first's)  lag-1 %+5.2f\n", n.mean.sd,
                n.each[0].sd > 0 ? n.mean.sd / n.each[0].sd : 0.0, n.mean.lag1);
    if (paths.size() > 2) {
      std::printf("  their median: sd %6.1f MiB (%.2f of the first's)  lag-1 %+5.2f\n", n.median.sd,
                  n.each[0].sd > 0 ? n.median.sd / n.each[0].sd : 0.0, n.median.lag1);
    }
  }
  return 0;
}

// Judges recorded replay runs with the fixed rule, today's sequential judge
// and the new one, each with the settings its CSV header recorded (threshold,
// warm-up, sample interval, duration), falling back to the command's flags.
// The new judge runs on to --max-minutes when the recording is shorter, so a
// run it has not decided by the recording's end is shown as still running.
int EvaluateReplayCsvs(const EvaluateArgs& args) {
  std::printf("\nRecorded replay runs (no known truth: the verdicts side by side)\n");
  std::printf("%-48s %6s | %-12s %4s | %-12s %4s | %-12s %4s | %s\n", "file", "floors", "fixed",
              "min", "seq", "min", "new", "min", "new explanation");
  int minutes_saved = 0;
  for (const std::string& path : args.csv_paths) {
    auto run = ReadRecordedRun(path, args);
    if (!run.ok()) {
      std::fprintf(stderr, "evaluate-verdicts: %s: %s\n", path.c_str(),
                   run.status().ToString().c_str());
      return kExitError;
    }
    const memory::JudgeOptions& options = run->options;
    memory::JudgeOptions run_on = options;
    run_on.planned_minutes = options.max_minutes;
    run_on.max_minutes = std::max(options.max_minutes, args.max_minutes);
    const auto floors = FloorsOf(*run);
    const auto old_outcome = memory::ReplayJudge(*memory::NewFixedDurationJudge(options), floors);
    const auto seq_outcome = memory::ReplayJudge(*memory::NewSequentialJudge(options), floors);
    const auto new_judge = memory::NewSequentialJudge(NewJudgeOptions(run_on, args));
    memory::RunOutcome new_outcome = memory::ReplayJudge(*new_judge, floors);
    std::string new_name = FloorDecisionName(new_outcome.judgement.decision);
    if (new_outcome.judgement.decision == memory::FloorDecision::kInconclusive &&
        static_cast<int>(floors.size()) < run_on.max_minutes - run_on.warmup_minutes) {
      // The recording ended first: a canary would still be running.
      new_outcome.judgement = new_judge->Judge(floors, /*final=*/false);
      new_name = "running";
    }
    minutes_saved += old_outcome.minutes_elapsed - new_outcome.minutes_elapsed;
    std::printf("%-48s %6zu | %-12s %4d | %-12s %4d | %-12s %4d | %s\n", path.c_str(),
                floors.size(), FloorDecisionName(old_outcome.judgement.decision),
                old_outcome.minutes_elapsed, FloorDecisionName(seq_outcome.judgement.decision),
                seq_outcome.minutes_elapsed, new_name.c_str(), new_outcome.minutes_elapsed,
                new_outcome.judgement.explanation.c_str());
  }
  std::printf("minutes saved by the new rule over these runs against the fixed rule: %d\n",
              minutes_saved);

  // The floor statistics of the sample-level corpus on the same runs
  // (docs/verdicts.md, "The sample-level corpus").
  std::printf(
      "\nThe same runs with the floors of the sample-level corpus' rules (verdict, minutes)\n");
  std::printf("%-48s", "file");
  for (const memory::SampleRule& r : SampleRules(memory::JudgeOptions{}))
    std::printf(" | %-16s", r.name.c_str());
  std::printf("\n");
  for (const std::string& path : args.csv_paths) {
    auto run = ReadRecordedRun(path, args);
    if (!run.ok()) continue;
    std::printf("%-48s", path.c_str());
    for (const memory::SampleRule& rule : SampleRules(run->options)) {
      const memory::RunOutcome o = memory::ReplaySampleRule(rule, run->samples);
      std::printf(" | %-12s %3d", FloorDecisionName(o.judgement.decision), o.minutes_elapsed);
    }
    std::printf("\n");
  }

  // How noisy the floors are, and what other per-minute statistics or shorter
  // segments would give (docs/verdicts.md, "More information per minute?").
  // Residuals are around a straight line: meaningful for flat runs only.
  std::printf(
      "\nFloor noise of the recorded runs (residuals around a straight line; flat runs only)\n");
  for (const std::string& path : args.csv_paths) {
    auto run = ReadRecordedRun(path, args);
    if (!run.ok()) continue;
    PrintSegmentNoise(path, run->samples, FloorsOf(*run));
  }
  return PrintLongRecordings(args);
}

// The sample-level corpus (sample_trace_generator.h): the same 2-second
// samples reduced to floors in different ways, each judged by the
// sequential rule; the fixed-duration rule on minute minima beside them.
std::vector<memory::SampleRule> SampleRules(const memory::JudgeOptions& options) {
  return {{.name = "old min/60s", .sequential = false, .options = options},
          {.name = "seq min/60s", .options = options},
          {.name = "seq p10/60s", .quantile = 0.1, .options = options},
          {.name = "seq min/30s", .segment_seconds = 30, .options = options},
          {.name = "seq p10/30s", .segment_seconds = 30, .quantile = 0.1, .options = options},
          {.name = "seq min/15s", .segment_seconds = 15, .options = options}};
}

// Median minutes over the classes with a constant slope and no step.
double SampleMedian(const std::vector<memory::SampleClassEvaluation>& evals, size_t rule,
                    double slope) {
  VerdictCounts pooled;
  for (const auto& e : evals) {
    const auto& spec = e.trace_class.spec;
    if (spec.slope_gib_per_h == slope && spec.step_mib == 0 && e.trace_class.vary_last_minute == 0)
      pooled.Merge(e.rules[rule]);
  }
  return pooled.MedianMinutes();
}

// What no rule can beat on the sample-level corpus: a judge that sees the
// wander itself at every 2 s sample (no spikes, no dips: those are
// independent of the level and can only hide it) and knows its sd and
// correlation time, with the known-noise bounds of verdict_evaluation.h
// (generalized least squares over the samples, one 1 % test at the end).
void PrintSampleBounds(const std::vector<memory::SampleClassEvaluation>& evals,
                       const memory::JudgeOptions& options) {
  const double threshold = options.max_slope_gib_per_h;
  double missed = 0;
  double by5 = 0;
  double by10 = 0;
  int ratchet_classes = 0;
  int fast_classes = 0;
  int flat_classes = 0;
  std::string worst;
  std::string by5_classes;
  std::string by10_classes;
  const auto append = [](std::string& list, const std::string& name, double rate) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s%s %.1f%%", list.empty() ? "" : ", ", name.c_str(),
                  100 * rate);
    list += buf;
  };
  for (const auto& e : evals) {
    const auto& spec = e.trace_class.spec;
    const double dt = spec.sample_interval_s;
    const double phi = std::exp(-dt / spec.wander_tau_s);
    const double per_minute = 60 / dt;  // samples per minute
    // Variance of the slope per minute from the samples of `minutes` minutes.
    const auto var = [&](int minutes) {
      return per_minute * per_minute *
             memory::KnownNoiseSlopeVariance(static_cast<int>(minutes * per_minute),
                                             spec.wander_sd_mib, phi);
    };
    const bool plain = spec.step_mib == 0 && e.trace_class.vary_last_minute == 0;
    const double s = spec.slope_gib_per_h;
    if (e.trace_class.truth == memory::TraceTruth::kRatchet) {
      ++ratchet_classes;
      if (plain) {
        const double m = 1 - memory::RatchetPowerBound(
                                 s, threshold, var(options.max_minutes - options.warmup_minutes),
                                 options.false_ratchet_rate);
        missed += m;
        if (m >= 0.005) append(worst, e.trace_class.name, m);
      }
    }
    if (plain && s == 2.5) {
      ++fast_classes;
      const double v = var(5 - options.warmup_minutes);
      const double p = memory::RatchetPowerBound(s, threshold, v, options.false_ratchet_rate) +
                       memory::RatchetPowerBound(-s, -threshold, v, options.false_flat_rate);
      by5 += p;
      append(by5_classes, e.trace_class.name, p);
    }
    if (plain && s == 0) {
      ++flat_classes;
      const double v = var(10 - options.warmup_minutes);
      const double p = memory::FlatPowerBound(threshold, v, options.false_flat_rate) +
                       memory::RatchetPowerBound(0, threshold, v, options.false_ratchet_rate);
      by10 += p;
      append(by10_classes, e.trace_class.name, p);
    }
  }
  std::printf(
      "\nwhat no rule can beat on these samples: a judge that saw the level's wander at every "
      "sample\n(no spikes, no dips) and knew its sd and correlation time, false Ratchet <= "
      "%.0f%%, false Flat <= %.0f%%:\n",
      100 * options.false_ratchet_rate, 100 * options.false_flat_rate);
  std::printf("  missed Ratchet (pooled)            >= %s  (classes >= 0.5%%: %s)\n",
              Rate(ratchet_classes ? missed / ratchet_classes : 0).c_str(),
              worst.empty() ? "none" : worst.c_str());
  std::printf("  verdict by minute 5, +2.50 GiB/h   <= %s  (%s)\n",
              Rate(fast_classes ? by5 / fast_classes : 0).c_str(), by5_classes.c_str());
  std::printf("  verdict by minute 10, flat         <= %s  (%s)\n",
              Rate(flat_classes ? by10 / flat_classes : 0).c_str(), by10_classes.c_str());
}

// The false- and missed-Ratchet rows of a summary table: row(label,
// value-of-rule, target) prints one row.
template <typename Row>
void PrintErrorRateRows(const Row& row, const std::vector<RuleSummary>& sums) {
  row(
      "false Ratchet (not-ratchet traces, pooled)",
      [&](size_t r) { return Rate(sums[r].FalseRatchetRate()); }, "<= 1%");
  row(
      "  worst class", [&](size_t r) { return Rate(sums[r].worst_false_ratchet_rate); }, "");
  row(
      "missed Ratchet (slope >= 2x threshold, pooled)",
      [&](size_t r) { return Rate(sums[r].MissedRatchetRate()); }, "<= 1%");
  row(
      "  worst class", [&](size_t r) { return Rate(sums[r].worst_missed_ratchet_rate); }, "");
}

int EvaluateSampleCorpus(const EvaluateArgs& args) {
  const memory::JudgeOptions options{.max_slope_gib_per_h = args.max_slope_gib_per_h,
                                     .max_minutes = args.planned_minutes,
                                     .spending_rho = args.spending_rho};
  const auto rules = SampleRules(options);
  auto corpus = memory::SampleCorpus(args.max_slope_gib_per_h);
  for (auto& c : corpus) c.spec.minutes = args.planned_minutes;
  std::printf(
      "\nSample-level corpus: %d traces per class, seed %llu, 2 s samples, %d-minute runs; "
      "the sequential rule (budget as above) on floors made in different ways:\n"
      "min/60s = minimum of each minute (the floor), p10/60s = 10th percentile of each minute,\n"
      "min/30s, p10/30s, min/15s = the same over half and quarter minutes (the judge then "
      "works in segments)\n\n",
      args.sample_traces_per_class, static_cast<unsigned long long>(args.seed),
      args.planned_minutes);

  // How noisy the generated floors are, to compare with the recorded runs.
  std::printf(
      "generated flat traces (slope 0), mean over 200 traces: residual sd / lag-1 / "
      "slope se (white)\n");
  for (const auto& c : corpus) {
    if (c.spec.slope_gib_per_h != 0 || c.spec.step_mib != 0 || c.vary_last_minute != 0) continue;
    struct Kind {
      const char* name;
      double segment_s, quantile;
    };
    const Kind kinds[] = {
        {"min/60s", 60, 0}, {"p10/60s", 60, 0.1}, {"min/30s", 30, 0}, {"min/10s", 10, 0}};
    std::printf("  %-22s", c.name.c_str());
    for (const Kind& k : kinds) {
      double sd = 0;
      double lag = 0;
      double se = 0;
      const int n = 200;
      for (int i = 0; i < n; ++i) {
        const auto samples = memory::GenerateSampleTrace(c.spec, 0xca11b4a7eULL + i);
        const SegmentNoise sn =
            MeasureSegmentNoise(samples, 60, 60.0 * args.planned_minutes, k.segment_s, k.quantile);
        sd += sn.sd_mib / n, lag += sn.lag1 / n, se += sn.se_gib_per_h / n;
      }
      std::printf("  %s %5.1f %+5.2f %.3f", k.name, sd, lag, se);
    }
    std::printf("\n");
  }

  const auto evals =
      memory::EvaluateSampleCorpus(corpus, args.sample_traces_per_class, args.seed, rules);
  std::printf("\n%-30s %-11s |", "class", "truth");
  for (const auto& r : rules) std::printf(" %-20s |", r.name.c_str());
  std::printf("\n%-30s %-11s |", "", "");
  for (size_t r = 0; r < rules.size(); ++r) std::printf(" %6s %6s %6s |", "Ratch", "Flat", "min");
  std::printf("\n");
  for (const auto& e : evals) {
    std::printf("%-30s %-11s |", e.trace_class.name.c_str(),
                memory::TraceTruthName(e.trace_class.truth));
    for (const VerdictCounts& c : e.rules) {
      std::printf(" %s %s %6.1f |", Percent(c.ratchet, c.traces).c_str(),
                  Percent(c.flat, c.traces).c_str(), c.MedianMinutes());
    }
    std::printf("\n");
  }
  std::vector<std::string> names;
  std::vector<memory::TraceTruth> truths;
  for (const auto& e : evals) {
    names.push_back(e.trace_class.name);
    truths.push_back(e.trace_class.truth);
  }
  std::printf("\n%-44s", "summary (sample-level corpus)");
  for (const auto& r : rules) std::printf(" %12s", r.name.c_str());
  std::printf("   target\n");
  std::vector<RuleSummary> sums;
  for (size_t r = 0; r < rules.size(); ++r) {
    std::vector<VerdictCounts> counts;
    counts.reserve(evals.size());
    for (const auto& e : evals) counts.push_back(e.rules[r]);
    sums.push_back(memory::SummarizeCounts(names, truths, counts));
  }
  auto row = [&](const char* label, auto value, const char* target) {
    std::printf("%-44s", label);
    for (size_t r = 0; r < rules.size(); ++r) std::printf(" %12s", value(r).c_str());
    if (*target) std::printf("   %s", target);
    std::printf("\n");
  };
  auto fmt = [](double v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%.1f", v);
    return std::string(buf);
  };
  PrintErrorRateRows(row, sums);
  row(
      "median minutes to verdict, +2.50 GiB/h",
      [&](size_t r) { return fmt(SampleMedian(evals, r, 2.5)); }, "<= 5");
  row(
      "median minutes to verdict, flat (slope 0)",
      [&](size_t r) { return fmt(SampleMedian(evals, r, 0)); }, "<= 10");
  PrintSampleBounds(evals, options);
  for (size_t r = 0; r < rules.size(); ++r) {
    std::printf(
        "  %s: worst false %s, worst missed %s\n", rules[r].name.c_str(),
        sums[r].worst_false_ratchet_class.empty() ? "-" : sums[r].worst_false_ratchet_class.c_str(),
        sums[r].worst_missed_ratchet_class.empty() ? "-"
                                                   : sums[r].worst_missed_ratchet_class.c_str());
  }
  return 0;
}

// The wide corpus (memory::WideCorpus): the fixed rule and today's sequential
// judge, each planned for --planned-minutes, beside the sequential judge that
// may run on to --max-minutes, with either noise estimate. The figures are
// those issue 17 set as targets.
int EvaluateWideCorpus(const EvaluateArgs& args) {
  const double threshold = args.max_slope_gib_per_h;
  memory::JudgeOptions planned{.max_slope_gib_per_h = threshold,
                               .max_minutes = args.planned_minutes,
                               .spending_rho = args.spending_rho};
  memory::JudgeOptions extended = planned;
  extended.max_minutes = args.max_minutes;
  extended.planned_minutes = args.planned_minutes;
  extended.extension_share = args.extension_share;
  memory::JudgeOptions next = NewJudgeOptions(extended, args);
  const auto fixed = memory::NewFixedDurationJudge(planned);
  const auto sequential = memory::NewSequentialJudge(planned);
  const auto extended_judge = memory::NewSequentialJudge(extended);
  const auto new_judge = memory::NewSequentialJudge(next);
  const int planned_floors = args.planned_minutes - planned.warmup_minutes;
  const int max_floors = args.max_minutes - planned.warmup_minutes;
  char name[5][48];
  std::snprintf(name[0], sizeof name[0], "fixed %d", args.planned_minutes);
  std::snprintf(name[1], sizeof name[1], "seq %d", args.planned_minutes);
  std::snprintf(name[2], sizeof name[2], "seq %d of %d", args.planned_minutes, args.max_minutes);
  std::snprintf(name[3], sizeof name[3], "new %d of %d", args.planned_minutes, args.max_minutes);
  std::snprintf(name[4], sizeof name[4], "new+rerun %d/%d", args.planned_minutes, args.max_minutes);
  const memory::RuleUnderTest rules[] = {{name[0], fixed.get(), planned_floors},
                                         {name[1], sequential.get(), planned_floors},
                                         {name[2], extended_judge.get(), max_floors},
                                         {name[3], new_judge.get(), max_floors},
                                         {name[4], new_judge.get(), max_floors, 1}};
  const size_t rule_count = std::size(rules);
  const auto corpus = memory::WideCorpus(threshold, args.max_minutes, args.planned_minutes);
  const memory::ReplicaOptions replicas{
      .replicas = args.replicas,
      .correlation = args.replica_correlation,
      .combine = args.replica_combine == "median" ? memory::ReplicaCombine::kMedian
                                                  : memory::ReplicaCombine::kMean,
      .outlier = args.replica_outlier == "all" ? memory::ReplicaOutlier::kEveryReplica
                                               : memory::ReplicaOutlier::kOneReplica};
  const auto counts =
      memory::EvaluateRules(corpus, args.traces_per_class, args.seed, rules, replicas);

  std::string late_scan = next.late_growth_hinge ? ", the broken-line late-growth scan" : "";
  if (next.late_growth_trend_p > 0) {
    char gate[64];
    std::snprintf(gate, sizeof gate, ", a late-growth tail's rank trend at p < %.3g",
                  next.late_growth_trend_p);
    late_scan += gate;
  }
  std::printf(
      "allocguard evaluate-verdicts: wide corpus, %d traces per class, seed %llu, threshold "
      "%.2f GiB/h, runs of up to %d minutes (minute 0 is warm-up)\n"
      "fixed = least squares at the planned end; seq = today's sequential judge planned for %d "
      "minutes;\nseq %d of %d = the same judge planned for %d minutes that runs on to %d when "
      "undecided (%.0f%% of each budget kept for the looks after the plan);\nnew = that plan "
      "with the large-steps rule (noise ceiling %.0f MiB), the difference-based check of a "
      "Ratchet%s,\n%.0f%% of each budget kept for the looks after the plan and a false-Flat "
      "budget of %.0f%%%s%s;\nnew+rerun = new, and a run "
      "that ends Inconclusive is run once more on a fresh trace of the same instance, as a "
      "canary\nreruns its candidate (canary.inconclusiveReruns 1); its minutes are those of "
      "both runs\n\n",
      args.traces_per_class, static_cast<unsigned long long>(args.seed), threshold,
      args.max_minutes, args.planned_minutes, args.planned_minutes, args.max_minutes,
      args.planned_minutes, args.max_minutes, 100 * args.extension_share, args.noise_ceiling_mib,
      args.ratchet_checks_differences ? "" : " (off)", 100 * next.extension_share,
      100 * next.false_flat_rate,
      next.noise == memory::SlopeNoise::kScreenedQuadraticResiduals
          ? ", one outlier minute left out"
          : "",
      late_scan.c_str());
  if (args.replicas > 1) {
    std::printf(
        "every rule sees, per minute, the %s of the floors of %d canary replicas side by side, "
        "whose noise\nhas the class's sd and lag-1 correlation and a correlation of %.2f between "
        "replicas; an outlier minute\nis in %s (the demo climb and the --csv recordings are "
        "single runs, judged as they are)\n\n",
        args.replica_combine.c_str(), args.replicas, args.replica_correlation,
        args.replica_outlier == "all" ? "every replica" : "one replica");
  }
  std::printf("%-34s %-11s", "class", "truth");
  for (const auto& r : rules) std::printf(" | %-26s", r.name.c_str());
  std::printf("\n%-34s %-11s", "", "");
  for (size_t r = 0; r < rule_count; ++r)
    std::printf(" | %6s %6s %6s %4s", "Ratch", "Flat", "Inc", "min");
  std::printf("\n");
  for (size_t k = 0; k < corpus.size(); ++k) {
    std::printf("%-34s %-11s", corpus[k].name.c_str(), memory::TraceTruthName(corpus[k].truth));
    for (const VerdictCounts& c : counts[k]) {
      std::printf(" | %s %s %s %4.0f", Percent(c.ratchet, c.traces).c_str(),
                  Percent(c.flat, c.traces).c_str(), Percent(c.inconclusive, c.traces).c_str(),
                  c.MedianMinutes());
    }
    std::printf("\n");
  }

  // The demo's glibc climb that issue 17 quotes (floors of minutes 1-7, MiB):
  // when each rule decides it.
  {
    std::vector<memory::MinuteFloor> demo;
    int minute = 1;
    for (double mib : {1404.0, 1537.0, 1584.0, 2099.0, 2564.0, 2659.0, 3012.0}) {
      demo.push_back({.minute = minute++, .floor_bytes = mib * memory::kBytesPerMiB});
    }
    std::printf("\n%-46s", "demo glibc climb 1404 .. 3012 MiB, minutes 1-7");
    std::printf(" %13s", "-");  // the fixed rule needs the whole planned run
    for (size_t r = 1; r < 4; ++r) {
      const auto seen = std::min<size_t>(demo.size(), static_cast<size_t>(rules[r].max_floors));
      const memory::RunOutcome o =
          memory::ReplayJudge(*rules[r].judge, std::span(demo).first(seen));
      char cell[32];
      if (o.judgement.decision == memory::FloorDecision::kInconclusive) {
        std::snprintf(cell, sizeof cell, "undecided m%d", o.judgement.minutes_used);
      } else {
        std::snprintf(cell, sizeof cell, "%s m%d", memory::FloorDecisionName(o.judgement.decision),
                      o.judgement.minutes_used);
      }
      std::printf(" %13s", cell);
    }
    std::printf("   (mN: on the floor of minute N)\n");
  }

  std::vector<std::string> names;
  std::vector<memory::TraceTruth> truths;
  for (const auto& c : corpus) {
    names.push_back(c.name);
    truths.push_back(c.truth);
  }
  const auto plain = [](const memory::TraceClass& c) {
    return PlainClass(c) && c.spec.decel_minutes == 0;
  };
  // Minutes of every trace of the plain classes with this slope.
  const auto minutes_at = [&](size_t r, double slope) {
    std::vector<int> out;
    for (size_t k = 0; k < corpus.size(); ++k) {
      if (!plain(corpus[k]) || corpus[k].spec.slope_gib_per_h != slope) continue;
      out.insert(out.end(), counts[k][r].minutes.begin(), counts[k][r].minutes.end());
    }
    return out;
  };
  // Flat truth: a level floor or one well inside the threshold.
  const auto flat_truth_inconclusive = [&](size_t r) {
    int traces = 0;
    int inconclusive = 0;
    for (size_t k = 0; k < corpus.size(); ++k) {
      if (!plain(corpus[k]) || std::fabs(corpus[k].spec.slope_gib_per_h) > threshold / 2) continue;
      traces += counts[k][r].traces;
      inconclusive += counts[k][r].inconclusive;
    }
    return traces ? static_cast<double>(inconclusive) / traces : 0;
  };
  std::vector<RuleSummary> sums;
  for (size_t r = 0; r < rule_count; ++r) {
    std::vector<VerdictCounts> per_class;
    for (size_t k = 0; k < corpus.size(); ++k) per_class.push_back(counts[k][r]);
    sums.push_back(memory::SummarizeCounts(names, truths, per_class));
  }
  const auto row = [&](const char* label, auto value, const char* target) {
    std::printf("%-46s", label);
    for (size_t r = 0; r < rule_count; ++r) std::printf(" %13s", value(r).c_str());
    std::printf("   %s\n", target);
  };
  const auto minutes = [](double v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return std::string(buf);
  };
  std::printf("\n%-46s", "summary");
  for (const auto& r : rules) std::printf(" %13s", r.name.c_str());
  std::printf("   target\n");
  PrintErrorRateRows(row, sums);
  // The same rates without the classes no early verdict can get right: a
  // slope of exactly the threshold (a valid test's false Ratchets there are
  // its whole budget; under correlated noise an estimated noise level makes
  // them more), and growth that starts at minutes 10-20, after a level floor
  // may already have been called Flat.
  const auto summary_without = [&](size_t r, bool (*skip)(const memory::TraceClass&, double)) {
    std::vector<std::string> kept_names;
    std::vector<memory::TraceTruth> kept_truths;
    std::vector<VerdictCounts> kept;
    for (size_t k = 0; k < corpus.size(); ++k) {
      if (skip(corpus[k], threshold)) continue;
      kept_names.push_back(names[k]);
      kept_truths.push_back(truths[k]);
      kept.push_back(counts[k][r]);
    }
    return memory::SummarizeCounts(kept_names, kept_truths, kept);
  };
  row(
      "false Ratchet, slope below the threshold",
      [&](size_t r) {
        return Rate(summary_without(r, [](const memory::TraceClass& c, double t) {
                      return c.spec.slope_gib_per_h >= t;
                    }).FalseRatchetRate());
      },
      "");
  row(
      "missed Ratchet, growth starting before m10",
      [&](size_t r) {
        return Rate(summary_without(r, [](const memory::TraceClass& c, double) {
                      return c.varies == memory::TraceClass::Varies::kGrowthStart &&
                             c.vary_first_minute >= 10;
                    }).MissedRatchetRate());
      },
      "");
  // A rate over the ratchet classes of rule r: the traces `part` counts, of
  // all but those `left_out` counts.
  const auto ratchet_rate = [&](size_t r, auto part, auto left_out) {
    int traces = 0;
    int counted = 0;
    for (size_t k = 0; k < corpus.size(); ++k) {
      if (corpus[k].truth != memory::TraceTruth::kRatchet) continue;
      const VerdictCounts& c = counts[k][r];
      traces += c.traces - left_out(c);
      counted += part(c);
    }
    return Rate(traces ? static_cast<double>(counted) / traces : 0);
  };
  // A trace whose last judged floor came before its growth began was level
  // in every floor the judge saw: a stopping judge cannot be blamed for it.
  const auto before_growth = [](const VerdictCounts& c) { return c.not_ratchet_before_growth; };
  const auto none = [](const VerdictCounts&) { return 0; };
  row(
      "missed Ratchet, growth begun by the verdict",
      [&](size_t r) {
        return ratchet_rate(
            r,
            [](const VerdictCounts& c) {
              return c.traces - c.ratchet - c.not_ratchet_before_growth;
            },
            before_growth);
      },
      "");
  // The part of the misses that releases a hold: in Enforce a ratchet that
  // ends Inconclusive stays held (after its rerun); one that ends Flat rolls
  // out.
  row(
      "missed Ratchet ended Flat (pooled)",
      [&](size_t r) {
        return ratchet_rate(
            r, [](const VerdictCounts& c) { return c.flat; }, none);
      },
      "");
  row(
      "missed Ratchet ended Flat, growth begun",
      [&](size_t r) {
        return ratchet_rate(
            r, [](const VerdictCounts& c) { return c.flat - c.flat_before_growth; }, before_growth);
      },
      "");
  row(
      "false Ratchet by test: whole/late/steps",
      [&](size_t r) {
        int traces = 0;
        int late = 0;
        int steps = 0;
        int all = 0;
        for (size_t k = 0; k < corpus.size(); ++k) {
          if (corpus[k].truth != memory::TraceTruth::kNotRatchet) continue;
          const VerdictCounts& c = counts[k][r];
          traces += c.traces;
          all += c.ratchet;
          late += c.ratchet_late_growth;
          steps += c.ratchet_large_steps;
        }
        const auto pct = [&](int n) { return traces ? 100.0 * n / traces : 0.0; };
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.2f/%.2f/%.2f", pct(all - late - steps), pct(late),
                      pct(steps));
        return std::string(buf);
      },
      "");
  row(
      "flat truth (|slope| <= threshold/2) Inconcl.",
      [&](size_t r) { return Rate(flat_truth_inconclusive(r)); }, "<= 3%");
  row(
      "median minutes to a verdict, flat (slope 0)",
      [&](size_t r) { return minutes(memory::MinutesQuantile(minutes_at(r, 0), 0.5)); }, "<= 12");
  row(
      "  p90", [&](size_t r) { return minutes(memory::MinutesQuantile(minutes_at(r, 0), 0.9)); },
      "");
  row(
      "median minutes to a verdict, +2.50 GiB/h",
      [&](size_t r) { return minutes(memory::MinutesQuantile(minutes_at(r, 2.5), 0.5)); }, "<= 5");
  row(
      "  p90", [&](size_t r) { return minutes(memory::MinutesQuantile(minutes_at(r, 2.5), 0.9)); },
      "");
  // Where the default judge's false Ratchets come from, class by class.
  std::printf(
      "  %s false Ratchets of 1%% or more (whole-run test / late-growth scan / large "
      "steps):",
      rules[3].name.c_str());
  for (size_t k = 0; k < corpus.size(); ++k) {
    const VerdictCounts& c = counts[k][3];
    if (corpus[k].truth != memory::TraceTruth::kNotRatchet || c.traces == 0 ||
        c.ratchet * 100 < c.traces) {
      continue;
    }
    std::printf("\n    %-34s %s (%d / %d / %d of %d)", corpus[k].name.c_str(),
                Percent(c.ratchet, c.traces).c_str(),
                c.ratchet - c.ratchet_late_growth - c.ratchet_large_steps, c.ratchet_late_growth,
                c.ratchet_large_steps, c.traces);
  }
  std::printf("\n");
  for (size_t r = 0; r < rule_count; ++r) {
    std::printf(
        "  %s: worst false %s; worst missed %s\n", rules[r].name.c_str(),
        sums[r].worst_false_ratchet_class.empty() ? "-" : sums[r].worst_false_ratchet_class.c_str(),
        sums[r].worst_missed_ratchet_class.empty() ? "-"
                                                   : sums[r].worst_missed_ratchet_class.c_str());
  }
  return 0;
}

int RunEvaluate(const EvaluateArgs& args) {
  if (args.max_minutes < args.planned_minutes) {
    return UsageError(InvalidArgument("--max-minutes must be at least --planned-minutes"));
  }
  for (const std::string& group : args.side_by_side) {
    if (SideBySidePaths(group).size() < 2) {
      return UsageError(
          InvalidArgument("--side-by-side " + group + ": name two or more files, comma-separated"));
    }
  }
  if (args.replicas > 1 && args.corpus != "wide") {
    return UsageError(InvalidArgument(
        "--replicas above 1 applies to the wide corpus only (--corpus wide, the default)"));
  }
  if (args.traces_per_class == 0) {
    if (args.sample_traces_per_class > 0) {
      const int rc = EvaluateSampleCorpus(args);
      if (rc != 0 || args.csv_paths.empty()) return rc;
    }
    return EvaluateReplayCsvs(args);
  }
  if (args.corpus == "wide") {
    const int rc = EvaluateWideCorpus(args);
    if (rc != 0 || args.csv_paths.empty()) return rc;
    return EvaluateReplayCsvs(args);
  }
  const memory::JudgeOptions options{.max_slope_gib_per_h = args.max_slope_gib_per_h,
                                     .max_minutes = args.planned_minutes,
                                     .spending_rho = args.spending_rho};
  const auto old_rule = memory::NewFixedDurationJudge(options);
  const auto new_rule = memory::NewSequentialJudge(options);
  const auto corpus = memory::StandardCorpus(args.max_slope_gib_per_h);
  std::vector<memory::TraceClass> classes = corpus;
  for (memory::TraceClass& c : classes) c.spec.minutes = args.planned_minutes;
  const auto evals =
      memory::EvaluateCorpus(classes, args.traces_per_class, args.seed, *old_rule, *new_rule);

  std::printf(
      "allocguard evaluate-verdicts: %d traces per class, seed %llu, threshold %.2f GiB/h, "
      "%d-minute runs (minute 0 is warm-up)\n"
      "old = fixed-duration least squares at the end; new = sequential (budget: false Ratchet "
      "%.1f%%, false Flat %.1f%%, over %d looks, spending alpha * t^%g)\n\n",
      args.traces_per_class, static_cast<unsigned long long>(args.seed), args.max_slope_gib_per_h,
      args.planned_minutes, 100 * options.false_ratchet_rate, 100 * options.false_flat_rate,
      memory::PlannedLooks(options), options.spending_rho);
  std::printf("%-38s %-11s | %-34s | %-34s\n", "", "", "old: Ratchet   Flat Inconcl median",
              "new: Ratchet   Flat Inconcl median");
  std::printf("%-38s %-11s |", "class", "truth");
  std::printf(" %6s %6s %6s %6s |", "", "", "", "min");
  std::printf(" %6s %6s %6s %6s |\n", "", "", "", "min");
  for (const ClassEvaluation& e : evals) {
    std::printf("%-38s %-11s |", e.trace_class.name.c_str(),
                memory::TraceTruthName(e.trace_class.truth));
    PrintCounts(e.old_rule);
    PrintCounts(e.new_rule);
    std::printf("\n");
  }

  const RuleSummary old_sum = memory::Summarize(evals, /*new_rule=*/false);
  const RuleSummary new_sum = memory::Summarize(evals, /*new_rule=*/true);
  std::printf("\n%-44s %10s %10s   %s\n", "summary", "old", "new", "target");
  std::printf("%-44s %10s %10s   %s\n", "false Ratchet (not-ratchet traces, pooled)",
              Rate(old_sum.FalseRatchetRate()).c_str(), Rate(new_sum.FalseRatchetRate()).c_str(),
              "<= 1%");
  std::printf("%-44s %10s %10s\n", "  worst class", Rate(old_sum.worst_false_ratchet_rate).c_str(),
              Rate(new_sum.worst_false_ratchet_rate).c_str());
  std::printf("%-44s %10s %10s   %s\n", "missed Ratchet (slope >= 2x threshold, pooled)",
              Rate(old_sum.MissedRatchetRate()).c_str(), Rate(new_sum.MissedRatchetRate()).c_str(),
              "<= 1%");
  std::printf("%-44s %10s %10s\n", "  worst class", Rate(old_sum.worst_missed_ratchet_rate).c_str(),
              Rate(new_sum.worst_missed_ratchet_rate).c_str());
  PrintMedianRow(
      "median minutes to verdict, +2.50 GiB/h", evals,
      [](const memory::TraceClass& c) { return PlainClass(c) && c.spec.slope_gib_per_h == 2.5; },
      "<= 5");
  PrintMedianRow(
      "median minutes to verdict, flat (slope 0)", evals,
      [](const memory::TraceClass& c) { return PlainClass(c) && c.spec.slope_gib_per_h == 0; },
      "<= 10");
  auto name = [](const std::string& c) { return c.empty() ? "-" : c.c_str(); };
  std::printf("(worst classes: old false %s, new false %s; old missed %s, new missed %s)\n",
              name(old_sum.worst_false_ratchet_class), name(new_sum.worst_false_ratchet_class),
              name(old_sum.worst_missed_ratchet_class), name(new_sum.worst_missed_ratchet_class));

  PrintKnownNoiseBounds(evals, options);

  if (args.sample_traces_per_class > 0) {
    const int rc = EvaluateSampleCorpus(args);
    if (rc != 0) return rc;
  }

  if (!args.csv_paths.empty()) return EvaluateReplayCsvs(args);
  return 0;
}

}  // namespace

void RegisterEvaluateCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<EvaluateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "evaluate-verdicts",
      "Compare the fixed 15-minute floor rule, the sequential judge and the default judge on a "
      "synthetic corpus (false and missed Ratchet rates, minutes to a verdict), and on recorded "
      "replay CSVs");
  cmd->add_option("--traces", args->traces_per_class,
                  "Traces per corpus class (0: judge only the --csv files)")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed of the synthetic corpus")->capture_default_str();
  cmd->add_option("--max-slope", args->max_slope_gib_per_h, "Floor slope threshold, GiB/h")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--spending-rho", args->spending_rho,
                  "Spending exponent of the new rule (alpha * t^rho; to compare plans)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--corpus", args->corpus,
                  "wide: the fixed rule, the sequential judge, the same judge running on to "
                  "--max-minutes, and the default judge (large-steps rule, wander check), on the "
                  "wide corpus; standard: the fixed and sequential rules on the corpus of "
                  "docs/verdicts.md")
      ->check(CLI::IsMember({"wide", "standard"}))
      ->capture_default_str();
  cmd->add_option("--planned-minutes", args->planned_minutes,
                  "Planned run length, warm-up minute included (the canary's duration)")
      ->check(CLI::Range(4, 240))
      ->capture_default_str();
  cmd->add_option("--max-minutes", args->max_minutes,
                  "Longest run of the extended judge, warm-up included (the canary's "
                  "maxDuration; wide corpus)")
      ->check(CLI::Range(4, 240))
      ->capture_default_str();
  cmd->add_option("--extension-share", args->extension_share,
                  "Share of each error budget the extended judge keeps for the looks after the "
                  "planned end")
      ->check(CLI::Range(0.0, 0.9))
      ->capture_default_str();
  cmd->add_option("--noise-ceiling", args->noise_ceiling_mib,
                  "The new judge's large-steps rule: the noisiest floor sd it allows for, MiB "
                  "(0: off)")
      ->check(CLI::Range(0.0, 10000.0))
      ->capture_default_str();
  cmd->add_option("--ratchet-checks-differences", args->ratchet_checks_differences,
                  "The new judge's whole-run Ratchet also needs the difference-based noise "
                  "estimate's interval above the threshold")
      ->capture_default_str();
  cmd->add_option("--new-false-flat-rate", args->new_false_flat_rate,
                  "The new judge's false-Flat budget at a slope of exactly the threshold")
      ->check(CLI::Range(0.001, 0.4))
      ->capture_default_str();
  cmd->add_option("--new-spending-rho", args->new_spending_rho,
                  "The new judge's spending exponent (alpha * t^rho)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--new-extension-share", args->new_extension_share,
                  "Share of each error budget the new judge keeps for the looks after the "
                  "planned end")
      ->check(CLI::Range(0.0, 0.9))
      ->capture_default_str();
  cmd->add_option("--outlier-screen", args->outlier_screen,
                  "The new judge's whole-run and Flat intervals leave out one outlier minute")
      ->capture_default_str();
  cmd->add_option("--late-growth-hinge", args->late_growth_hinge,
                  "The new judge's late-growth scan fits a broken line to all the floors "
                  "instead of each tail alone")
      ->capture_default_str();
  cmd->add_option("--late-growth-trend-p", args->late_growth_trend_p,
                  "The new judge's late-growth Ratchet needs the tail's Mann-Kendall p below "
                  "this (0.05: the gate of the whole-run test)")
      ->check(CLI::Range(0.001, 0.2))
      ->capture_default_str();
  cmd->add_option("--replicas", args->replicas,
                  "Wide corpus: canary replicas of one variant side by side; every rule sees "
                  "their combined floors (1: one canary pod, the corpus as it is)")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  cmd->add_option("--replica-correlation", args->replica_correlation,
                  "Wide corpus, --replicas > 1: correlation of the replicas' floor noise in the "
                  "same minute")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--replica-combine", args->replica_combine,
                  "Wide corpus, --replicas > 1: the floor a rule sees each minute, the mean or "
                  "the median of the replicas' floors")
      ->check(CLI::IsMember({"mean", "median"}))
      ->capture_default_str();
  cmd->add_option("--replica-outlier", args->replica_outlier,
                  "Wide corpus, --replicas > 1: an outlier minute is in one replica's floor (a "
                  "request served by one pod) or in all of them")
      ->check(CLI::IsMember({"one", "all"}))
      ->capture_default_str();
  cmd->add_option("--samples", args->sample_traces_per_class,
                  "Traces per class of the sample-level corpus (2 s samples; compares floor "
                  "statistics; 0: skip)")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  cmd->add_option("--csv", args->csv_paths, "Replay sample CSVs to judge with both rules")
      ->check(CLI::ExistingFile);
  cmd->add_option("--side-by-side", args->side_by_side,
                  "Replay CSVs of one variant recorded side by side, as A.csv,B.csv[,C.csv...] "
                  "(repeatable): prints the correlation of their floor noise in the same minute "
                  "and the noise of their mean and median");
  cmd->callback([args, exit_code] { *exit_code = RunEvaluate(*args); });
}

}  // namespace allocguard::cli
