#include "operator/api/canary_status.h"

#include <cmath>

#include "operator/api/json_fields.h"
#include "operator/api/json_reader.h"

namespace allocguard::api {
namespace {

using json_fields::Dump;
using json_fields::Item;
using json_fields::Member;
using json_fields::Path;
using nlohmann::json;

using json_fields::Reader;

// status.phase and status.verdict, read with the meaning the header gives:
// an unknown phase is reported and reads as absent; an unknown verdict is
// reported and reads as Failed, kept as written in *unknown.
void ReadPhase(Reader& r, std::optional<CanaryPhase>* out) {
  std::string name;
  r.String("phase", &name);
  if (name.empty()) return;
  *out = CanaryPhaseFromName(name);
  if (!out->has_value()) r.Problem("phase", "\"" + name + "\" is not a phase allocguard writes");
}

void ReadVerdict(Reader& r, std::optional<Verdict>* out, std::string* unknown) {
  std::string name;
  r.String("verdict", &name);
  if (name.empty()) return;
  *out = VerdictFromName(name);
  if (out->has_value()) return;
  // Whoever wrote it, it is not a verdict the judge reached: it can only hold.
  *out = Verdict::kFailed;
  *unknown = name;
  r.Problem("verdict", "\"" + name + "\" is not a verdict allocguard writes; read as Failed");
}

// Each member written only when it holds something (see the header).
void PutString(json& out, const char* key, const std::string& value) {
  if (!value.empty()) out[key] = value;
}
template <typename T>
void PutOptional(json& out, const char* key, const std::optional<T>& value) {
  if (!value.has_value()) return;
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(*value)) return;
  }
  out[key] = *value;
}

// status...books: an object; an unknown reading is reported and kept.
void ReadBooks(Reader& r, std::optional<BooksStatus>* out) {
  const json* books = r.Object("books");
  if (books == nullptr) return;
  BooksStatus b;
  std::vector<std::string> problems;
  Reader reader(*books, r.PathOf("books"), &problems);
  std::string name;
  reader.String("reading", &name);
  if (!name.empty()) {
    b.reading = BooksReadingFromName(name);
    if (!b.reading.has_value()) {
      b.unknown_reading = name;
      reader.Problem("reading", "\"" + name + "\" is not a reading allocguard writes");
    }
  }
  reader.Numbers("inUseFloorsMiB", &b.in_use_floors_mib);
  reader.Numbers("retainedFloorsMiB", &b.retained_floors_mib);
  reader.Number("inUseSlopeGiBPerHour", &b.in_use_slope_gib_per_hour);
  reader.Number("retainedSlopeGiBPerHour", &b.retained_slope_gib_per_hour);
  for (const std::string& p : problems) r.Report(p);
  *out = std::move(b);
}

// The members a variant and each of its earlier runs share (PutRun writes
// them).
void ReadRun(Reader& r, VariantRun* out) {
  r.String("job", &out->job);
  ReadVerdict(r, &out->verdict, &out->unknown_verdict);
  r.Numbers("floorsMiB", &out->floors_mib);
  r.Number("floorSlopeGiBPerHour", &out->floor_slope_gib_per_hour);
  r.Number("slopeLowGiBPerHour", &out->slope_low_gib_per_hour);
  r.Number("slopeHighGiBPerHour", &out->slope_high_gib_per_hour);
  r.Int("requests", &out->requests);
  r.Int("late", &out->late);
  r.String("message", &out->message);
  r.Int("seed", &out->seed);
  ReadBooks(r, &out->books);
}

VariantStatus ParseVariant(const json& v, const std::string& path,
                           std::vector<std::string>* problems) {
  VariantStatus out;
  Reader r(v, path, problems);
  r.String("name", &out.name);
  r.String("allocator", &out.allocator);
  ReadPhase(r, &out.phase);
  ReadRun(r, &out);
  r.Number("peakMiB", &out.peak_mib);
  r.Number("recommendedLimitMiB", &out.recommended_limit_mib);
  r.Number("floorLevelMiB", &out.floor_level_mib);
  r.Number("cpuSeconds", &out.cpu_seconds);
  r.Number("p99Milliseconds", &out.p99_ms);
  r.Int("errors", &out.errors);
  r.Bool("oomKilled", &out.oom_killed);
  r.Int("oomMinute", &out.oom_minute);
  r.String("startFailure", &out.start_failure);
  r.String("measurementKey", &out.measurement_key);
  r.String("reusedFrom", &out.reused_from);
  r.Objects("earlierRuns", [&](const json& run, const std::string& run_path) {
    VariantRun earlier;
    Reader e(run, run_path, problems);
    ReadRun(e, &earlier);
    out.earlier_runs.push_back(std::move(earlier));
  });
  return out;
}

// status.recommendation: an object; rows that are not objects are reported
// and skipped.
void ReadRecommendation(Reader& r, std::vector<std::string>* problems,
                        std::optional<RecommendationStatus>* out) {
  const json* rec = r.Object("recommendation");
  if (rec == nullptr) return;
  RecommendationStatus s;
  Reader reader(*rec, r.PathOf("recommendation"), problems);
  reader.String("current", &s.current);
  reader.String("recommended", &s.recommended);
  reader.String("message", &s.message);
  reader.String("policySnippet", &s.policy_snippet);
  reader.Objects("ranked", [&](const json& row, const std::string& path) {
    BakeOffRowStatus b;
    Reader e(row, path, problems);
    e.Int("rank", &b.rank);
    e.String("variant", &b.variant);
    e.String("allocator", &b.allocator);
    ReadVerdict(e, &b.verdict, &b.unknown_verdict);
    e.Number("floorMiB", &b.floor_mib);
    e.Number("cpuMsPerRequest", &b.cpu_ms_per_request);
    e.Number("p99Milliseconds", &b.p99_ms);
    e.Number("floorChangePercent", &b.floor_change_percent);
    e.Number("cpuChangePercent", &b.cpu_change_percent);
    e.Number("p99ChangePercent", &b.p99_change_percent);
    e.String("costs", &b.costs);
    s.ranked.push_back(std::move(b));
  });
  *out = std::move(s);
}

}  // namespace

void SetCondition(std::vector<Condition>& conditions, const std::string& type,
                  const std::string& status, const std::string& reason, const std::string& message,
                  int64_t generation, const std::string& now_rfc3339) {
  Condition updated{type, status, reason, message, generation, now_rfc3339};
  for (Condition& c : conditions) {
    if (c.type != type) continue;
    if (c.status == status && !c.last_transition_time.empty()) {
      updated.last_transition_time = c.last_transition_time;
    }
    c = updated;
    return;
  }
  conditions.push_back(updated);
}

const Condition* FindCondition(const std::vector<Condition>& conditions, const std::string& type) {
  for (const Condition& c : conditions) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

std::vector<Condition> ParseConditions(const json& conditions, const std::string& path,
                                       std::vector<std::string>* problems) {
  std::vector<Condition> out;
  if (!conditions.is_array()) return out;
  for (size_t i = 0; i < conditions.size(); ++i) {
    const json& c = conditions[i];
    const std::string item = Item(path, i);
    if (!c.is_object()) {
      if (problems != nullptr) problems->push_back(item + ": must be an object, got " + Dump(c));
      continue;
    }
    Condition condition;
    Reader r(c, item, problems);
    r.String("type", &condition.type);
    r.String("status", &condition.status);
    r.String("reason", &condition.reason);
    r.String("message", &condition.message);
    r.Int("observedGeneration", &condition.observed_generation);
    r.String("lastTransitionTime", &condition.last_transition_time);
    out.push_back(condition);
  }
  return out;
}

json ConditionsToJson(const std::vector<Condition>& conditions) {
  json out = json::array();
  for (const Condition& c : conditions) {
    // type, status, reason and message are required by metav1.Condition:
    // always written, even when empty.
    json entry = {
        {"type", c.type}, {"status", c.status}, {"reason", c.reason}, {"message", c.message}};
    PutOptional(entry, "observedGeneration", c.observed_generation);
    PutString(entry, "lastTransitionTime", c.last_transition_time);
    out.push_back(entry);
  }
  return out;
}

const VariantStatus* ReplayCanaryStatus::FindVariant(const std::string& name) const {
  for (const VariantStatus& v : variants) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

VariantStatus* ReplayCanaryStatus::FindVariant(const std::string& name) {
  for (VariantStatus& v : variants) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

std::string RecordedVerdictName(const std::optional<Verdict>& verdict,
                                const std::string& unknown_verdict) {
  if (!unknown_verdict.empty()) return unknown_verdict;
  return verdict.has_value() ? VerdictName(*verdict) : "";
}

ReplayCanaryStatus ParseReplayCanaryStatus(const json& status, std::vector<std::string>* problems) {
  ReplayCanaryStatus out;
  if (!status.is_object()) {
    if (!status.is_null() && problems != nullptr) {
      problems->push_back("status: must be an object, got " + Dump(status));
    }
    return out;
  }
  Reader r(status, "status", problems);
  r.Int("observedGeneration", &out.observed_generation);
  ReadPhase(r, &out.phase);
  ReadVerdict(r, &out.verdict, &out.unknown_verdict);
  r.String("explanation", &out.explanation);
  r.String("floorSlope", &out.floor_slope);
  r.String("flatVariant", &out.flat_variant);
  r.Int("queuePosition", &out.queue_position);
  r.String("startTime", &out.start_time);
  r.String("completionTime", &out.completion_time);
  if (const json* arena = r.Object("arenaLimit")) {
    ArenaLimitStatus limit;
    Reader a(*arena, r.PathOf("arenaLimit"), problems);
    a.String("source", &limit.source);
    a.Int("value", &limit.value);
    a.Int("productionCPUs", &limit.production_cpus);
    out.arena_limit = limit;
  }
  if (const json* conditions = r.Array("conditions")) {
    out.conditions = ParseConditions(*conditions, r.PathOf("conditions"), problems);
  }
  r.Objects("variants", [&](const json& v, const std::string& path) {
    out.variants.push_back(ParseVariant(v, path, problems));
  });
  ReadRecommendation(r, problems, &out.recommendation);
  return out;
}

ReplayCanaryStatus CanaryStatusOf(const json& canary, std::vector<std::string>* problems) {
  const json* status = Member(canary, "status");
  return ParseReplayCanaryStatus(status != nullptr ? *status : json(), problems);
}

std::optional<CanaryPhase> CanaryPhaseOf(const json& canary) {
  std::optional<CanaryPhase> phase;
  const json* status = Member(canary, "status");
  if (status == nullptr) return phase;
  Reader r(*status, "status", nullptr);
  ReadPhase(r, &phase);
  return phase;
}

namespace {

// A list of the finite numbers, when there are any.
void PutNumbers(json& out, const char* key, const std::vector<double>& values) {
  if (values.empty()) return;
  json list = json::array();
  for (double v : values) {
    if (std::isfinite(v)) list.push_back(v);
  }
  out[key] = std::move(list);
}

// The members a variant and each of its earlier runs share (ReadRun reads
// them).
void PutRun(json& out, const VariantRun& v) {
  PutString(out, "job", v.job);
  PutString(out, "verdict", RecordedVerdictName(v.verdict, v.unknown_verdict));
  PutNumbers(out, "floorsMiB", v.floors_mib);
  PutOptional(out, "floorSlopeGiBPerHour", v.floor_slope_gib_per_hour);
  PutOptional(out, "slopeLowGiBPerHour", v.slope_low_gib_per_hour);
  PutOptional(out, "slopeHighGiBPerHour", v.slope_high_gib_per_hour);
  PutOptional(out, "requests", v.requests);
  PutOptional(out, "late", v.late);
  PutString(out, "message", v.message);
  PutOptional(out, "seed", v.seed);
  if (v.books.has_value()) {
    json books = json::object();
    const BooksStatus& b = *v.books;
    PutString(
        books, "reading",
        b.reading.has_value() ? std::string(BooksReadingName(*b.reading)) : b.unknown_reading);
    PutNumbers(books, "inUseFloorsMiB", b.in_use_floors_mib);
    PutNumbers(books, "retainedFloorsMiB", b.retained_floors_mib);
    PutOptional(books, "inUseSlopeGiBPerHour", b.in_use_slope_gib_per_hour);
    PutOptional(books, "retainedSlopeGiBPerHour", b.retained_slope_gib_per_hour);
    out["books"] = std::move(books);
  }
}

}  // namespace

json VariantStatusToJson(const VariantStatus& v) {
  json out = json::object();
  PutString(out, "name", v.name);
  PutString(out, "allocator", v.allocator);
  if (v.phase.has_value()) out["phase"] = CanaryPhaseName(*v.phase);
  PutRun(out, v);
  PutOptional(out, "peakMiB", v.peak_mib);
  PutOptional(out, "recommendedLimitMiB", v.recommended_limit_mib);
  PutOptional(out, "floorLevelMiB", v.floor_level_mib);
  PutOptional(out, "cpuSeconds", v.cpu_seconds);
  PutOptional(out, "p99Milliseconds", v.p99_ms);
  PutOptional(out, "errors", v.errors);
  if (v.oom_killed) out["oomKilled"] = true;
  PutOptional(out, "oomMinute", v.oom_minute);
  PutString(out, "startFailure", v.start_failure);
  PutString(out, "measurementKey", v.measurement_key);
  PutString(out, "reusedFrom", v.reused_from);
  if (!v.earlier_runs.empty()) {
    json runs = json::array();
    for (const VariantRun& run : v.earlier_runs) {
      json entry = json::object();
      PutRun(entry, run);
      runs.push_back(std::move(entry));
    }
    out["earlierRuns"] = std::move(runs);
  }
  return out;
}

json ReplayCanaryStatusToJson(const ReplayCanaryStatus& s) {
  json out = json::object();
  PutOptional(out, "observedGeneration", s.observed_generation);
  if (s.phase.has_value()) out["phase"] = CanaryPhaseName(*s.phase);
  PutString(out, "verdict", RecordedVerdictName(s.verdict, s.unknown_verdict));
  PutString(out, "explanation", s.explanation);
  PutString(out, "floorSlope", s.floor_slope);
  PutString(out, "flatVariant", s.flat_variant);
  PutOptional(out, "queuePosition", s.queue_position);
  PutString(out, "startTime", s.start_time);
  PutString(out, "completionTime", s.completion_time);
  if (s.arena_limit.has_value()) {
    json arena = json::object();
    PutString(arena, "source", s.arena_limit->source);
    PutOptional(arena, "value", s.arena_limit->value);
    PutOptional(arena, "productionCPUs", s.arena_limit->production_cpus);
    out["arenaLimit"] = arena;
  }
  if (!s.conditions.empty()) out["conditions"] = ConditionsToJson(s.conditions);
  if (!s.variants.empty()) {
    json variants = json::array();
    for (const VariantStatus& v : s.variants) variants.push_back(VariantStatusToJson(v));
    out["variants"] = variants;
  }
  if (s.recommendation.has_value()) {
    const RecommendationStatus& rec = *s.recommendation;
    json recommendation = json::object();
    PutString(recommendation, "current", rec.current);
    PutString(recommendation, "recommended", rec.recommended);
    PutString(recommendation, "message", rec.message);
    PutString(recommendation, "policySnippet", rec.policy_snippet);
    json ranked = json::array();
    for (const BakeOffRowStatus& b : rec.ranked) {
      json row = json::object();
      row["rank"] = b.rank;
      PutString(row, "variant", b.variant);
      PutString(row, "allocator", b.allocator);
      PutString(row, "verdict", RecordedVerdictName(b.verdict, b.unknown_verdict));
      PutOptional(row, "floorMiB", b.floor_mib);
      PutOptional(row, "cpuMsPerRequest", b.cpu_ms_per_request);
      PutOptional(row, "p99Milliseconds", b.p99_ms);
      PutOptional(row, "floorChangePercent", b.floor_change_percent);
      PutOptional(row, "cpuChangePercent", b.cpu_change_percent);
      PutOptional(row, "p99ChangePercent", b.p99_change_percent);
      PutString(row, "costs", b.costs);
      ranked.push_back(std::move(row));
    }
    recommendation["ranked"] = std::move(ranked);
    out["recommendation"] = std::move(recommendation);
  }
  return out;
}

}  // namespace allocguard::api
