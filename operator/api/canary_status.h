#pragma once

// The status of a ReplayCanary as C++ values, and the kstatus conditions the
// operator writes on its objects.
//
// The operator reads a canary's status back from the API server on every
// pass, and anyone with write access to `replaycanaries/status` (or an older
// CRD without the schema's enums) may have put anything there. So the status
// is read once, at the edge, by ParseReplayCanaryStatus, which never throws:
// a field of the wrong type reads as absent and is reported with its path
// ("status.variants[1].phase: must be a string, got 7"); a verdict name
// allocguard does not write reads as Verdict::kFailed, which can only hold.
// Everything after the edge (the canary decision, the gate, the rollout and
// policy decisions, the metrics) works on these values, and
// ReplayCanaryStatusToJson writes only what the CRD accepts: empty strings,
// absent numbers and non-finite numbers are left out rather than written as
// "" or NaN (an empty `date-time` once made the API server refuse a whole
// status write).
//
// JSON field names are given beside each member (crds/
// allocguard.io_replaycanaries.yaml has the schema).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/api/types.h"
#include "operator/common/books_reading.h"
#include "operator/common/verdict.h"

namespace allocguard::api {

// One kstatus condition (metav1.Condition).
struct Condition {
  std::string type;                            // Ready | Reconciling | Stalled | ...
  std::string status;                          // True | False | Unknown
  std::string reason;                          // CamelCase
  std::string message;                         // for a person
  std::optional<int64_t> observed_generation;  // observedGeneration
  std::string last_transition_time;            // lastTransitionTime, RFC 3339

  bool operator==(const Condition&) const = default;
};

// Sets the condition of `type` (adding it when absent). Its
// lastTransitionTime stays what it was while `status` does not change, and
// becomes `now_rfc3339` when it does.
void SetCondition(std::vector<Condition>& conditions, const std::string& type,
                  const std::string& status, const std::string& reason, const std::string& message,
                  int64_t generation, const std::string& now_rfc3339);

// The condition of `type`, or nullptr.
const Condition* FindCondition(const std::vector<Condition>& conditions, const std::string& type);

// Conditions read from a JSON array (entries that are not objects are
// skipped; fields of the wrong type read as empty, reported in `problems`
// under `path`), and written back to one.
std::vector<Condition> ParseConditions(const nlohmann::json& conditions, const std::string& path,
                                       std::vector<std::string>* problems = nullptr);
nlohmann::json ConditionsToJson(const std::vector<Condition>& conditions);

// status.arenaLimit: how production's glibc arena limit was reproduced.
struct ArenaLimitStatus {
  std::string source;                      // NodeSelector | ArenaMaxEnv | CanaryNode
  std::optional<int64_t> value;            // the arena limit in effect, when known
  std::optional<int64_t> production_cpus;  // productionCPUs

  bool operator==(const ArenaLimitStatus&) const = default;
};

// The allocator's books over one run (docs/allocator-books.md): what the
// stats agent's in-use and retained bytes showed beside the floors. The
// reading explains the verdict; it never changes it.
struct BooksStatus {
  // An unknown name is reported and reads as absent, kept in unknown_reading
  // (and written back as it was).
  std::optional<BooksReading> reading;
  std::string unknown_reading;
  std::vector<double> in_use_floors_mib;              // inUseFloorsMiB
  std::vector<double> retained_floors_mib;            // retainedFloorsMiB
  std::optional<double> in_use_slope_gib_per_hour;    // inUseSlopeGiBPerHour
  std::optional<double> retained_slope_gib_per_hour;  // retainedSlopeGiBPerHour

  bool operator==(const BooksStatus&) const = default;
};

// What one run of a variant measured: the members a status.variants entry
// shares with each of its earlierRuns (an Inconclusive candidate is run
// again with the next load seed; see CanarySpec::inconclusive_reruns).
struct VariantRun {
  std::string job;              // the Job that ran it, while it exists or was used
  std::optional<int64_t> seed;  // its load seed (api::RerunSeed)
  // Its verdict. A name allocguard does not write reads as kFailed and is
  // kept in unknown_verdict (and written back as it was).
  std::optional<Verdict> verdict;
  std::string unknown_verdict;
  std::vector<double> floors_mib;                  // floorsMiB
  std::optional<double> floor_slope_gib_per_hour;  // floorSlopeGiBPerHour
  std::optional<double> slope_low_gib_per_hour;    // slopeLowGiBPerHour
  std::optional<double> slope_high_gib_per_hour;   // slopeHighGiBPerHour
  std::optional<int64_t> requests;
  std::optional<int64_t> late;
  std::string message;
  std::optional<BooksStatus> books;  // absent: the run recorded no books

  bool operator==(const VariantRun&) const = default;
};

// One entry of status.variants: its latest run (the VariantRun members) and
// what only the latest run records.
struct VariantStatus : VariantRun {
  std::string name;       // "candidate" or a spec.canary.variants name
  std::string allocator;  // "glibc", "jemalloc", ...
  std::optional<CanaryPhase> phase;
  std::optional<double> peak_mib;               // peakMiB
  std::optional<double> recommended_limit_mib;  // recommendedLimitMiB
  // What a bake-off ranks by: the median per-minute floor, the workload's
  // CPU seconds over the run and the p99 latency of its responses.
  std::optional<double> floor_level_mib;  // floorLevelMiB
  std::optional<double> cpu_seconds;      // cpuSeconds
  std::optional<double> p99_ms;           // p99Milliseconds
  std::optional<int64_t> errors;
  bool oom_killed = false;            // oomKilled
  std::optional<int64_t> oom_minute;  // oomMinute
  std::string start_failure;          // startFailure: the loader's words
  std::string measurement_key;        // measurementKey (MeasurementKey)
  std::string reused_from;            // reusedFrom: the canary whose run this copies
  // earlierRuns: the runs before this one, oldest first. Their number is the
  // rerun this entry describes (0: the first run).
  std::vector<VariantRun> earlier_runs;

  bool operator==(const VariantStatus&) const = default;
};

// One ranked row of status.recommendation (replay::BakeOffEntry): a variant
// and its costs against the candidate, in percent.
struct BakeOffRowStatus {
  int64_t rank = 0;       // 1 = best
  std::string variant;    // a status.variants name
  std::string allocator;  // "glibc", "jemalloc", ...
  // As in VariantStatus, an unknown name reads as kFailed and is kept.
  std::optional<Verdict> verdict;
  std::string unknown_verdict;
  std::optional<double> floor_mib;             // floorMiB: the floor level
  std::optional<double> cpu_ms_per_request;    // cpuMsPerRequest
  std::optional<double> p99_ms;                // p99Milliseconds
  std::optional<double> floor_change_percent;  // floorChangePercent: -62 = 62 % lower
  std::optional<double> cpu_change_percent;    // cpuChangePercent (per request)
  std::optional<double> p99_change_percent;    // p99ChangePercent
  std::string costs;  // "floor -62 %, CPU +18 %, p99 +9 %" (empty for the candidate)

  bool operator==(const BakeOffRowStatus&) const = default;
};

// status.recommendation of a bake-off canary (spec.canary.bakeOff): the
// ranking of replay::RankBakeOff over the recorded variants, with costs
// against the candidate (the policy's allocator). It advises; the verdict and
// the hold are the candidate's.
struct RecommendationStatus {
  std::string current;         // the variant costs are given against: "candidate"
  std::string recommended;     // the first-ranked Flat variant; empty: none
  std::string message;         // what to do and what it costs
  std::string policy_snippet;  // policySnippet: spec.allocator YAML for the recommendation
  std::vector<BakeOffRowStatus> ranked;

  bool operator==(const RecommendationStatus&) const = default;
};

// A ReplayCanary's .status.
struct ReplayCanaryStatus {
  std::optional<int64_t> observed_generation;  // observedGeneration
  std::optional<CanaryPhase> phase;            // absent: not started
  // The overall verdict; as in VariantStatus, an unknown name reads as
  // kFailed and is kept in unknown_verdict.
  std::optional<Verdict> verdict;
  std::string unknown_verdict;
  std::string explanation;
  std::string floor_slope;                      // floorSlope: "+2.40 GiB/h" (memory::FormatSlope)
  std::string flat_variant;                     // flatVariant
  std::optional<int64_t> queue_position;        // queuePosition, while queued
  std::string start_time;                       // startTime, RFC 3339
  std::string completion_time;                  // completionTime, RFC 3339
  std::optional<ArenaLimitStatus> arena_limit;  // arenaLimit
  std::vector<Condition> conditions;
  std::vector<VariantStatus> variants;
  std::optional<RecommendationStatus> recommendation;  // bake-off canaries, once Completed

  // The variant entry called `name`, or nullptr.
  const VariantStatus* FindVariant(const std::string& name) const;
  VariantStatus* FindVariant(const std::string& name);

  bool operator==(const ReplayCanaryStatus&) const = default;
};

// The verdict name to write: unknown_verdict when it is set, else the
// verdict's name, else "".
std::string RecordedVerdictName(const std::optional<Verdict>& verdict,
                                const std::string& unknown_verdict);

// Reads a ReplayCanary's .status (null or a non-object reads as an empty
// status). Never throws. What it could not read is left at its default and
// described in `problems`, each naming the field under "status.".
ReplayCanaryStatus ParseReplayCanaryStatus(const nlohmann::json& status,
                                           std::vector<std::string>* problems = nullptr);

// The status of a ReplayCanary object: ParseReplayCanaryStatus of its
// "status" member.
ReplayCanaryStatus CanaryStatusOf(const nlohmann::json& canary,
                                  std::vector<std::string>* problems = nullptr);

// Only the phase of a ReplayCanary object (CanaryStatusOf(canary).phase,
// without reading the rest): for loops over every cached canary.
std::optional<CanaryPhase> CanaryPhaseOf(const nlohmann::json& canary);

// The JSON to write as .status; see the top of this file for what is left
// out. ParseReplayCanaryStatus(ReplayCanaryStatusToJson(s)) == s for every
// status whose numbers are finite.
nlohmann::json ReplayCanaryStatusToJson(const ReplayCanaryStatus& status);
nlohmann::json VariantStatusToJson(const VariantStatus& variant);

}  // namespace allocguard::api
