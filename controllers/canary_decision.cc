#include "controllers/canary_decision.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <map>
#include <optional>

#include "controllers/injection_breaker.h"
#include "controllers/policy_decision.h"
#include "operator/admission/allocator_injection.h"
#include "operator/admission/deployment_gate.h"
#include "operator/api/deployment.h"
#include "operator/api/names.h"
#include "operator/api/pod_template.h"
#include "operator/api/policy.h"
#include "operator/api/quantity.h"
#include "operator/canary/job_builder.h"
#include "operator/kube/object.h"
#include "operator/memory/floor_judge.h"
#include "operator/memory/verdict.h"
#include "operator/replay/bake_off.h"

namespace allocguard::controllers {
namespace {

using nlohmann::json;

// JSON accessors that never throw (operator/kube/object.h).

constexpr char kCandidate[] = "candidate";
constexpr double kBytesPerMiB = 1024.0 * 1024.0;

bool IsRecorded(const api::VariantStatus* variant_status) {
  return variant_status != nullptr && Ended(variant_status->phase);
}

// The status entry for a variant whose run ended.
api::VariantStatus RecordedVariant(const std::string& name, const std::string& allocator,
                                   const VariantObservation& obs) {
  api::VariantStatus v;
  v.name = name;
  v.allocator = allocator;
  v.job = obs.job_name;
  if (obs.result.has_value()) {
    const replay::CanaryResult& r = *obs.result;
    v.floors_mib = r.floors_mib;
    // NaN (too few floors to fit) is left out: status numbers must be finite.
    auto finite = [](double x) {
      return std::isfinite(x) ? std::optional<double>(x) : std::nullopt;
    };
    v.floor_slope_gib_per_hour = finite(r.slope_gib_per_hour);
    v.slope_low_gib_per_hour = finite(r.slope_low);
    v.slope_high_gib_per_hour = finite(r.slope_high);
    v.peak_mib = finite(r.peak_mib);
    v.recommended_limit_mib =
        finite(memory::RecommendedLimitBytes(r.peak_mib * kBytesPerMiB) / kBytesPerMiB);
    v.floor_level_mib = finite(r.floor_level_mib);
    v.cpu_seconds = finite(r.cpu_seconds);
    v.p99_ms = finite(r.p99_ms);
    v.requests = r.requests;
    v.errors = r.errors;
    v.late = r.late;
    if (r.books_reading.has_value()) {
      v.books =
          api::BooksStatus{.reading = r.books_reading,
                           .in_use_floors_mib = r.in_use_floors_mib,
                           .retained_floors_mib = r.retained_floors_mib,
                           .in_use_slope_gib_per_hour = finite(r.in_use_slope_gib_per_hour),
                           .retained_slope_gib_per_hour = finite(r.retained_slope_gib_per_hour)};
    }
  }
  Verdict verdict = Verdict::kFailed;
  std::string message;
  if (obs.workload_oom_killed) {
    verdict = Verdict::kOOMKilled;
    v.oom_killed = true;
    if (obs.result.has_value() && obs.result->workload_exited) {
      v.oom_minute = obs.result->exit_minute;
      message = "the workload was OOM-killed in minute " + std::to_string(obs.result->exit_minute);
    } else {
      message = "the workload was OOM-killed";
    }
  } else if (obs.workload_start_failure.has_value()) {
    // Whatever the driver reported afterwards, nothing was measured.
    verdict = Verdict::kFailed;
    v.start_failure = *obs.workload_start_failure;
    message = "the workload did not start under " + allocator + ": " + *obs.workload_start_failure;
  } else if (obs.result.has_value()) {
    verdict = obs.result->verdict;
    message = obs.result->message;
  } else if (obs.result_error.has_value()) {
    message = "the replay driver's result could not be read: " + *obs.result_error;
  } else {
    message = obs.job_failure.value_or("the canary Job ended without a result");
  }
  v.verdict = verdict;
  v.phase = verdict == Verdict::kFailed ? api::CanaryPhase::kFailed : api::CanaryPhase::kCompleted;
  v.message = message;
  return v;
}

void SetVariantStatus(api::ReplayCanaryStatus& status, const api::VariantStatus& entry) {
  if (api::VariantStatus* v = status.FindVariant(entry.name)) {
    *v = entry;
  } else {
    status.variants.push_back(entry);
  }
}

// A measurement another canary recorded that this canary may copy, and how
// many of the runs before its last one come along.
struct Copyable {
  const EarlierMeasurement* from = nullptr;
  size_t runs_before = 0;
};

// The earliest-listed reusable measurement whose last run has the key
// (MeasurementKey) of this canary's run `rerun` of variant `name` (`key`), or, for
// the candidate, of a later run within its canary.inconclusiveReruns whose
// runs before it the measurement holds too. The runs of a chain differ only
// in their seed, each the one before plus one (api::RerunSeed), so the runs
// before a matching run are the Inconclusive runs this canary would make
// first: a canary created after another's candidate was rerun copies the
// rerun with the runs before it instead of starting over.
Copyable FindEarlier(const CanaryInput& input, const std::string& name, int rerun,
                     const std::string& key) {
  if (input.earlier.empty()) return {};
  const int last =
      name == kCandidate ? std::max(rerun, input.canary.spec.canary.inconclusive_reruns) : rerun;
  std::vector<std::string> keys = {key};  // keys[i]: the key of run rerun + i
  for (int n = rerun + 1; n <= last; ++n) {
    keys.push_back(MeasurementKey(input.canary, name, input.containers, n));
  }
  for (const EarlierMeasurement& m : input.earlier) {
    if (m.canary == input.canary.name || !ReusableMeasurement(m.variant)) continue;
    for (size_t i = 0; i < keys.size() && i <= m.variant.earlier_runs.size(); ++i) {
      if (m.variant.measurement_key == keys[i]) return {&m, i};
    }
  }
  return {};
}

const VariantObservation* FindObservation(const CanaryInput& input, const std::string& variant) {
  for (const VariantObservation& o : input.observations) {
    if (o.variant == variant) return &o;
  }
  return nullptr;
}

}  // namespace

bool Ended(std::optional<api::CanaryPhase> phase) {
  return phase == api::CanaryPhase::kCompleted || phase == api::CanaryPhase::kFailed;
}

std::vector<std::string> VariantOrder(const api::ReplayCanary& canary) {
  std::vector<std::string> order = {kCandidate};
  for (const api::VariantSpec& v : canary.spec.canary.variants) {
    if (v.name != kCandidate) order.push_back(v.name);
  }
  return order;
}

api::AllocatorSpec VariantAllocator(const api::ReplayCanary& canary, const std::string& variant) {
  for (const api::VariantSpec& v : canary.spec.canary.variants) {
    if (v.name == variant) return canary::VariantAllocator(canary, v);
  }
  return canary.spec.candidate_allocator;
}

std::string MeasurementKey(const api::ReplayCanary& canary, const std::string& variant,
                           const std::vector<std::string>& containers, int rerun) {
  api::ReplayCanarySpec spec;
  spec.template_hash = canary.spec.template_hash;
  spec.pod_template_json = canary.spec.pod_template_json;
  spec.candidate_allocator = VariantAllocator(canary, variant);
  spec.libc = canary.spec.libc;
  spec.canary = canary.spec.canary;
  spec.canary.variants.clear();  // which other variants ran changes nothing
  spec.canary.bake_off = false;  // nor does ranking them
  // Nor does how often an Inconclusive run would be repeated; the seed the
  // run used does.
  spec.canary.inconclusive_reruns = api::kDefaultInconclusiveReruns;
  spec.canary.load.seed = api::RerunSeed(spec.canary.load.seed, rerun);
  spec.limits = canary.spec.limits;
  json key = api::ReplayCanarySpecToJson(spec);  // "template" parsed, always an object
  // The template's labels are not an input: the canary's Pods carry labels
  // of their own (canary::BuildCanaryJob), so a Deployment and a DaemonSet
  // whose templates differ only in labels run the same Job.
  if (auto metadata = key["template"].find("metadata");
      metadata != key["template"].end() && metadata->is_object()) {
    metadata->erase("labels");
  }
  key["containers"] = containers;
  // A StatefulSet's canary pod has the identity of the set's first pod and
  // mounts its claims as emptyDirs (BuildVariantJob): it measures something
  // no Deployment's canary does, and a workload may read its hostname. The
  // claims are not in the canary's spec, but a StatefulSet's
  // volumeClaimTemplates cannot change, so its name stands for them.
  if (canary.spec.target_kind == "StatefulSet") {
    key["statefulSet"] = canary.spec.target_name;
  }
  return api::ContentHash(key.dump());
}

int RerunOf(const api::VariantStatus* variant_status) {
  return variant_status == nullptr ? 0 : static_cast<int>(variant_status->earlier_runs.size());
}

std::string InconclusiveAdvice(const api::ReplayCanary& canary,
                               const api::VariantStatus& candidate) {
  const api::CanarySpec& spec = canary.spec.canary;
  // The runs, oldest first, with the seeds their Jobs drove (RerunSeed of
  // the rerun's number, as the job builder derives them).
  const int runs = RerunOf(&candidate) + 1;
  std::string seed_list;
  for (int i = 0; i < runs; ++i) {
    if (i > 0) seed_list += i + 1 == runs ? " and " : ", ";
    seed_list += std::to_string(api::RerunSeed(spec.load.seed, i));
  }
  std::string out =
      runs == 1 ? "the candidate ran once (seed " + seed_list + ")"
                : "the candidate ran " + std::to_string(runs) + " times (seeds " + seed_list + ")";
  out += ", each for up to canary.maxDuration " + api::FormatDuration(spec.max_duration);
  const std::string quieter_how = "a steadier canary.load, a canary node with less other load";
  if (candidate.requests.value_or(0) > 0 &&
      candidate.late.value_or(0) * 100 > *candidate.requests) {
    return out + ": the workload fell behind the load (" +
           std::to_string(candidate.late.value_or(0)) + " of " +
           std::to_string(*candidate.requests) +
           " requests started late), so its floors measure a backlog; a lower canary.load.rate "
           "would let it keep up";
  }
  const double threshold =
      static_cast<double>(canary.spec.limits.max_floor_slope_bytes_per_hour) / memory::kBytesPerGiB;
  if (candidate.slope_high_gib_per_hour.has_value() &&
      *candidate.slope_high_gib_per_hour < -threshold) {
    // Not a ratchet, and not level either: no number of minutes makes a
    // floor that keeps falling read as flat.
    return out + ": its floor was still falling (" +
           memory::FormatSlope(candidate.floor_slope_gib_per_hour.value_or(0)) +
           ", faster than the limit of " + memory::FormatSlope(-threshold) +
           "): the workload had not settled; memory it releases late (caches, pools filled "
           "at start) needs a longer canary.duration to level off";
  }
  if (candidate.floor_slope_gib_per_hour.has_value() &&
      candidate.slope_low_gib_per_hour.has_value() &&
      candidate.slope_high_gib_per_hour.has_value() && !candidate.floors_mib.empty()) {
    memory::FloorJudgement last;
    last.slope_gib_per_h = *candidate.floor_slope_gib_per_hour;
    last.slope_low_gib_per_h = *candidate.slope_low_gib_per_hour;
    last.slope_high_gib_per_h = *candidate.slope_high_gib_per_hour;
    last.minutes_used = static_cast<int>(candidate.floors_mib.size());
    last.confidence = 1;  // an interval exists; its coverage does not enter the estimate
    if (const std::optional<int> more = memory::MoreFloorsNeeded(last, threshold);
        more.has_value() && *more > 0) {
      // Rounded up to whole 5 minutes past the maximum the run had.
      const int64_t ran =
          std::chrono::duration_cast<std::chrono::minutes>(spec.max_duration).count();
      const int64_t want = (ran + *more + 4) / 5 * 5;
      return out + ": at the noise it measured, about " + std::to_string(*more) +
             " more minutes would decide it: set canary.maxDuration to " + std::to_string(want) +
             "m, or make the floors quieter (" + quieter_how + ")";
    }
  }
  char limit[32];
  std::snprintf(limit, sizeof limit, "%.2f", threshold);
  return out + ": its floor slope sits at the limit (±" + std::string(limit) +
         " GiB/h, limits.maxFloorSlopePerHour) itself, where more minutes decide it only "
         "slowly; " +
         "quieter floors (" + quieter_how + ") or a much longer canary.maxDuration would decide it";
}

bool ReusableMeasurement(const api::VariantStatus& variant_status) {
  if (variant_status.phase != api::CanaryPhase::kCompleted) return false;
  if (variant_status.measurement_key.empty()) return false;
  const std::optional<Verdict> verdict = variant_status.verdict;
  return verdict == Verdict::kFlat || verdict == Verdict::kRatchet ||
         verdict == Verdict::kOOMKilled || verdict == Verdict::kErrors;
}

std::string RefuseTemplateRights(const api::ReplayCanary& canary,
                                 const std::string& target_template_hash) {
  const json tmpl = json::parse(canary.spec.pod_template_json, nullptr, false);
  if (!target_template_hash.empty() && api::MeasuredTemplateHash(tmpl) == target_template_hash) {
    return "";
  }
  const std::vector<std::string> fields = api::RightsBeyondAnOrdinaryPod(tmpl);
  if (fields.empty()) return "";
  std::string list;
  for (const std::string& f : fields)
    list += (list.empty() ? "" : ", ") + std::string("spec.template.") + f;
  return "the template asks for " + list + ", and it is not the current template of " +
         canary.spec.target_kind + "/" + canary.spec.target_name + " nor of any " +
         canary.spec.target_kind + " of the namespace" +
         ": allocguard runs such a template only for the workload that has it (a hand-made "
         "ReplayCanary gets no more than an ordinary pod of the namespace)";
}

VariantObservation ObserveVariant(const std::string& variant, const std::string& job_name,
                                  const api::JobSummary* job,
                                  const std::vector<api::PodSummary>& pods) {
  VariantObservation obs;
  obs.variant = variant;
  obs.job_name = job_name;
  if (job == nullptr) return obs;
  obs.job_exists = true;
  for (const api::ObjectCondition& c : job->conditions) {
    if (c.type == "Failed" && c.status == "True") {
      obs.job_failure = "the canary Job failed: " + c.reason + " " + c.message;
    }
  }
  for (const api::PodSummary& pod : pods) {
    for (const api::ContainerStatusSummary& cs : pod.container_statuses) {
      const api::ContainerStateSummary& state = cs.state;
      const api::ContainerStateSummary& last = cs.last_state;
      if (cs.name == api::kDriverContainerName) {
        if (state.terminated) {
          auto decoded = replay::DecodeCanaryResult(state.terminated_message);
          if (decoded.ok()) {
            obs.result = *decoded;
          } else {
            obs.result_error = decoded.status().message();
          }
        }
        continue;
      }
      if (state.terminated_reason == "OOMKilled" || last.terminated_reason == "OOMKilled") {
        obs.workload_oom_killed = true;
      }
      // The injection sets FallbackToLogsOnError: a loader that refused
      // the variant's library left its words in the termination message.
      for (const api::ContainerStateSummary* t : {&state, &last}) {
        if (obs.workload_start_failure.has_value()) break;
        if (auto loader = FindLoaderError(t->terminated_message)) {
          obs.workload_start_failure = cs.name + ": " + *loader;
        }
      }
      const std::string& wreason = state.waiting_reason;
      if (wreason == "ImagePullBackOff" || wreason == "ErrImagePull" ||
          wreason == "CreateContainerConfigError" || wreason == "CrashLoopBackOff") {
        obs.pod_problem = cs.name + ": " + wreason + " " + state.waiting_message;
      }
    }
    for (const api::ObjectCondition& c : pod.conditions) {
      if (c.type == "PodScheduled" && c.status == "False") {
        obs.pod_problem = "not scheduled: " + c.message;
      }
    }
    if (pod.phase == "Failed" && !obs.result.has_value() && !obs.workload_oom_killed) {
      obs.job_failure = "the canary pod failed: " + pod.reason + " " + pod.message;
    }
  }
  return obs;
}

namespace {

// What the variant rules of DecideCanary read about one variant that has no
// recorded result yet, derived once.
struct VariantFacts {
  const CanaryInput& input;
  const std::string& name;
  const VariantObservation* obs;  // null when not observed
  std::string allocator;          // its allocator's name
  int rerun = 0;                  // which run this is (RerunOf)
  // The runs before this one (kept across the entry's rewrites).
  std::vector<api::VariantRun> earlier_runs;
  int64_t seed = 0;  // the load seed of this run
  std::string key;   // MeasurementKey of this run

  bool JobExists() const { return obs != nullptr && obs->job_exists; }
};

VariantFacts FactsOf(const CanaryInput& input, const std::string& name,
                     const api::VariantStatus* recorded, const VariantObservation* obs) {
  const api::ReplayCanary& canary = input.canary;
  VariantFacts f{input, name, obs};
  f.allocator = api::AllocatorName(VariantAllocator(canary, name).name);
  f.rerun = RerunOf(recorded);
  if (recorded != nullptr) f.earlier_runs = recorded->earlier_runs;
  f.seed = static_cast<int64_t>(api::RerunSeed(canary.spec.canary.load.seed, f.rerun));
  f.key = MeasurementKey(canary, name, input.containers, f.rerun);
  return f;
}

// What a variant rule did: nothing (the next rule is tried), recorded the
// variant's result (the next variant is decided), or left the variant
// running or starting (later variants wait).
enum class VariantStep { kNotApplicable, kRecorded, kRunning };

using VariantRule = VariantStep (*)(const VariantFacts&, api::ReplayCanaryStatus&, CanaryActions&);

// Rule 3: no Job, and another canary measured the same key: copy its result.
VariantStep ReuseEarlierMeasurement(const VariantFacts& f, api::ReplayCanaryStatus& status,
                                    CanaryActions& out) {
  if (f.JobExists()) return VariantStep::kNotApplicable;
  const Copyable copy = FindEarlier(f.input, f.name, f.rerun, f.key);
  if (copy.from == nullptr) return VariantStep::kNotApplicable;
  const EarlierMeasurement* earlier = copy.from;
  api::VariantStatus entry = earlier->variant;
  entry.name = f.name;
  entry.job.clear();
  // This canary's own earlier runs, then the copied runs before the copied
  // one: the key stays the one of the run the entry describes (RerunOf).
  entry.earlier_runs = f.earlier_runs;
  const std::vector<api::VariantRun>& theirs = earlier->variant.earlier_runs;
  entry.earlier_runs.insert(entry.earlier_runs.end(),
                            theirs.end() - static_cast<std::ptrdiff_t>(copy.runs_before),
                            theirs.end());
  if (entry.reused_from.empty()) entry.reused_from = earlier->canary;
  SetVariantStatus(status, entry);
  if (!status.arena_limit.has_value() && earlier->arena_limit.has_value() &&
      VariantAllocator(f.input.canary, f.name).name == api::Allocator::kGlibc) {
    status.arena_limit = earlier->arena_limit;
  }
  const std::string verdict = api::RecordedVerdictName(entry.verdict, entry.unknown_verdict);
  out.events.push_back({entry.verdict != Verdict::kFlat, "VariantReused",
                        "variant " + f.name + " (" + f.allocator + "): " + verdict +
                            ", measured by canary " + entry.reused_from +
                            " with identical inputs; not run again"});
  return VariantStep::kRecorded;
}

// Whether the variant's Job has ended: a result, an unreadable result, a
// failed Job, an OOM-killed or unstartable workload.
bool RunEnded(const VariantFacts& f) {
  const VariantObservation* obs = f.obs;
  return f.JobExists() && (obs->result.has_value() || obs->result_error.has_value() ||
                           obs->job_failure.has_value() || obs->workload_oom_killed ||
                           obs->workload_start_failure.has_value());
}

// The status entry of the run that ended, with its key, seed and earlier runs.
api::VariantStatus EndedRun(const VariantFacts& f) {
  api::VariantStatus entry = RecordedVariant(f.name, f.allocator, *f.obs);
  entry.measurement_key = f.key;
  entry.seed = f.seed;
  entry.earlier_runs = f.earlier_runs;
  return entry;
}

// Rule 4: the candidate's run ended Inconclusive with reruns left: it runs
// again with the next seed; the ended run is kept in earlierRuns.
VariantStep RerunInconclusiveCandidate(const VariantFacts& f, api::ReplayCanaryStatus& status,
                                       CanaryActions& out) {
  const int reruns = f.input.canary.spec.canary.inconclusive_reruns;
  if (!RunEnded(f) || f.name != kCandidate || f.rerun >= reruns) {
    return VariantStep::kNotApplicable;
  }
  const api::VariantStatus entry = EndedRun(f);
  if (entry.verdict != Verdict::kInconclusive) return VariantStep::kNotApplicable;
  out.delete_jobs.push_back(f.obs->job_name);
  api::VariantStatus next;
  next.name = f.name;
  next.allocator = f.allocator;
  next.phase = api::CanaryPhase::kPending;
  next.earlier_runs = f.earlier_runs;
  next.earlier_runs.push_back(static_cast<const api::VariantRun&>(entry));
  next.seed =
      static_cast<int64_t>(api::RerunSeed(f.input.canary.spec.canary.load.seed, f.rerun + 1));
  SetVariantStatus(status, next);
  out.create_job_for_variant = f.name;
  out.events.push_back({true, "VariantRerun",
                        "variant " + f.name + " (" + f.allocator +
                            "): " + VerdictName(Verdict::kInconclusive) + " — " + entry.message +
                            "; running it again with seed " + std::to_string(*next.seed) +
                            " (rerun " + std::to_string(f.rerun + 1) + " of " +
                            std::to_string(reruns) + ", canary.inconclusiveReruns)"});
  return VariantStep::kRunning;
}

// Rule 5: the run ended: its result is recorded and its Job deleted.
VariantStep RecordEndedRun(const VariantFacts& f, api::ReplayCanaryStatus& status,
                           CanaryActions& out) {
  if (!RunEnded(f)) return VariantStep::kNotApplicable;
  const api::VariantStatus entry = EndedRun(f);
  out.delete_jobs.push_back(f.obs->job_name);
  const std::string verdict = VerdictName(entry.verdict.value_or(Verdict::kFailed));
  SetVariantStatus(status, entry);
  out.events.push_back(
      {entry.verdict != Verdict::kFlat, "VariantFinished",
       "variant " + f.name + " (" + f.allocator + "): " + verdict + " — " + entry.message});
  return VariantStep::kRecorded;
}

// The entry of a variant that runs or starts.
api::VariantStatus RunEntry(const VariantFacts& f) {
  api::VariantStatus entry;
  entry.name = f.name;
  entry.allocator = f.allocator;
  entry.seed = f.seed;
  entry.earlier_runs = f.earlier_runs;
  return entry;
}

// Rule 6: its Job runs: Running, with a pod problem as its message.
VariantStep KeepRunning(const VariantFacts& f, api::ReplayCanaryStatus& status,
                        CanaryActions& /*out*/) {
  if (!f.JobExists()) return VariantStep::kNotApplicable;
  api::VariantStatus entry = RunEntry(f);
  entry.job = f.obs->job_name;
  entry.phase = api::CanaryPhase::kRunning;
  if (f.obs->pod_problem.has_value()) entry.message = *f.obs->pod_problem;
  SetVariantStatus(status, entry);
  return VariantStep::kRunning;
}

// Rule 7: no Job: Pending, and its Job is created.
VariantStep StartJob(const VariantFacts& f, api::ReplayCanaryStatus& status, CanaryActions& out) {
  api::VariantStatus entry = RunEntry(f);
  entry.phase = api::CanaryPhase::kPending;
  out.create_job_for_variant = f.name;
  const api::ReplayCanary& canary = f.input.canary;
  const std::string which = f.rerun == 0 ? ""
                                         : " again (rerun " + std::to_string(f.rerun) + ", seed " +
                                               std::to_string(f.seed) + ")";
  out.events.push_back({false, "VariantStarted",
                        "running variant " + f.name + " (" + f.allocator + ")" + which + " for " +
                            std::to_string(canary.spec.canary.duration.count()) + "s, up to " +
                            std::to_string(canary.spec.canary.max_duration.count()) +
                            "s while its verdict is unclear"});
  SetVariantStatus(status, entry);
  return VariantStep::kRunning;
}

// What a variant's books showed, for the overall explanation: which figure
// showed retention (in-use flat, retained climbing) or a leak (in-use
// climbing). Empty without books, or when they were too short or unclear.
std::string BooksSentence(const api::VariantStatus& v) {
  if (!v.books.has_value() || !v.books->reading.has_value()) return "";
  const api::BooksStatus& b = *v.books;
  auto slope = [](const std::optional<double>& s) {
    return s.has_value() ? " (" + memory::FormatSlope(*s) + ")" : std::string();
  };
  const std::string in_use = slope(b.in_use_slope_gib_per_hour);
  const std::string retained = slope(b.retained_slope_gib_per_hour);
  const std::string who = "variant " + v.name + " (" + v.allocator + ")'s allocator books ";
  switch (*b.reading) {
    case BooksReading::kRetention:
      return who + "show retention: in-use flat" + in_use + ", retained climbing" + retained;
    case BooksReading::kLeak:
      return who + "show a leak or a growing working set: in-use climbing" + in_use + ", retained" +
             retained;
    case BooksReading::kFlat:
      return who + "are flat: in-use" + in_use + ", retained" + retained;
    case BooksReading::kUnclear:
    case BooksReading::kTooFewMinutes:
      break;
  }
  return "";
}

// Rule 8: every variant has a result: classify them together.
void ClassifyVariants(const CanaryInput& input, const std::vector<std::string>& order,
                      api::ReplayCanaryStatus& status, CanaryActions& out) {
  const api::ReplayCanary& canary = input.canary;
  std::vector<memory::NamedVerdict> verdicts;
  std::string unreadable;
  for (const std::string& name : order) {
    const api::VariantStatus& v = *status.FindVariant(name);
    // A recorded verdict allocguard does not write (the status was edited,
    // or written by another version) counts as Failed, and says so.
    if (!v.unknown_verdict.empty() || !v.verdict.has_value()) {
      unreadable += "; variant " + name + " has a recorded verdict \"" + v.unknown_verdict +
                    "\" that allocguard does not write";
    }
    const Verdict verdict =
        v.unknown_verdict.empty() ? v.verdict.value_or(Verdict::kFailed) : Verdict::kFailed;
    verdicts.push_back({name, v.allocator, verdict});
  }
  memory::OverallVerdict overall = memory::ClassifyVariants(verdicts);
  if (overall.verdict == Verdict::kInconclusive) {
    overall.explanation += "; " + InconclusiveAdvice(canary, *status.FindVariant(kCandidate));
  }
  overall.explanation += unreadable;
  for (const std::string& name : order) {
    const api::VariantStatus& v = *status.FindVariant(name);
    if (!v.start_failure.empty()) {
      overall.explanation +=
          "; variant " + name + " (" + v.allocator + ") did not start: " + v.start_failure;
    }
  }
  // The books explain; the verdict above is the judge's and the
  // classification's alone. The candidate's always, another variant's when
  // they show retention or a leak.
  for (const std::string& name : order) {
    const api::VariantStatus& v = *status.FindVariant(name);
    const bool telling = v.books.has_value() && (v.books->reading == BooksReading::kRetention ||
                                                 v.books->reading == BooksReading::kLeak);
    if (name != kCandidate && !telling) continue;
    if (std::string sentence = BooksSentence(v); !sentence.empty()) {
      overall.explanation += "; " + sentence;
    }
  }
  const api::VariantStatus& candidate = *status.FindVariant(kCandidate);
  status.phase = api::CanaryPhase::kCompleted;
  status.verdict = overall.verdict;
  status.unknown_verdict.clear();
  status.explanation = overall.explanation;
  if (candidate.floor_slope_gib_per_hour.has_value()) {
    status.floor_slope = memory::FormatSlope(*candidate.floor_slope_gib_per_hour);
  }
  if (!overall.flat_variants.empty()) status.flat_variant = overall.flat_variants.front();
  status.completion_time = input.now_rfc3339;
  out.finished = true;
  out.events.push_back({overall.verdict != Verdict::kFlat, "CanaryFinished",
                        VerdictName(overall.verdict) + (": " + overall.explanation)});
  // A bake-off ranks the variants beside the verdict; it never changes it.
  if (canary.spec.canary.bake_off) {
    status.recommendation = RecommendBakeOff(canary, status);
    out.events.push_back({false, "BakeOffRanked", status.recommendation->message});
  }
}

}  // namespace

api::RecommendationStatus RecommendBakeOff(const api::ReplayCanary& canary,
                                           const api::ReplayCanaryStatus& status) {
  replay::ReplaySummary summary;
  for (const std::string& name : VariantOrder(canary)) {
    const api::VariantStatus* v = status.FindVariant(name);
    if (v == nullptr) continue;
    replay::VariantResult r;
    r.variant = name;
    r.allocator = v->allocator;
    for (const auto& [key, value] :
         admission::AllocatorTunableEnv(VariantAllocator(canary, name))) {
      if (!r.env.empty()) r.env += ' ';
      r.env.append(key).append("=").append(value);
    }
    r.verdict.verdict =
        v->unknown_verdict.empty() ? v->verdict.value_or(Verdict::kFailed) : Verdict::kFailed;
    if (v->floor_level_mib.has_value()) {
      r.floor_level_bytes = *v->floor_level_mib * kBytesPerMiB;
    } else if (!v->floors_mib.empty()) {
      // Recorded before the floor level was: the median of the (possibly
      // thinned) floors.
      std::vector<double> floors = v->floors_mib;
      std::sort(floors.begin(), floors.end());
      const size_t n = floors.size();
      r.floor_level_bytes =
          (n % 2 == 1 ? floors[n / 2] : (floors[n / 2 - 1] + floors[n / 2]) / 2) * kBytesPerMiB;
    }
    r.cpu_seconds = v->cpu_seconds.value_or(0);
    r.requests_completed = v->requests.value_or(0);
    r.p99_ms = v->p99_ms;
    summary.variants.push_back(std::move(r));
  }
  api::RecommendationStatus out;
  Result<replay::BakeOff> ranked = replay::RankBakeOff(summary);
  if (!ranked.ok()) {
    out.message = ranked.status().message();
    return out;
  }
  const replay::BakeOff& bake_off = *ranked;
  out.current = bake_off.current;
  out.message = bake_off.recommendation;
  out.policy_snippet = bake_off.policy_snippet;
  if (bake_off.recommended)
    out.recommended = bake_off.ranked[*bake_off.recommended].result->variant;
  auto percent = [](const std::optional<double>& fraction) -> std::optional<double> {
    if (!fraction) return std::nullopt;
    return std::round(*fraction * 1000.0) / 10.0;
  };
  for (const replay::BakeOffEntry& e : bake_off.ranked) {
    const replay::VariantResult& v = *e.result;
    api::BakeOffRowStatus row{.rank = e.rank, .variant = v.variant, .allocator = v.allocator};
    row.verdict = v.verdict.verdict;
    if (v.floor_level_bytes > 0) row.floor_mib = v.floor_level_bytes / kBytesPerMiB;
    row.cpu_ms_per_request = e.cpu_ms_per_request;
    row.p99_ms = v.p99_ms;
    row.floor_change_percent = percent(e.floor_change);
    row.cpu_change_percent = percent(e.cpu_change);
    row.p99_change_percent = percent(e.p99_change);
    if (v.variant != bake_off.current) row.costs = replay::FormatBakeOffCosts(e);
    out.ranked.push_back(std::move(row));
  }
  return out;
}

CanaryActions DecideCanary(const CanaryInput& input) {
  CanaryActions out;
  api::ReplayCanaryStatus status = input.status;
  const api::ReplayCanary& canary = input.canary;

  // Rule 1: finished: only clean up Jobs a crash may have left behind.
  if (Ended(status.phase)) {
    for (const VariantObservation& o : input.observations) {
      if (o.job_exists) out.delete_jobs.push_back(o.job_name);
    }
    out.status = status;
    out.finished = true;
    return out;
  }

  if (status.start_time.empty()) status.start_time = input.now_rfc3339;
  status.observed_generation = canary.generation;

  // Rules 3 to 7 per variant, in the order of the header's list; the first
  // that applies decides the variant.
  static constexpr VariantRule kVariantRules[] = {
      ReuseEarlierMeasurement, RerunInconclusiveCandidate, RecordEndedRun, KeepRunning, StartJob};
  const std::vector<std::string> order = VariantOrder(canary);
  bool waiting = false;  // a variant runs: later ones wait
  for (const std::string& name : order) {
    const api::VariantStatus* recorded = status.FindVariant(name);
    const VariantObservation* obs = FindObservation(input, name);
    // Rule 2: a recorded variant's leftover Job is deleted, also behind a
    // running variant.
    if (IsRecorded(recorded)) {
      if (obs != nullptr && obs->job_exists) out.delete_jobs.push_back(obs->job_name);
      continue;
    }
    if (waiting) break;
    const VariantFacts facts = FactsOf(input, name, recorded, obs);
    VariantStep step = VariantStep::kNotApplicable;
    for (VariantRule rule : kVariantRules) {
      step = rule(facts, status, out);
      if (step != VariantStep::kNotApplicable) break;
    }
    if (step == VariantStep::kRunning) {
      status.phase = api::CanaryPhase::kRunning;
      waiting = true;
    }
  }
  if (!waiting) ClassifyVariants(input, order, status, out);

  SetCanaryConditions(status, canary.generation, input.now_rfc3339);
  out.status_changed = status != input.status;
  out.status = std::move(status);
  return out;
}

void SetCanaryConditions(api::ReplayCanaryStatus& status, int64_t generation,
                         const std::string& now_rfc3339) {
  const std::optional<api::CanaryPhase> phase = status.phase;
  const std::string verdict = api::RecordedVerdictName(status.verdict, status.unknown_verdict);
  const std::string& explanation = status.explanation;
  std::vector<api::Condition>& conditions = status.conditions;
  if (phase == api::CanaryPhase::kFailed ||
      (phase == api::CanaryPhase::kCompleted && VerdictFromName(verdict) == Verdict::kFailed)) {
    const std::string failed = api::CanaryPhaseName(api::CanaryPhase::kFailed);
    api::SetCondition(conditions, "Ready", "False", failed, explanation, generation, now_rfc3339);
    api::SetCondition(conditions, "Reconciling", "False", failed, "finished without a verdict",
                      generation, now_rfc3339);
    api::SetCondition(conditions, "Stalled", "True", failed, explanation, generation, now_rfc3339);
  } else if (phase == api::CanaryPhase::kCompleted) {
    const std::string completed = api::CanaryPhaseName(api::CanaryPhase::kCompleted);
    api::SetCondition(conditions, "Ready", "True", verdict.empty() ? completed : verdict,
                      explanation, generation, now_rfc3339);
    api::SetCondition(conditions, "Reconciling", "False", completed, "the verdict is in",
                      generation, now_rfc3339);
    api::SetCondition(conditions, "Stalled", "False", completed, "the verdict is in", generation,
                      now_rfc3339);
  } else {
    const std::string reason = api::CanaryPhaseName(phase.value_or(api::CanaryPhase::kPending));
    std::string running;
    for (const api::VariantStatus& v : status.variants) {
      if (v.phase == api::CanaryPhase::kRunning || v.phase == api::CanaryPhase::kPending) {
        running = v.name;
        break;
      }
    }
    const std::string message =
        phase == api::CanaryPhase::kPending && !explanation.empty()
            ? explanation
            : (running.empty() ? "no verdict yet" : "running variant " + running);
    api::SetCondition(conditions, "Ready", "False", reason, message, generation, now_rfc3339);
    api::SetCondition(conditions, "Reconciling", "True", reason, message, generation, now_rfc3339);
    api::SetCondition(conditions, "Stalled", "False", reason, message, generation, now_rfc3339);
  }
}

namespace {

// How a built Job reproduces production's glibc arena limit, as recorded in
// status.arenaLimit.
api::ArenaLimitStatus ArenaStatus(const canary::ArenaLimit& limit,
                                  std::optional<int> production_cpus) {
  api::ArenaLimitStatus out;
  out.source = canary::ArenaLimitSourceName(limit.source);
  out.production_cpus = production_cpus;
  if (limit.source == canary::ArenaLimitSource::kArenaMaxEnv) {
    try {
      out.value = std::stoi(limit.value);
    } catch (const std::exception&) {
      // Not a number: leave the value out rather than guess.
    }
  } else if (limit.source == canary::ArenaLimitSource::kNodeSelector &&
             production_cpus.has_value()) {
    out.value = 8 * *production_cpus;  // glibc's default on such a node
  }
  return out;
}

// The explanation of a canary that waits for a slot.
std::string QueueNote(const CanarySlotAnswer& slot, const std::string& ns) {
  std::string why = "queued: position " + std::to_string(slot.position) + " of " +
                    std::to_string(slot.waiting) + " waiting; " + std::to_string(slot.running) +
                    " canaries are running, the limit is " + std::to_string(slot.limit) +
                    " (--max-concurrent-canaries)";
  if (slot.namespace_limit > 0) {
    why += ", " + std::to_string(slot.running_in_namespace) + " in namespace " + ns +
           ", whose limit is " + std::to_string(slot.namespace_limit) +
           " (--max-concurrent-canaries-per-namespace)";
  }
  return why;
}

// A queue note without the queue's length ("of W waiting"): what a
// canary's note must show anew. The length alone changes with every canary
// that joins or leaves the queue anywhere, and rewriting every waiting
// canary's status for it would cost a write per waiting canary per arrival.
std::string NoteWithoutQueueLength(const std::string& note) {
  const size_t of = note.find(" of ");
  const size_t waiting = note.find(" waiting;");
  if (of == std::string::npos || waiting == std::string::npos || waiting < of) return note;
  return note.substr(0, of) + note.substr(waiting + std::string(" waiting").size());
}

// Rule 1: a canary that waits for a slot writes only its queue note onto its
// current status, when its place in the queue or the slots it waits for
// changed (not for the queue's length alone).
CanaryActions QueueCanary(const CanaryInput& input, const CanarySlotAnswer& slot) {
  CanaryActions out;
  out.queued = true;
  out.status = input.status;
  const std::string why = QueueNote(slot, input.canary.ns);
  api::ReplayCanaryStatus& status = out.status;
  if (status.phase != api::CanaryPhase::kPending ||
      NoteWithoutQueueLength(status.explanation) != NoteWithoutQueueLength(why) ||
      status.queue_position != slot.position) {
    status.phase = api::CanaryPhase::kPending;
    status.explanation = why;
    status.queue_position = slot.position;
    SetCanaryConditions(status, input.canary.generation, input.now_rfc3339);
    out.status_changed = true;
  }
  return out;
}

// Rule 2: a canary that runs without a verdict drops its queue note.
void DropQueueNote(CanaryActions& actions) {
  api::ReplayCanaryStatus& status = actions.status;
  const bool running = status.phase == api::CanaryPhase::kRunning;
  if (running && !status.explanation.empty() && !status.verdict.has_value()) {
    status.explanation.clear();
    actions.status_changed = true;
  }
  if (running && status.queue_position.has_value()) {
    status.queue_position.reset();
    actions.status_changed = true;
  }
}

// Rule 3: a Job that cannot be built fails its variant.
void FailUnbuildableVariant(CanaryActions& actions, const std::string& variant,
                            const std::string& error) {
  if (api::VariantStatus* v = actions.status.FindVariant(variant)) {
    v->phase = api::CanaryPhase::kFailed;
    v->verdict = Verdict::kFailed;
    v->unknown_verdict.clear();
    v->message = "cannot build the canary Job: " + error;
  }
  actions.status_changed = true;
  actions.create_job_for_variant.reset();
  actions.start_events.push_back({true, "CanaryJobInvalid", error});
}

// Rule 4: a built Job's injection conflicts are reported, and the arena limit
// it reproduces is recorded; a reproduced limit wins over one that ran on
// whatever node it got.
void RecordBuiltJob(CanaryActions& actions, const CanaryJobBuild& job,
                    std::optional<int> production_cpus) {
  for (const std::string& conflict : job.conflicts) {
    actions.start_events.push_back({true, "InjectionConflict", conflict});
  }
  const std::optional<api::ArenaLimitStatus>& recorded = actions.status.arena_limit;
  if (!recorded.has_value() || (recorded->source == "CanaryNode" &&
                                job.arena_limit.source != canary::ArenaLimitSource::kCanaryNode)) {
    actions.status.arena_limit = ArenaStatus(job.arena_limit, production_cpus);
    actions.status_changed = true;
  }
}

}  // namespace

std::optional<api::ReplayCanaryStatus> DecideInvalidCanary(const api::ReplayCanaryStatus& current,
                                                           int64_t generation,
                                                           const std::string& error,
                                                           const std::string& now_rfc3339) {
  if (current.phase == api::CanaryPhase::kFailed) return std::nullopt;
  api::ReplayCanaryStatus status = current;
  status.phase = api::CanaryPhase::kFailed;
  status.verdict = Verdict::kFailed;
  status.unknown_verdict.clear();
  status.explanation = "invalid ReplayCanary: " + error;
  status.completion_time = now_rfc3339;
  SetCanaryConditions(status, generation, now_rfc3339);
  api::SetCondition(status.conditions, "Ready", "False", "InvalidSpec", error, generation,
                    now_rfc3339);
  api::SetCondition(status.conditions, "Stalled", "True", "InvalidSpec", error, generation,
                    now_rfc3339);
  return status;
}

bool NeedsCanarySlot(const CanaryInput& input, const CanaryActions& actions) {
  return actions.create_job_for_variant.has_value() &&
         input.status.phase != api::CanaryPhase::kRunning;
}

bool WaitsForSlot(const CanaryStart& start) { return start.slot.has_value() && !start.slot->start; }

CanaryActions DecideCanaryStart(const CanaryInput& input, CanaryActions actions,
                                const CanaryStart& start) {
  if (WaitsForSlot(start)) return QueueCanary(input, *start.slot);
  DropQueueNote(actions);
  if (actions.create_job_for_variant.has_value() && start.job.has_value()) {
    if (start.job->error.has_value()) {
      FailUnbuildableVariant(actions, *actions.create_job_for_variant, *start.job->error);
    } else {
      RecordBuiltJob(actions, *start.job, input.canary.spec.canary.production_cpus);
    }
  }
  return actions;
}

}  // namespace allocguard::controllers
