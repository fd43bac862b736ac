#include "operator/replay/variant_result.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "operator/common/duration.h"
#include "operator/memory/sequential_judge.h"

namespace allocguard::replay {

using memory::kBytesPerMiB;

namespace {

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// `sentence` after `text`: the judge's explanations are phrases without a
// full stop, so one is put between them.
void AppendSentence(std::string* text, const std::string& sentence) {
  if (!text->empty() && text->back() != '.') *text += '.';
  if (!text->empty()) *text += ' ';
  *text += sentence;
}

bool ParseDouble(const std::string& s, double* out) {
  try {
    *out = std::stod(s);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

std::vector<std::pair<std::string, std::string>> JudgeSettings::ToHeader() const {
  return {
      {"max_slope_gib_per_h", Fixed(max_slope_gib_per_h, 3)},
      {"sample_interval_s", Fixed(sample_interval_seconds, 3)},
      {"warmup_minutes", std::to_string(warmup_minutes)},
      {"max_minutes", std::to_string(max_minutes)},
      {"planned_minutes", std::to_string(planned_minutes)},
      {"max_late_fraction", Fixed(verdict.max_late_fraction, 4)},
      {"max_unexpected_responses", std::to_string(verdict.max_unexpected_responses)},
      {"early_stop", early_stop ? "true" : "false"},
  };
}

void JudgeSettings::FromHeader(const CsvRun& run) {
  double v;
  // A count outside what its type holds (a damaged header) keeps the
  // default: converting it would be undefined behaviour. Minutes beyond the
  // longest canary keep it too: the sequential judge plans one look per
  // minute, and a million of them took minutes to plan.
  constexpr double kMaxPlannedMinutes =
      std::chrono::duration_cast<std::chrono::minutes>(kMaxCanaryDuration).count();
  auto fits = [&v](double lo, double hi) { return v >= lo && v <= hi; };
  if (ParseDouble(run.Header("max_slope_gib_per_h"), &v)) max_slope_gib_per_h = v;
  if (ParseDouble(run.Header("sample_interval_s"), &v)) sample_interval_seconds = v;
  if (ParseDouble(run.Header("warmup_minutes"), &v) && fits(0, kMaxPlannedMinutes)) {
    warmup_minutes = static_cast<int>(v);
  }
  if (ParseDouble(run.Header("max_minutes"), &v) && fits(1, kMaxPlannedMinutes)) {
    max_minutes = static_cast<int>(v);
  }
  if (ParseDouble(run.Header("planned_minutes"), &v) && fits(0, kMaxPlannedMinutes)) {
    planned_minutes = static_cast<int>(v);
  }
  if (ParseDouble(run.Header("max_late_fraction"), &v)) verdict.max_late_fraction = v;
  if (ParseDouble(run.Header("max_unexpected_responses"), &v) && fits(-9.2e18, 9.2e18)) {
    verdict.max_unexpected_responses = static_cast<int64_t>(v);
  }
  std::string early = run.Header("early_stop");
  if (!early.empty()) early_stop = early == "true";
}

std::unique_ptr<memory::FloorJudge> JudgeFor(const JudgeSettings& settings) {
  memory::JudgeOptions options;
  options.max_slope_gib_per_h = settings.max_slope_gib_per_h;
  options.max_minutes = settings.max_minutes;
  options.planned_minutes = settings.planned_minutes;
  options.warmup_minutes = settings.warmup_minutes;
  return memory::NewDefaultJudge(options);
}

memory::FloorJudgement JudgeMinuteByMinute(std::span<const memory::MinuteFloor> floors,
                                           const memory::FloorJudge& judge, bool early_stop,
                                           bool finished, std::optional<int>* decided_at_minute) {
  decided_at_minute->reset();
  if (early_stop) {
    for (size_t n = 1; n <= floors.size(); ++n) {
      memory::FloorJudgement j = judge.Judge(floors.first(n), /*final=*/false);
      if (j.decision != memory::FloorDecision::kContinue) {
        *decided_at_minute = floors[n - 1].minute;
        return j;
      }
    }
  }
  memory::FloorJudgement j = judge.Judge(floors, finished);
  if (j.decision != memory::FloorDecision::kContinue && !floors.empty()) {
    *decided_at_minute = floors.back().minute;
  }
  return j;
}

namespace {

// The samples of `run`, with the peak, an OOM kill the counters show, and
// the last row's totals recorded in `r`.
std::vector<memory::MemorySample> ReadRows(const CsvRun& run, VariantResult* r) {
  std::vector<memory::MemorySample> samples;
  samples.reserve(run.rows.size());
  int64_t first_ooms = run.rows.empty() ? 0 : run.rows.front().oom_kills;
  for (const SampleRow& row : run.rows) {
    samples.push_back(row.memory);
    r->peak_bytes = std::max(r->peak_bytes, static_cast<double>(row.memory.JudgedBytes()));
    if (!r->oom_minute && row.oom_kills > first_ooms) {
      r->oom_minute = static_cast<int>(row.memory.t_seconds / 60.0);
    }
  }
  if (!run.rows.empty()) {
    const SampleRow& last = run.rows.back();
    r->duration_seconds = last.memory.t_seconds;
    r->cpu_seconds = last.cpu_seconds;
    r->requests_completed = last.completed;
    r->requests_late = last.late;
    r->unexpected_responses = last.errors;
  }
  return samples;
}

// The first failure, OOM and exit, and the last latency figures.
void ReadEvents(const std::vector<RunEvent>& events, VariantResult* r) {
  for (const RunEvent& e : events) {
    if (e.kind == RunEventKind::kFailed && !r->failure) r->failure = e.text;
    if (e.kind == RunEventKind::kOom && !r->oom_minute) r->oom_minute = e.minute;
    if (e.kind == RunEventKind::kExited && !r->exit_minute) r->exit_minute = e.minute;
    if (e.kind == RunEventKind::kLatency) {
      if (e.p50_ms) r->p50_ms = e.p50_ms;
      if (e.p99_ms) r->p99_ms = e.p99_ms;
    }
  }
}

// The floors after warm-up, their median and last, and the recommended limit.
void ReadFloors(const std::vector<memory::MemorySample>& samples, const JudgeSettings& settings,
                VariantResult* r) {
  r->floors = memory::ComputeMinuteFloors(
      samples, {.warmup_minutes = settings.warmup_minutes,
                .sample_interval_seconds = settings.sample_interval_seconds});
  if (!r->floors.empty()) {
    std::vector<double> levels;
    for (const auto& f : r->floors) levels.push_back(f.floor_bytes);
    std::sort(levels.begin(), levels.end());
    size_t n = levels.size();
    r->floor_level_bytes = n % 2 ? levels[n / 2] : (levels[n / 2 - 1] + levels[n / 2]) / 2;
    r->final_floor_bytes = r->floors.back().floor_bytes;
  }
  const double step = 64 * kBytesPerMiB;
  r->recommended_limit_bytes = std::ceil(r->peak_bytes * 1.25 / step) * step;
}

// The samples whose books carry the in-use/retained split.
std::vector<BooksSample> BooksSamples(const CsvRun& run) {
  std::vector<BooksSample> samples;
  for (const SampleRow& row : run.rows) {
    if (!row.books_in_use_bytes || !row.books_retained_bytes) continue;
    samples.push_back({.t_seconds = row.memory.t_seconds,
                       .in_use_bytes = *row.books_in_use_bytes,
                       .retained_bytes = *row.books_retained_bytes});
  }
  return samples;
}

}  // namespace

VariantResult AnalyzeRun(const CsvRun& run, const JudgeSettings& settings, bool finished) {
  VariantResult r;
  r.variant = run.Header("variant", "unnamed");
  r.allocator = run.Header("allocator");
  r.env = run.Header("env");
  r.library = run.Header("library");
  r.cgroup = run.Header("cgroup");
  r.settings = settings;
  const std::vector<memory::MemorySample> samples = ReadRows(run, &r);
  ReadEvents(run.events, &r);
  ReadFloors(samples, settings, &r);

  auto judge = JudgeFor(settings);
  r.judgement =
      JudgeMinuteByMinute(r.floors, *judge, settings.early_stop, finished, &r.decided_at_minute);
  memory::RunFacts facts;
  facts.requests_completed = r.requests_completed;
  facts.requests_late = r.requests_late;
  facts.unexpected_responses = r.unexpected_responses;
  facts.oom_minute = r.oom_minute;
  facts.failure = r.failure;
  r.verdict = memory::DecideVariantVerdict(facts, r.judgement, settings.verdict);

  // The books explain; the verdict above is the judge's alone.
  const std::vector<BooksSample> books = BooksSamples(run);
  r.books = ComputeBooksFloors(books,
                               {.warmup_minutes = settings.warmup_minutes,
                                .sample_interval_seconds = settings.sample_interval_seconds},
                               settings.max_slope_gib_per_h);
  if (r.books) {
    AppendSentence(&r.verdict.explanation, ExplainBooks(*r.books));
  }
  return r;
}

nlohmann::json ToJson(const VariantResult& r) {
  using nlohmann::json;
  auto mib = [](double b) { return std::round(b / kBytesPerMiB * 10) / 10; };
  auto num = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  json floors = json::array();
  for (const auto& f : r.floors)
    floors.push_back({{"minute", f.minute}, {"floorMiB", mib(f.floor_bytes)}});
  json j = {
      {"variant", r.variant},
      {"allocator", r.allocator},
      {"env", r.env},
      {"library", r.library},
      {"cgroup", r.cgroup},
      {"verdict", memory::VerdictName(r.verdict.verdict)},
      {"explanation", r.verdict.explanation},
      {"judgement",
       {{"decision", memory::FloorDecisionName(r.judgement.decision)},
        {"method", r.judgement.method},
        {"slopeGiBPerHour", num(r.judgement.slope_gib_per_h)},
        {"slopeLowGiBPerHour", num(r.judgement.slope_low_gib_per_h)},
        {"slopeHighGiBPerHour", num(r.judgement.slope_high_gib_per_h)},
        {"theilSenGiBPerHour", num(r.judgement.theil_sen_gib_per_h)},
        {"trendPValue", num(r.judgement.trend_p_value)},
        {"minutesUsed", r.judgement.minutes_used},
        {"confidence", num(r.judgement.confidence)},
        {"lag1Autocorrelation", num(r.judgement.lag1_autocorrelation)},
        {"growthStartMinute", r.judgement.growth_start_minute},
        {"explanation", r.judgement.explanation}}},
      {"decidedAtMinute", r.decided_at_minute ? json(*r.decided_at_minute) : json(nullptr)},
      {"maxSlopeGiBPerHour", r.settings.max_slope_gib_per_h},
      {"floors", floors},
      {"floorLevelMiB", mib(r.floor_level_bytes)},
      {"finalFloorMiB", mib(r.final_floor_bytes)},
      {"peakMiB", mib(r.peak_bytes)},
      {"recommendedLimitMiB", mib(r.recommended_limit_bytes)},
      {"durationSeconds", std::round(r.duration_seconds)},
      {"cpuSeconds", std::round(r.cpu_seconds * 10) / 10},
      {"requestsCompleted", r.requests_completed},
      {"requestsLate", r.requests_late},
      {"unexpectedResponses", r.unexpected_responses},
      {"p50Milliseconds", r.p50_ms ? json(*r.p50_ms) : json(nullptr)},
      {"p99Milliseconds", r.p99_ms ? json(*r.p99_ms) : json(nullptr)},
      {"oomMinute", r.oom_minute ? json(*r.oom_minute) : json(nullptr)},
      {"exitMinute", r.exit_minute ? json(*r.exit_minute) : json(nullptr)},
      {"failure", r.failure ? json(*r.failure) : json(nullptr)},
  };
  if (r.books) {
    json in_use = json::array();
    json retained = json::array();
    for (const auto& f : r.books->in_use.floors) {
      in_use.push_back({{"minute", f.minute}, {"floorMiB", mib(f.floor_bytes)}});
    }
    for (const auto& f : r.books->retained.floors) {
      retained.push_back({{"minute", f.minute}, {"floorMiB", mib(f.floor_bytes)}});
    }
    j["books"] = {{"reading", BooksReadingName(r.books->reading)},
                  {"inUseSlopeGiBPerHour", num(r.books->in_use.slope_gib_per_h)},
                  {"inUseSlopeLowGiBPerHour", num(r.books->in_use.low_gib_per_h)},
                  {"inUseSlopeHighGiBPerHour", num(r.books->in_use.high_gib_per_h)},
                  {"retainedSlopeGiBPerHour", num(r.books->retained.slope_gib_per_h)},
                  {"retainedSlopeLowGiBPerHour", num(r.books->retained.low_gib_per_h)},
                  {"retainedSlopeHighGiBPerHour", num(r.books->retained.high_gib_per_h)},
                  {"inUseFloors", std::move(in_use)},
                  {"retainedFloors", std::move(retained)}};
  } else {
    j["books"] = nullptr;
  }
  return j;
}

ReplaySummary Summarize(std::vector<VariantResult> variants) {
  ReplaySummary s;
  std::vector<memory::NamedVerdict> named;
  named.reserve(variants.size());
  for (const auto& v : variants) named.push_back({v.variant, v.allocator, v.verdict.verdict});
  s.overall = memory::ClassifyVariants(named);
  if (s.overall.classification == memory::Classification::kNone && !variants.empty()) {
    // Not classified: the candidate's own reason is the explanation.
    s.overall.explanation = variants.front().variant + ": " + variants.front().verdict.explanation;
  }
  s.variants = std::move(variants);
  return s;
}

nlohmann::json ToJson(const ReplaySummary& s) {
  nlohmann::json variants = nlohmann::json::array();
  for (const auto& v : s.variants) variants.push_back(ToJson(v));
  return {{"verdict", VerdictName(s.overall.verdict)},
          {"classification", memory::ClassificationName(s.overall.classification)},
          {"flatVariants", s.overall.flat_variants},
          {"explanation", s.overall.explanation},
          {"exitCode", memory::ExitCodeForVerdict(s.overall.verdict)},
          {"variants", variants}};
}

std::string ToJsonText(const VariantResult& r) {
  return ToJson(r).dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string ToJsonText(const ReplaySummary& s) {
  return ToJson(s).dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string FormatVariantTable(const std::vector<VariantResult>& variants) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%-14s %-12s %9s %16s %9s %9s %8s %8s %8s %6s %6s\n", "variant",
                "verdict", "slope", "interval GiB/h", "floor", "peak", "CPU s", "p50 ms", "p99 ms",
                "late", "errors");
  out += line;
  for (const auto& v : variants) {
    std::string interval = "[" + Fixed(v.judgement.slope_low_gib_per_h, 2) + ", " +
                           Fixed(v.judgement.slope_high_gib_per_h, 2) + "]";
    std::snprintf(
        line, sizeof line,
        "%-14s %-12s %+9.2f %16s %5.0f MiB %5.0f MiB %8.1f %8s %8s %6lld %6lld\n",
        v.variant.c_str(), memory::VerdictName(v.verdict.verdict), v.judgement.slope_gib_per_h,
        interval.c_str(), v.floor_level_bytes / kBytesPerMiB, v.peak_bytes / kBytesPerMiB,
        v.cpu_seconds, v.p50_ms ? Fixed(*v.p50_ms, 1).c_str() : "-",
        v.p99_ms ? Fixed(*v.p99_ms, 1).c_str() : "-", static_cast<long long>(v.requests_late),
        static_cast<long long>(v.unexpected_responses));
    out += line;
  }
  return out;
}

std::string FormatMinuteProgress(const VariantResult& r) {
  if (r.floors.empty()) return "no floor yet";
  const memory::FloorJudgement& j = r.judgement;
  const JudgeSettings& s = r.settings;
  const int planned =
      memory::PlannedMinutes({.max_minutes = s.max_minutes, .planned_minutes = s.planned_minutes});
  std::string out =
      "minute " + std::to_string(r.floors.back().minute) + " of " + std::to_string(planned);
  if (s.max_minutes > planned) out += " (up to " + std::to_string(s.max_minutes) + ")";
  out += "  floor " + Fixed(r.floors.back().floor_bytes / memory::kBytesPerMiB, 1) + " MiB";
  out += "  slope " + memory::FormatSlope(j.slope_gib_per_h);
  const bool has_interval = j.confidence > 0 && std::isfinite(j.slope_low_gib_per_h) &&
                            std::isfinite(j.slope_high_gib_per_h);
  const bool informative = has_interval && j.minutes_used >= kProgressIntervalMinFloors;
  if (informative) {
    out += " [" + memory::FormatSlopeValue(j.slope_low_gib_per_h) + ", " +
           memory::FormatSlopeValue(j.slope_high_gib_per_h) + "]";
  } else if (has_interval) {
    out += " (too few minutes for an interval yet)";
  } else {
    out += " (no interval yet)";
  }
  if (j.decision != memory::FloorDecision::kContinue) {
    out += "  " + std::string(memory::FloorDecisionName(j.decision));
    return out;
  }
  const std::optional<int> more =
      informative ? memory::MoreFloorsNeeded(j, s.max_slope_gib_per_h) : std::nullopt;
  if (more && *more > 0) {
    out += "  undecided: needs about " + std::to_string(*more) + " more minute" +
           (*more == 1 ? "" : "s") + " at this noise";
  } else {
    out += "  undecided";
  }
  if (j.past_planned_end) {
    out += "; past the planned " + std::to_string(planned) + " minutes, running on to " +
           std::to_string(s.max_minutes) + " while the verdict is unclear";
  }
  return out;
}

std::string FormatSummary(const ReplaySummary& s, std::chrono::seconds planned) {
  std::string out = FormatVariantTable(s.variants) + "\n";
  double saved_total = 0;
  for (const auto& v : s.variants) {
    out += v.variant + ": " + memory::VerdictName(v.verdict.verdict) + " — " +
           v.verdict.explanation + "\n";
    if (v.decided_at_minute && v.settings.early_stop && !v.failure) {
      double saved = static_cast<double>(planned.count()) - v.duration_seconds;
      if (saved > 30) {
        saved_total += saved;
        out += "  decided after " + Fixed(v.duration_seconds / 60, 1) + " min of the " +
               Fixed(static_cast<double>(planned.count()) / 60, 0) + " planned: saved " +
               Fixed(saved / 60, 1) + " min\n";
      } else if (saved < -30) {
        out += "  decided after " + Fixed(v.duration_seconds / 60, 1) + " min, past the " +
               Fixed(static_cast<double>(planned.count()) / 60, 0) +
               " planned: the verdict was still unclear there, so the run went on\n";
      }
    }
  }
  if (saved_total > 0) {
    out += "early verdicts saved " + Fixed(saved_total / 60, 1) + " min in all\n";
  }
  out += "\nverdict: " + std::string(VerdictName(s.overall.verdict)) + " — " +
         s.overall.explanation + "\n";
  return out;
}

}  // namespace allocguard::replay
