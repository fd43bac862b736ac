#pragma once

// The analysis of one variant's run, computed the same way live (by
// `allocguard replay`, from the rows it has written so far) and afterwards (by
// `allocguard analyze`, from the CSV), so both give the same verdict.

#include <chrono>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "operator/memory/floor_judge.h"
#include "operator/memory/verdict.h"
#include "operator/replay/books_floors.h"
#include "operator/replay/sample_csv.h"

namespace allocguard::replay {

// How a run is judged; written into the CSV header so a re-analysis uses the
// same settings unless told otherwise.
struct JudgeSettings {
  double max_slope_gib_per_h = 0.5;
  double sample_interval_seconds = 2;
  int warmup_minutes = 1;
  // The longest run (warm-up included); the sequential judge spreads its
  // error budget over the looks up to it.
  int max_minutes = 15;
  // The planned run length (warm-up included; 0: max_minutes). The looks up
  // to it spend most of the budget (memory::JudgeOptions::planned_minutes).
  int planned_minutes = 0;
  memory::VerdictOptions verdict;
  // When true, the run stops at the judge's first decision.
  bool early_stop = true;

  std::vector<std::pair<std::string, std::string>> ToHeader() const;
  // Reads the keys ToHeader writes; missing keys keep this object's values.
  void FromHeader(const CsvRun& run);
};

struct VariantResult {
  std::string variant;
  std::string allocator;
  std::string env;      // "K=V K=V"
  std::string library;  // preloaded library, empty for glibc
  std::string cgroup;   // "v1 /sys/fs/cgroup/memory/..." or "none: <reason>"
  JudgeSettings settings;

  std::vector<memory::MinuteFloor> floors;
  memory::FloorJudgement judgement;
  memory::VariantVerdict verdict;
  // Minute at which the judge decided; the run stops there when early_stop.
  std::optional<int> decided_at_minute;

  double duration_seconds = 0;
  double floor_level_bytes = 0;  // median of the floors
  double final_floor_bytes = 0;  // the last floor
  double peak_bytes = 0;         // highest judged sample, warm-up included
  // A container limit that leaves room for the observed peak (peak × 1.25,
  // rounded up to 64 MiB).
  double recommended_limit_bytes = 0;
  double cpu_seconds = 0;
  int64_t requests_completed = 0;
  int64_t requests_late = 0;
  int64_t unexpected_responses = 0;
  std::optional<double> p50_ms, p99_ms;  // from the run's "latency" event
  std::optional<int> oom_minute;
  // Minute (from the start of the load) in which the workload's processes
  // disappeared during the run.
  std::optional<int> exit_minute;
  std::optional<std::string> failure;
  // The allocator's books (the stats agent's), when the run recorded any;
  // their reading is added to verdict.explanation.
  std::optional<BooksFloors> books;
};

// Analyzes a run: floors after warm-up, the judge asked minute by minute as
// the live run asked it (stopping at its first decision when early_stop), and
// the verdict. `finished` says the run is over (the judge gets its final call).
VariantResult AnalyzeRun(const CsvRun& run, const JudgeSettings& settings, bool finished);

// The judge for a run's settings.
std::unique_ptr<memory::FloorJudge> JudgeFor(const JudgeSettings& settings);

// Asks `judge` after each floor, as a live run does, and returns the first
// decision; at the end, when finished, the final judgement.
memory::FloorJudgement JudgeMinuteByMinute(std::span<const memory::MinuteFloor> floors,
                                           const memory::FloorJudge& judge, bool early_stop,
                                           bool finished, std::optional<int>* decided_at_minute);

nlohmann::json ToJson(const VariantResult& r);

struct ReplaySummary {
  std::vector<VariantResult> variants;  // candidate first
  memory::OverallVerdict overall;
};

ReplaySummary Summarize(std::vector<VariantResult> variants);
nlohmann::json ToJson(const ReplaySummary& s);

// Keys in camelCase, as Kubernetes and every allocguard JSON output write
// them, with the unit in the name (floorMiB, slopeGiBPerHour, cpuSeconds).
// ToJson(r) / ToJson(s) as indented text, as the replay writes <variant>.json
// and summary.json and `allocguard analyze -o json` prints it. Strings that
// are not valid UTF-8 (a CSV's header holds whatever bytes the file had) are
// repaired, never thrown on.
std::string ToJsonText(const VariantResult& r);
std::string ToJsonText(const ReplaySummary& s);

// From this many floors the progress line shows the slope's interval. With
// fewer, the noise is estimated with 1 or 2 degrees of freedom and the
// interval's width (t quantiles of 14781 and 102 at the first looks of a
// 15-minute plan, docs/verdicts.md) says how few minutes there are, not how
// noisy the floor is.
inline constexpr int kProgressIntervalMinFloors = 5;

// One line on the run so far, for a person reading the progress:
//   minute 7 of 15 (up to 30)  floor 512.3 MiB  slope +0.12 GiB/h [-0.40, +0.64]
//   undecided: needs about 3 more minutes at this noise
// The interval, and the minutes still needed, appear once the judge has a
// finite interval from kProgressIntervalMinFloors floors ("too few minutes
// for an interval yet" before, "no interval yet" while the judge has none);
// past the planned end the line says the run goes on because the verdict is
// still unclear.
std::string FormatMinuteProgress(const VariantResult& r);

// A side-by-side table of the variants for the terminal.
std::string FormatVariantTable(const std::vector<VariantResult>& variants);

// The table, each variant's verdict with its explanation and the time an
// early decision saved against `planned` per variant, and the overall verdict.
std::string FormatSummary(const ReplaySummary& s, std::chrono::seconds planned);

}  // namespace allocguard::replay
