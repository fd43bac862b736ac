#include "controllers/canary_decision.h"

#include <gtest/gtest.h>

#include <optional>

#include "operator/admission/deployment_gate.h"
#include "operator/api/canary_status.h"
#include "operator/api/names.h"

namespace allocguard::controllers {
namespace {

using nlohmann::json;

api::ReplayCanary TwoVariantCanary() {
  api::ReplayCanary c;
  c.ns = "shop";
  c.name = "web-abc";
  c.generation = 1;
  c.spec.candidate_allocator.name = api::Allocator::kGlibc;
  api::VariantSpec jemalloc;
  jemalloc.name = "jemalloc";
  jemalloc.allocator.name = api::Allocator::kJemalloc;
  c.spec.canary.variants = {jemalloc};
  c.spec.canary.duration = std::chrono::seconds(900);
  return c;
}

replay::CanaryResult Result(const std::string& verdict, double slope) {
  replay::CanaryResult r;
  r.verdict = VerdictFromName(verdict).value();
  r.floors_mib = {300, 310, 320};
  r.slope_gib_per_hour = slope;
  r.slope_low = slope - 0.1;
  r.slope_high = slope + 0.1;
  r.peak_mib = 1000;
  r.requests = 1234;
  r.minutes = 15;
  r.message = verdict + " for the test";
  return r;
}

VariantObservation Running(const std::string& variant) {
  VariantObservation o;
  o.variant = variant;
  o.job_exists = true;
  o.job_name = "web-abc-" + variant;
  return o;
}

VariantObservation Finished(const std::string& variant, const std::string& verdict, double slope) {
  VariantObservation o = Running(variant);
  o.result = Result(verdict, slope);
  return o;
}

// The status a decision wrote, as the API server stores it.
json S(const api::ReplayCanaryStatus& status) { return api::ReplayCanaryStatusToJson(status); }

// A status as the reconciler reads it back from the API server.
api::ReplayCanaryStatus P(const json& status) { return api::ParseReplayCanaryStatus(status); }

// The status.variants entry called `name`, as written.
std::optional<json> Variant(const api::ReplayCanaryStatus& status, const std::string& name) {
  const json written = S(status);
  for (const json& v : written.value("variants", json::array())) {
    if (v["name"] == name) return v;
  }
  return std::nullopt;
}

TEST(DecideCanaryTest, NewCanaryStartsOnlyTheCandidate) {
  CanaryInput in{TwoVariantCanary(), {}, {}, "2026-11-29T10:00:00Z"};
  CanaryActions a = DecideCanary(in);
  ASSERT_TRUE(a.create_job_for_variant.has_value());
  EXPECT_EQ(*a.create_job_for_variant, "candidate");
  EXPECT_EQ(S(a.status)["phase"], "Running");
  EXPECT_EQ(S(a.status)["startTime"], "2026-11-29T10:00:00Z");
  EXPECT_TRUE(a.status_changed);
  EXPECT_FALSE(a.finished);
  EXPECT_FALSE(Variant(a.status, "jemalloc").has_value()) << "the second variant waits its turn";
}

TEST(DecideCanaryTest, RunningJobIsNotCreatedAgain) {
  CanaryInput in{TwoVariantCanary(), {}, {Running("candidate")}, "t"};
  CanaryActions a = DecideCanary(in);
  EXPECT_FALSE(a.create_job_for_variant.has_value());
  EXPECT_TRUE(a.delete_jobs.empty());
  EXPECT_EQ((*Variant(a.status, "candidate"))["phase"], "Running");
}

TEST(DecideCanaryTest, FinishedCandidateIsRecordedDeletedAndNextVariantStarts) {
  CanaryInput in{TwoVariantCanary(), {}, {Finished("candidate", "Ratchet", 2.4)}, "t"};
  CanaryActions a = DecideCanary(in);
  std::optional<json> c = Variant(a.status, "candidate");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ((*c)["verdict"], "Ratchet");
  EXPECT_EQ((*c)["phase"], "Completed");
  EXPECT_DOUBLE_EQ((*c)["floorSlopeGiBPerHour"].get<double>(), 2.4);
  EXPECT_EQ((*c)["floorsMiB"].size(), 3u);
  EXPECT_EQ((*c)["requests"], 1234);
  EXPECT_EQ(a.delete_jobs, std::vector<std::string>{"web-abc-candidate"});
  ASSERT_TRUE(a.create_job_for_variant.has_value());
  EXPECT_EQ(*a.create_job_for_variant, "jemalloc");
  EXPECT_FALSE(a.finished);
}

TEST(DecideCanaryTest, RecordedResultSurvivesTheJobsDeletionAndARestart) {
  // First pass records the candidate; the Job is gone afterwards. A second
  // pass (e.g. after an operator restart) sees no Job for the candidate and
  // must neither re-run it nor lose its result.
  CanaryInput first{TwoVariantCanary(), {}, {Finished("candidate", "Ratchet", 2.4)}, "t"};
  CanaryActions a = DecideCanary(first);
  CanaryInput second{TwoVariantCanary(), a.status, {Running("jemalloc")}, "t2"};
  CanaryActions b = DecideCanary(second);
  EXPECT_FALSE(b.create_job_for_variant.has_value());
  EXPECT_EQ((*Variant(b.status, "candidate"))["verdict"], "Ratchet");
  EXPECT_EQ((*Variant(b.status, "jemalloc"))["phase"], "Running");
  CanaryInput third{TwoVariantCanary(), b.status, {Running("jemalloc")}, "t3"};
  EXPECT_FALSE(DecideCanary(third).status_changed) << "nothing new happened";
}

TEST(DecideCanaryTest, RatchetingCandidateWithFlatJemallocIsAllocatorRetention) {
  CanaryInput first{TwoVariantCanary(), {}, {Finished("candidate", "Ratchet", 2.4)}, "t"};
  CanaryActions a = DecideCanary(first);
  CanaryInput second{
      TwoVariantCanary(), a.status, {Finished("jemalloc", "Flat", 0.05)}, "2026-11-29T10:30:00Z"};
  CanaryActions b = DecideCanary(second);
  EXPECT_TRUE(b.finished);
  EXPECT_EQ(S(b.status)["phase"], "Completed");
  EXPECT_EQ(S(b.status)["verdict"], "AllocatorRetention");
  EXPECT_EQ(S(b.status)["flatVariant"], "jemalloc");
  EXPECT_EQ(S(b.status)["floorSlope"], "+2.40 GiB/h");
  EXPECT_EQ(S(b.status)["completionTime"], "2026-11-29T10:30:00Z");
  EXPECT_EQ(b.delete_jobs, std::vector<std::string>{"web-abc-jemalloc"});
  ASSERT_FALSE(b.events.empty());
  EXPECT_TRUE(b.events.back().warning);
}

// A bake-off canary: glibc candidate and the variants a policy's matrix
// would give it (here two, to keep the table short).
api::ReplayCanary BakeOffCanary() {
  api::ReplayCanary c = TwoVariantCanary();
  c.spec.canary.bake_off = true;
  api::VariantSpec arena2{.name = "glibc-arena2",
                          .allocator = {.name = api::Allocator::kGlibc, .glibc_arena_max = 2}};
  c.spec.canary.variants.push_back(arena2);
  return c;
}

VariantObservation Measured(const std::string& variant, const std::string& verdict, double floor,
                            double cpu, double p99) {
  VariantObservation o = Finished(variant, verdict, verdict == "Flat" ? 0.05 : 2.4);
  o.result->floor_level_mib = floor;
  o.result->cpu_seconds = cpu;
  o.result->p99_ms = p99;
  return o;
}

// Runs `canary` to its end, one variant after the other.
CanaryActions RunToTheEnd(const api::ReplayCanary& canary,
                          const std::vector<VariantObservation>& results) {
  api::ReplayCanaryStatus status;
  CanaryActions a;
  for (const VariantObservation& o : results) {
    a = DecideCanary({canary, status, {o}, "2026-11-29T10:30:00Z"});
    status = a.status;
  }
  return a;
}

// The recommendation ranks by the bake-off's rules with costs against the
// candidate; the verdict is the candidate's, as without the bake-off.
TEST(DecideCanaryTest, ABakeOffRecommendsWithCostsAndKeepsTheCandidatesVerdict) {
  CanaryActions a = RunToTheEnd(BakeOffCanary(), {Measured("candidate", "Ratchet", 310, 60, 40),
                                                  Measured("jemalloc", "Flat", 150, 80, 44),
                                                  Measured("glibc-arena2", "Flat", 200, 62, 41)});
  ASSERT_TRUE(a.finished);
  EXPECT_EQ(S(a.status)["verdict"], "AllocatorRetention");
  EXPECT_EQ((*Variant(a.status, "jemalloc"))["cpuSeconds"], 80);
  EXPECT_EQ((*Variant(a.status, "jemalloc"))["p99Milliseconds"], 44);
  EXPECT_EQ((*Variant(a.status, "jemalloc"))["floorLevelMiB"], 150);
  const json rec = S(a.status)["recommendation"];
  EXPECT_EQ(rec["current"], "candidate");
  EXPECT_EQ(rec["recommended"], "jemalloc");
  ASSERT_EQ(rec["ranked"].size(), 3u);
  EXPECT_EQ(rec["ranked"][0]["variant"], "jemalloc");
  EXPECT_EQ(rec["ranked"][0]["floorChangePercent"], -51.6);
  EXPECT_EQ(rec["ranked"][0]["cpuChangePercent"], 33.3);
  EXPECT_EQ(rec["ranked"][0]["p99ChangePercent"], 10);
  EXPECT_EQ(rec["ranked"][0]["costs"], "floor -52 %, CPU +33 %, p99 +10 %");
  EXPECT_EQ(rec["ranked"][1]["variant"], "glibc-arena2");
  EXPECT_EQ(rec["ranked"][2]["variant"], "candidate");
  EXPECT_EQ(rec["ranked"][2]["verdict"], "Ratchet");
  EXPECT_FALSE(rec["ranked"][2].contains("costs"));
  EXPECT_EQ(rec["policySnippet"], "allocator:\n  name: jemalloc\n");
  EXPECT_NE(rec["message"].get<std::string>().find("Switch from candidate to jemalloc"),
            std::string::npos)
      << rec["message"];
  ASSERT_FALSE(a.events.empty());
  EXPECT_EQ(a.events.back().reason, "BakeOffRanked");
  EXPECT_EQ(a.events.back().note, rec["message"]);
}

// A Flat candidate releases the hold even when another variant ranks above
// it: the recommendation advises, it never holds.
TEST(DecideCanaryTest, AFlatCandidateStaysFlatWhenTheBakeOffPrefersAnother) {
  CanaryActions a =
      RunToTheEnd(BakeOffCanary(), {Measured("candidate", "Flat", 310, 60, 40),
                                    Measured("jemalloc", "Flat", 150, 80, 44),
                                    Measured("glibc-arena2", "Ratchet", 200, 62, 41)});
  EXPECT_EQ(S(a.status)["verdict"], "Flat");
  EXPECT_EQ(S(a.status)["recommendation"]["recommended"], "jemalloc");
  // The arena2 variant's tunable maps to the policy's field in its row's
  // snippet source (its environment), and a Flat candidate ranked alone
  // would be kept.
  CanaryActions keep =
      RunToTheEnd(BakeOffCanary(), {Measured("candidate", "Flat", 150, 60, 40),
                                    Measured("jemalloc", "Ratchet", 150, 80, 44),
                                    Measured("glibc-arena2", "Flat", 300, 62, 41)});
  EXPECT_EQ(S(keep.status)["recommendation"]["recommended"], "candidate");
  EXPECT_EQ(S(keep.status)["recommendation"]["policySnippet"], "allocator:\n  name: glibc\n");
  // Not a bake-off: no recommendation.
  CanaryActions plain = RunToTheEnd(
      TwoVariantCanary(),
      {Measured("candidate", "Flat", 150, 60, 40), Measured("jemalloc", "Flat", 150, 80, 44)});
  EXPECT_TRUE(plain.finished);
  EXPECT_FALSE(S(plain.status).contains("recommendation"));
}

// The snippet of a tuned variant sets the policy's field for its tunable.
TEST(RecommendBakeOffTest, ATunedVariantsSnippetSetsThePolicyField) {
  CanaryActions a = RunToTheEnd(BakeOffCanary(), {Measured("candidate", "Ratchet", 310, 60, 40),
                                                  Measured("jemalloc", "Ratchet", 150, 80, 44),
                                                  Measured("glibc-arena2", "Flat", 200, 62, 41)});
  EXPECT_EQ(S(a.status)["recommendation"]["recommended"], "glibc-arena2");
  EXPECT_EQ(S(a.status)["recommendation"]["policySnippet"],
            "allocator:\n  name: glibc\n  glibc:\n    arenaMax: 2\n");
}

replay::CanaryResult WithBooks(replay::CanaryResult r, BooksReading reading, double in_use,
                               double retained) {
  r.books_reading = reading;
  r.in_use_floors_mib = {250, 250, 251};
  r.retained_floors_mib = {50, 90, 130};
  r.in_use_slope_gib_per_hour = in_use;
  r.retained_slope_gib_per_hour = retained;
  return r;
}

// The books go into the status beside the floors, and the overall
// explanation says which figure showed retention; the verdict is the same
// as without them.
TEST(DecideCanaryTest, TheBooksAreRecordedAndNamedInTheExplanation) {
  VariantObservation candidate = Finished("candidate", "Ratchet", 2.4);
  candidate.result = WithBooks(*candidate.result, BooksReading::kRetention, 0.01, 2.34);
  VariantObservation jemalloc = Finished("jemalloc", "Flat", 0.05);
  jemalloc.result = WithBooks(*jemalloc.result, BooksReading::kFlat, 0.0, 0.02);
  CanaryActions a = DecideCanary({TwoVariantCanary(), {}, {candidate}, "t"});
  CanaryActions b = DecideCanary({TwoVariantCanary(), a.status, {jemalloc}, "t"});
  ASSERT_TRUE(b.finished);
  EXPECT_EQ(S(b.status)["verdict"], "AllocatorRetention");
  const json books = Variant(b.status, "candidate")->at("books");
  EXPECT_EQ(books["reading"], "Retention");
  EXPECT_EQ(books["retainedFloorsMiB"], json({50, 90, 130}));
  EXPECT_EQ(books["retainedSlopeGiBPerHour"], 2.34);
  EXPECT_EQ(Variant(b.status, "jemalloc")->at("books")["reading"], "Flat");
  const std::string why = S(b.status)["explanation"];
  EXPECT_NE(why.find("variant candidate (glibc)'s allocator books show retention: in-use flat "
                     "(+0.01 GiB/h), retained climbing (+2.34 GiB/h)"),
            std::string::npos)
      << why;
  // A comparison variant whose books are flat is not repeated there.
  EXPECT_EQ(why.find("jemalloc (jemalloc)'s allocator books"), std::string::npos) << why;

  // The same runs without books: the same verdict, no books in the status.
  CanaryActions c =
      DecideCanary({TwoVariantCanary(), {}, {Finished("candidate", "Ratchet", 2.4)}, "t"});
  CanaryActions d =
      DecideCanary({TwoVariantCanary(), c.status, {Finished("jemalloc", "Flat", 0.05)}, "t"});
  EXPECT_EQ(S(d.status)["verdict"], S(b.status)["verdict"]);
  EXPECT_FALSE(Variant(d.status, "candidate")->contains("books"));
  EXPECT_EQ(std::string(S(d.status)["explanation"]).find("books"), std::string::npos);
}

TEST(DecideCanaryTest, BooksThatShowALeakAreNamedForAnyVariant) {
  VariantObservation candidate = Finished("candidate", "Ratchet", 2.4);
  candidate.result = WithBooks(*candidate.result, BooksReading::kLeak, 2.3, 0.1);
  VariantObservation jemalloc = Finished("jemalloc", "Ratchet", 2.2);
  jemalloc.result = WithBooks(*jemalloc.result, BooksReading::kLeak, 2.2, 0.0);
  CanaryActions a = DecideCanary({TwoVariantCanary(), {}, {candidate}, "t"});
  CanaryActions b = DecideCanary({TwoVariantCanary(), a.status, {jemalloc}, "t"});
  ASSERT_TRUE(b.finished);
  EXPECT_EQ(S(b.status)["verdict"], "Leak");
  const std::string why = S(b.status)["explanation"];
  EXPECT_NE(why.find("candidate (glibc)'s allocator books show a leak or a growing working set: "
                     "in-use climbing (+2.30 GiB/h)"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("jemalloc (jemalloc)'s allocator books show a leak"), std::string::npos)
      << why;
}

TEST(DecideCanaryTest, FlatEverywhereIsFlat) {
  CanaryInput first{TwoVariantCanary(), {}, {Finished("candidate", "Flat", 0.1)}, "t"};
  CanaryActions a = DecideCanary(first);
  CanaryInput second{TwoVariantCanary(), a.status, {Finished("jemalloc", "Flat", 0.0)}, "t"};
  CanaryActions b = DecideCanary(second);
  EXPECT_EQ(S(b.status)["verdict"], "Flat");
  EXPECT_FALSE(b.events.back().warning);
}

TEST(DecideCanaryTest, OutcomesWithoutAResultAreNamed) {
  struct Case {
    const char* name;
    VariantObservation obs;
    const char* verdict;
    const char* message_part;
  };
  VariantObservation oom = Finished("candidate", "Inconclusive", 0);
  oom.workload_oom_killed = true;
  oom.result->workload_exited = true;
  oom.result->exit_minute = 7;
  VariantObservation job_failed = Running("candidate");
  job_failed.job_failure = "the canary Job failed: DeadlineExceeded";
  VariantObservation garbage = Running("candidate");
  garbage.result_error = "not JSON";
  const std::vector<Case> cases = {
      {"oom", oom, "OOMKilled", "minute 7"},
      {"job failed", job_failed, "Failed", "DeadlineExceeded"},
      {"unreadable result", garbage, "Failed", "not JSON"},
  };
  for (const Case& c : cases) {
    CanaryInput in{TwoVariantCanary(), {}, {c.obs}, "t"};
    CanaryActions a = DecideCanary(in);
    std::optional<json> v = Variant(a.status, "candidate");
    ASSERT_TRUE(v.has_value()) << c.name;
    EXPECT_EQ((*v)["verdict"], c.verdict) << c.name;
    EXPECT_NE((*v)["message"].get<std::string>().find(c.message_part), std::string::npos)
        << c.name << ": " << (*v)["message"];
    EXPECT_EQ(a.delete_jobs.size(), 1u) << c.name;
  }
}

constexpr char kLoaderLine[] =
    "app: /app/server: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.34' not found (required "
    "by /opt/allocguard/inject/libjemalloc.so.2)";

TEST(DecideCanaryTest, AWorkloadThatCannotStartIsFailedWithTheLoadersMessage) {
  api::ReplayCanary canary = TwoVariantCanary();
  canary.spec.candidate_allocator.name = api::Allocator::kJemalloc;
  canary.spec.canary.variants[0].name = "glibc";
  canary.spec.canary.variants[0].allocator.name = api::Allocator::kGlibc;
  VariantObservation failed = Running("candidate");
  failed.workload_start_failure = kLoaderLine;
  // The driver gave up waiting for the workload and reported too: the loader
  // failure is what the person needs, not the driver's timeout.
  failed.result = Result("Failed", 0);
  CanaryActions a = DecideCanary({canary, {}, {failed}, "t"});
  std::optional<json> v = Variant(a.status, "candidate");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ((*v)["verdict"], "Failed");
  EXPECT_EQ((*v)["phase"], "Failed");
  EXPECT_EQ((*v)["startFailure"], kLoaderLine);
  EXPECT_NE((*v)["message"].get<std::string>().find("did not start under jemalloc"),
            std::string::npos)
      << (*v)["message"];
  EXPECT_EQ(a.delete_jobs, std::vector<std::string>{"web-abc-candidate"});
  const CanaryEvent* finished = nullptr;
  for (const CanaryEvent& e : a.events) {
    if (e.reason == "VariantFinished") finished = &e;
  }
  ASSERT_NE(finished, nullptr);
  EXPECT_TRUE(finished->warning);
  EXPECT_NE(finished->note.find("GLIBC_2.34"), std::string::npos) << finished->note;

  // The glibc variant runs; the canary ends Failed and its explanation (the
  // held Deployment's RolloutHeld event quotes it) carries the loader's words.
  CanaryActions b = DecideCanary({canary, a.status, {Finished("glibc", "Flat", 0.0)}, "t2"});
  EXPECT_TRUE(b.finished);
  EXPECT_EQ(S(b.status)["verdict"], "Failed");
  const std::string explanation = S(b.status)["explanation"];
  EXPECT_NE(explanation.find("variant candidate (jemalloc) did not start"), std::string::npos)
      << explanation;
  EXPECT_NE(explanation.find("version `GLIBC_2.34' not found"), std::string::npos) << explanation;
}

TEST(DecideCanaryTest, AComparisonVariantThatCannotStartIsNamedInTheExplanation) {
  VariantObservation failed = Running("jemalloc");
  failed.workload_start_failure =
      "app: Error relocating /opt/allocguard/inject/libjemalloc.so.2: "
      "__memcpy_chk: symbol not found";
  CanaryActions a =
      DecideCanary({TwoVariantCanary(), {}, {Finished("candidate", "Ratchet", 2.4)}, "t"});
  CanaryActions b = DecideCanary({TwoVariantCanary(), a.status, {failed}, "t2"});
  EXPECT_EQ(S(b.status)["verdict"], "Ratchet");
  EXPECT_EQ((*Variant(b.status, "jemalloc"))["verdict"], "Failed");
  EXPECT_NE(S(b.status)["explanation"].get<std::string>().find("Error relocating"),
            std::string::npos)
      << S(b.status)["explanation"];
}

// A canary pod with the workload container "app" and the driver.
json CanaryPod(json app_status) {
  app_status["name"] = "app";
  return {{"status",
           {{"phase", "Running"},
            {"containerStatuses",
             {app_status,
              {{"name", "allocguard-replay"}, {"state", {{"running", json::object()}}}}}}}}};
}

TEST(ObserveVariantTest, ALoaderErrorInTheWorkloadsTerminationMessageIsAStartFailure) {
  const api::JobSummary job = api::ParseJobSummary(json{{"status", json::object()}});
  struct Case {
    const char* name;
    json app_status;
    std::optional<std::string> start_failure;
  };
  const std::vector<Case> cases = {
      {"terminated by the loader (restartPolicy Never)",
       {{"state",
         {{"terminated",
           {{"exitCode", 127},
            {"reason", "Error"},
            {"message",
             "Error relocating /opt/allocguard/inject/libjemalloc.so.2: __memcpy_chk: symbol not "
             "found\n"}}}}}},
       "app: Error relocating /opt/allocguard/inject/libjemalloc.so.2: __memcpy_chk: symbol not "
       "found"},
      {"restarted after the loader refused",
       {{"state", {{"waiting", {{"reason", "CrashLoopBackOff"}}}}},
        {"lastState", {{"terminated", {{"exitCode", 1}, {"message", kLoaderLine}}}}}},
       std::string("app: ") + kLoaderLine},
      {"the application's own failure",
       {{"state", {{"terminated", {{"exitCode", 2}, {"message", "panic: boom"}}}}}},
       std::nullopt},
      {"running", {{"state", {{"running", json::object()}}}}, std::nullopt},
  };
  for (const Case& c : cases) {
    VariantObservation obs = ObserveVariant("candidate", "web-abc-candidate", &job,
                                            {api::ParsePodSummary(CanaryPod(c.app_status))});
    EXPECT_TRUE(obs.job_exists) << c.name;
    EXPECT_EQ(obs.workload_start_failure, c.start_failure) << c.name;
  }
}

TEST(ObserveVariantTest, NoJobNoObservation) {
  VariantObservation obs = ObserveVariant("candidate", "web-abc-candidate", nullptr, {});
  EXPECT_FALSE(obs.job_exists);
  EXPECT_EQ(obs.job_name, "web-abc-candidate");
}

TEST(DecideCanaryTest, NaNSlopeIsLeftOutOfStatus) {
  VariantObservation o = Finished("candidate", "Errors", 0);
  o.result->slope_gib_per_hour = std::nan("");
  CanaryInput in{TwoVariantCanary(), {}, {o}, "t"};
  CanaryActions a = DecideCanary(in);
  EXPECT_FALSE(Variant(a.status, "candidate")->contains("floorSlopeGiBPerHour"));
}

// --- reruns of an Inconclusive candidate (canary.inconclusiveReruns) ---------

// An Inconclusive result whose interval (+0.20 [-0.60, +1.00] GiB/h over 25
// floors) straddles the 0.5 GiB/h limit.
VariantObservation Undecided(const std::string& variant, const std::string& job_name) {
  VariantObservation o = Finished(variant, "Inconclusive", 0.2);
  o.job_name = job_name;
  o.result->floors_mib = std::vector<double>(25, 300);
  o.result->slope_low = -0.6;
  o.result->slope_high = 1.0;
  o.result->minutes = 30;
  return o;
}

TEST(DecideCanaryTest, AnInconclusiveCandidateRunsAgainWithTheNextSeed) {
  const api::ReplayCanary canary = TwoVariantCanary();  // seed 1, one rerun
  CanaryActions a = DecideCanary({canary, {}, {Undecided("candidate", "web-abc-candidate")}, "t"});
  EXPECT_FALSE(a.finished);
  EXPECT_EQ(S(a.status)["phase"], "Running");
  ASSERT_TRUE(a.create_job_for_variant.has_value());
  EXPECT_EQ(*a.create_job_for_variant, "candidate");
  EXPECT_EQ(a.delete_jobs, std::vector<std::string>{"web-abc-candidate"});
  EXPECT_FALSE(Variant(a.status, "jemalloc").has_value()) << "the comparison waits for the rerun";
  const json c = *Variant(a.status, "candidate");
  EXPECT_EQ(c["phase"], "Pending");
  EXPECT_EQ(c["seed"], 2);
  EXPECT_FALSE(c.contains("verdict"));
  ASSERT_EQ(c["earlierRuns"].size(), 1u);
  const json& first = c["earlierRuns"][0];
  EXPECT_EQ(first["verdict"], "Inconclusive");
  EXPECT_EQ(first["seed"], 1);
  EXPECT_EQ(first["job"], "web-abc-candidate");
  EXPECT_EQ(first["floorsMiB"].size(), 25u);
  EXPECT_DOUBLE_EQ(first["slopeHighGiBPerHour"].get<double>(), 1.0);
  EXPECT_EQ(RerunOf(P(S(a.status)).FindVariant("candidate")), 1);
  ASSERT_FALSE(a.events.empty());
  EXPECT_EQ(a.events.front().reason, "VariantRerun");
  EXPECT_NE(a.events.front().note.find("seed 2 (rerun 1 of 1"), std::string::npos)
      << a.events.front().note;

  // A restart before the rerun's Job exists creates it (once: its name is
  // the rerun's), and then sees it run.
  CanaryActions b = DecideCanary({canary, P(S(a.status)), {}, "t2"});
  ASSERT_TRUE(b.create_job_for_variant.has_value());
  EXPECT_EQ(*b.create_job_for_variant, "candidate");
  EXPECT_EQ((*Variant(b.status, "candidate"))["earlierRuns"].size(), 1u);
  VariantObservation rerun = Running("candidate");
  rerun.job_name = "web-abc-candidate-r1";
  CanaryActions c2 = DecideCanary({canary, P(S(b.status)), {rerun}, "t3"});
  EXPECT_FALSE(c2.create_job_for_variant.has_value());
  EXPECT_EQ((*Variant(c2.status, "candidate"))["phase"], "Running");
  EXPECT_EQ((*Variant(c2.status, "candidate"))["job"], "web-abc-candidate-r1");
}

TEST(DecideCanaryTest, AFlatRerunDecidesTheCanaryAndKeepsTheFirstRun) {
  const api::ReplayCanary canary = TwoVariantCanary();
  CanaryActions a = DecideCanary({canary, {}, {Undecided("candidate", "web-abc-candidate")}, "t"});
  VariantObservation flat = Finished("candidate", "Flat", 0.05);
  flat.job_name = "web-abc-candidate-r1";
  CanaryActions b = DecideCanary({canary, P(S(a.status)), {flat}, "t2"});
  const json c = *Variant(b.status, "candidate");
  EXPECT_EQ(c["verdict"], "Flat");
  EXPECT_EQ(c["seed"], 2);
  EXPECT_EQ(c["earlierRuns"].size(), 1u);
  EXPECT_EQ(c["measurementKey"], MeasurementKey(canary, "candidate", {}, 1));
  EXPECT_NE(MeasurementKey(canary, "candidate", {}, 1), MeasurementKey(canary, "candidate", {}))
      << "the rerun's seed is part of what it measured";
  EXPECT_EQ(b.delete_jobs, std::vector<std::string>{"web-abc-candidate-r1"});
  ASSERT_TRUE(b.create_job_for_variant.has_value());
  EXPECT_EQ(*b.create_job_for_variant, "jemalloc");
  CanaryActions d = DecideCanary({canary, P(S(b.status)), {Finished("jemalloc", "Flat", 0)}, "t3"});
  EXPECT_TRUE(d.finished);
  EXPECT_EQ(S(d.status)["verdict"], "Flat");
}

TEST(DecideCanaryTest, StillInconclusiveAfterItsRerunSaysWhatWouldDecideIt) {
  const api::ReplayCanary canary = TwoVariantCanary();
  CanaryActions a = DecideCanary({canary, {}, {Undecided("candidate", "web-abc-candidate")}, "t"});
  CanaryActions b = DecideCanary(
      {canary, P(S(a.status)), {Undecided("candidate", "web-abc-candidate-r1")}, "t2"});
  EXPECT_EQ((*Variant(b.status, "candidate"))["verdict"], "Inconclusive");
  ASSERT_TRUE(b.create_job_for_variant.has_value());
  EXPECT_EQ(*b.create_job_for_variant, "jemalloc") << "one rerun only";
  CanaryActions d = DecideCanary({canary, P(S(b.status)), {Finished("jemalloc", "Flat", 0)}, "t3"});
  EXPECT_TRUE(d.finished);
  EXPECT_EQ(S(d.status)["verdict"], "Inconclusive");
  // Half-width 0.8 GiB/h, room to the limit 0.5 - 0.2 = 0.3: the interval
  // narrows as floors^-3/2, so 25 x (0.8/0.3)^(2/3) = 48.07 floors would do,
  // 24 more; 30 + 24 minutes, rounded up to 5, is 55m.
  const std::string explanation = S(d.status)["explanation"];
  EXPECT_NE(explanation.find("the candidate ran 2 times (seeds 1 and 2), each for up to "
                             "canary.maxDuration 30m"),
            std::string::npos)
      << explanation;
  EXPECT_NE(explanation.find("about 24 more minutes would decide it: set canary.maxDuration to "
                             "55m"),
            std::string::npos)
      << explanation;
}

TEST(InconclusiveAdviceTest, NamesTheLoadWhenTheWorkloadFellBehindAndTheLimitWhenAtIt) {
  api::ReplayCanary canary = TwoVariantCanary();
  canary.spec.canary.load.seed = 7;
  api::VariantStatus v;
  v.seed = 7;
  v.requests = 1000;
  v.late = 50;
  v.floor_slope_gib_per_hour = 0.2;
  v.slope_low_gib_per_hour = -0.6;
  v.slope_high_gib_per_hour = 1.0;
  v.floors_mib = std::vector<double>(25, 300);
  std::string advice = InconclusiveAdvice(canary, v);
  EXPECT_NE(advice.find("ran once (seed 7)"), std::string::npos) << advice;
  EXPECT_NE(advice.find("50 of 1000 requests started late"), std::string::npos) << advice;
  EXPECT_NE(advice.find("canary.load.rate"), std::string::npos) << advice;
  // 0.49 GiB/h sits within a twentieth of the 0.5 GiB/h limit.
  v.late = 5;
  v.floor_slope_gib_per_hour = 0.49;
  advice = InconclusiveAdvice(canary, v);
  EXPECT_NE(advice.find("sits at the limit (±0.50 GiB/h"), std::string::npos) << advice;
  // A floor that keeps falling: more minutes would not make it flat.
  v.floor_slope_gib_per_hour = -1.0;
  v.slope_low_gib_per_hour = -1.1;
  v.slope_high_gib_per_hour = -0.9;
  advice = InconclusiveAdvice(canary, v);
  EXPECT_NE(advice.find("still falling (-1.00 GiB/h, faster than the limit of -0.50 GiB/h)"),
            std::string::npos)
      << advice;
  EXPECT_EQ(advice.find("canary.maxDuration to"), std::string::npos) << advice;
}

TEST(DecideCanaryTest, NoRerunWhenThePolicyAsksForNoneOrForAComparisonVariant) {
  api::ReplayCanary none = TwoVariantCanary();
  none.spec.canary.inconclusive_reruns = 0;
  CanaryActions a = DecideCanary({none, {}, {Undecided("candidate", "web-abc-candidate")}, "t"});
  EXPECT_EQ((*Variant(a.status, "candidate"))["verdict"], "Inconclusive");
  ASSERT_TRUE(a.create_job_for_variant.has_value());
  EXPECT_EQ(*a.create_job_for_variant, "jemalloc");

  const api::ReplayCanary canary = TwoVariantCanary();
  CanaryActions b = DecideCanary({canary, {}, {Finished("candidate", "Ratchet", 2.4)}, "t"});
  CanaryActions c =
      DecideCanary({canary, P(S(b.status)), {Undecided("jemalloc", "web-abc-jemalloc")}, "t2"});
  EXPECT_TRUE(c.finished) << "the comparison variant is not run again";
  EXPECT_EQ((*Variant(c.status, "jemalloc"))["verdict"], "Inconclusive");
}

TEST(DecideCanaryTest, ARerunMayReuseAnotherCanarysRunOfTheSameSeed) {
  const api::ReplayCanary canary = TwoVariantCanary();
  CanaryActions a = DecideCanary({canary, {}, {Undecided("candidate", "web-abc-candidate")}, "t"});
  api::VariantStatus measured;
  measured.name = "candidate";
  measured.phase = api::CanaryPhase::kCompleted;
  measured.verdict = Verdict::kFlat;
  measured.seed = 2;
  measured.measurement_key = MeasurementKey(canary, "candidate", {}, 1);
  CanaryInput in{canary, P(S(a.status)), {}, "t2"};
  in.earlier = {{"web-other", measured, std::nullopt}};
  CanaryActions b = DecideCanary(in);
  const json c = *Variant(b.status, "candidate");
  EXPECT_EQ(c["verdict"], "Flat");
  EXPECT_EQ(c["reusedFrom"], "web-other");
  EXPECT_EQ(c["earlierRuns"].size(), 1u) << "this canary's own first run stays";
  EXPECT_EQ(RerunOf(P(S(b.status)).FindVariant("candidate")), 1);
}

// Another canary's candidate as it stands after `runs` runs: the last one
// ended `verdict`, those before it Inconclusive, each keyed and seeded as
// `canary` would run it.
api::VariantStatus CandidateAfterRuns(const api::ReplayCanary& canary, int runs, Verdict verdict) {
  api::VariantStatus v;
  v.name = "candidate";
  v.allocator = "glibc";
  v.phase = api::CanaryPhase::kCompleted;
  for (int i = 0; i + 1 < runs; ++i) {
    api::VariantRun earlier;
    earlier.verdict = Verdict::kInconclusive;
    earlier.seed = static_cast<int64_t>(api::RerunSeed(canary.spec.canary.load.seed, i));
    earlier.floors_mib = {300, 301 + static_cast<double>(i)};
    v.earlier_runs.push_back(earlier);
  }
  v.verdict = verdict;
  v.seed = static_cast<int64_t>(api::RerunSeed(canary.spec.canary.load.seed, runs - 1));
  v.floors_mib = {300, 330, 360};
  v.measurement_key = MeasurementKey(canary, "candidate", {}, runs - 1);
  return v;
}

// A canary created after another's candidate was rerun (a DaemonSet's whose
// template is the held Deployment's) copies the rerun and the run before
// it: its own first run would only repeat the one that was Inconclusive.
TEST(DecideCanaryTest, ANewCanaryCopiesAnotherCanarysRerunWithTheRunsBeforeIt) {
  api::ReplayCanary canary = TwoVariantCanary();
  canary.name = "agent-abc";
  const api::VariantStatus rerun = CandidateAfterRuns(canary, 2, Verdict::kRatchet);
  CanaryInput in{canary, {}, {}, "t"};
  in.earlier = {{"web-abc", rerun, std::nullopt}};
  CanaryActions a = DecideCanary(in);
  const api::VariantStatus* c = a.status.FindVariant("candidate");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Verdict::kRatchet);
  EXPECT_EQ(c->reused_from, "web-abc");
  EXPECT_EQ(c->earlier_runs, rerun.earlier_runs) << "the Inconclusive first run comes along";
  EXPECT_EQ(c->measurement_key, MeasurementKey(canary, "candidate", {}, RerunOf(c)))
      << "the entry's key is the key of the run it describes";
  ASSERT_TRUE(a.create_job_for_variant.has_value());
  EXPECT_EQ(*a.create_job_for_variant, "jemalloc") << "the candidate does not run again";

  // Its own first run done, the canary copies only what comes after it.
  api::ReplayCanary three = canary;
  three.spec.canary.inconclusive_reruns = 2;
  const api::VariantStatus rerun_twice = CandidateAfterRuns(three, 3, Verdict::kFlat);
  api::ReplayCanaryStatus own;
  api::VariantStatus first;
  first.name = "candidate";
  first.allocator = "glibc";
  first.phase = api::CanaryPhase::kPending;
  api::VariantRun own_run;
  own_run.verdict = Verdict::kInconclusive;
  own_run.floors_mib = {999};
  first.earlier_runs = {own_run};
  own.variants = {first};
  CanaryInput later{three, own, {}, "t"};
  later.earlier = {{"web-abc", rerun_twice, std::nullopt}};
  const CanaryActions b = DecideCanary(later);
  const api::VariantStatus* d = b.status.FindVariant("candidate");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->verdict, Verdict::kFlat);
  ASSERT_EQ(d->earlier_runs.size(), 2u);
  EXPECT_EQ(d->earlier_runs[0], own_run) << "this canary's own run is kept";
  EXPECT_EQ(d->earlier_runs[1], rerun_twice.earlier_runs[1]);
}

TEST(DecideCanaryTest, ARerunIsNotCopiedBeyondThisCanarysRerunsNorIntoAComparisonVariant) {
  api::ReplayCanary canary = TwoVariantCanary();
  canary.name = "agent-abc";
  canary.spec.canary.inconclusive_reruns = 0;
  CanaryInput none{canary, {}, {}, "t"};
  none.earlier = {{"web-abc", CandidateAfterRuns(canary, 2, Verdict::kRatchet), std::nullopt}};
  CanaryActions a = DecideCanary(none);
  ASSERT_TRUE(a.create_job_for_variant.has_value())
      << "a canary that reruns nothing would end Inconclusive after one run";
  EXPECT_EQ(*a.create_job_for_variant, "candidate");

  // The comparison variant jemalloc never reruns: another canary's
  // jemalloc candidate that needed a rerun is not what it would measure.
  api::ReplayCanary jemalloc = TwoVariantCanary();
  jemalloc.name = "web-def";
  jemalloc.spec.candidate_allocator.name = api::Allocator::kJemalloc;
  jemalloc.spec.canary.variants.clear();
  api::VariantStatus rerun = CandidateAfterRuns(jemalloc, 2, Verdict::kFlat);
  rerun.allocator = "jemalloc";
  api::ReplayCanary with_comparison = TwoVariantCanary();
  with_comparison.name = "agent-abc";
  CanaryInput in{with_comparison, {}, {Finished("candidate", "Ratchet", 2.4)}, "t"};
  in.earlier = {{"web-def", rerun, std::nullopt}};
  ASSERT_EQ(MeasurementKey(with_comparison, "jemalloc", {}, 1), rerun.measurement_key)
      << "the test's premise: the same measurement as run 1";
  CanaryActions b = DecideCanary(in);
  ASSERT_TRUE(b.create_job_for_variant.has_value());
  EXPECT_EQ(*b.create_job_for_variant, "jemalloc");
}

TEST(DecideCanaryTest, FinishedCanaryOnlyCleansUpLeftoverJobs) {
  json status = {{"phase", "Completed"}, {"verdict", "Flat"}};
  CanaryInput in{TwoVariantCanary(), P(status), {Running("jemalloc")}, "t"};
  CanaryActions a = DecideCanary(in);
  EXPECT_TRUE(a.finished);
  EXPECT_FALSE(a.create_job_for_variant.has_value());
  EXPECT_EQ(a.delete_jobs, std::vector<std::string>{"web-abc-jemalloc"});
  EXPECT_FALSE(a.status_changed);
}

// The condition of `type`, as written.
std::optional<json> CanaryCondition(const api::ReplayCanaryStatus& status,
                                    const std::string& type) {
  const json written = S(status);
  for (const json& c : written.value("conditions", json::array())) {
    if (c["type"] == type) return c;
  }
  return std::nullopt;
}

// kstatus: Ready=True only once a verdict is in, Reconciling while running,
// Stalled when the canary could not judge; each with observedGeneration.
TEST(SetCanaryConditionsTest, FollowKstatus) {
  struct Case {
    const char* name;
    json status;
    const char* ready;
    const char* ready_reason;
    const char* reconciling;
    const char* stalled;
  };
  const std::vector<Case> cases = {
      {"no status", json::object(), "False", "Pending", "True", "False"},
      {"queued",
       {{"phase", "Pending"}, {"explanation", "queued: 2 canaries are running"}},
       "False",
       "Pending",
       "True",
       "False"},
      {"running", {{"phase", "Running"}}, "False", "Running", "True", "False"},
      {"flat", {{"phase", "Completed"}, {"verdict", "Flat"}}, "True", "Flat", "False", "False"},
      {"ratchet",
       {{"phase", "Completed"}, {"verdict", "Ratchet"}},
       "True",
       "Ratchet",
       "False",
       "False"},
      {"variant failed",
       {{"phase", "Completed"}, {"verdict", "Failed"}},
       "False",
       "Failed",
       "False",
       "True"},
      {"invalid", {{"phase", "Failed"}, {"verdict", "Failed"}}, "False", "Failed", "False", "True"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    api::ReplayCanaryStatus status = P(c.status);
    SetCanaryConditions(status, 4, "t");
    std::optional<json> ready = CanaryCondition(status, "Ready");
    ASSERT_TRUE(ready.has_value());
    EXPECT_EQ((*ready)["status"], c.ready);
    EXPECT_EQ((*ready)["reason"], c.ready_reason);
    EXPECT_EQ((*ready)["observedGeneration"], 4);
    EXPECT_EQ((*CanaryCondition(status, "Reconciling"))["status"], c.reconciling);
    EXPECT_EQ((*CanaryCondition(status, "Stalled"))["status"], c.stalled);
  }
}

TEST(DecideCanaryTest, WritesConditionsAndKeepsTransitionTimes) {
  CanaryInput in{TwoVariantCanary(), {}, {Running("candidate")}, "t1"};
  CanaryActions a = DecideCanary(in);
  std::optional<json> ready = CanaryCondition(a.status, "Ready");
  ASSERT_TRUE(ready.has_value());
  EXPECT_EQ((*ready)["status"], "False");
  EXPECT_EQ((*ready)["message"], "running variant candidate");
  CanaryInput again{TwoVariantCanary(), a.status, {Running("candidate")}, "t2"};
  CanaryActions b = DecideCanary(again);
  EXPECT_FALSE(b.status_changed) << "the same state is not a new write";
  CanaryInput done{TwoVariantCanary(),
                   b.status,
                   {Finished("candidate", "Flat", 0.0), Finished("jemalloc", "Flat", 0.0)},
                   "t3"};
  CanaryActions c = DecideCanary(done);
  ASSERT_TRUE(c.finished);
  EXPECT_EQ((*CanaryCondition(c.status, "Ready"))["status"], "True");
  EXPECT_EQ((*CanaryCondition(c.status, "Ready"))["reason"], "Flat");
  EXPECT_EQ((*CanaryCondition(c.status, "Ready"))["lastTransitionTime"], "t3");
}

// The canary a policy switched to jemalloc creates for the same template:
// its candidate is jemalloc, with no comparison variants.
api::ReplayCanary SwitchedToJemalloc() {
  api::ReplayCanary c = TwoVariantCanary();
  c.name = "web-def";
  c.spec.candidate_allocator.name = api::Allocator::kJemalloc;
  c.spec.canary.variants.clear();
  return c;
}

// The status of TwoVariantCanary after both variants ran.
api::ReplayCanaryStatus MeasuredStatus(const std::string& jemalloc_verdict) {
  CanaryInput first{TwoVariantCanary(), {}, {Finished("candidate", "Ratchet", 2.4)}, "t"};
  CanaryInput second{TwoVariantCanary(),
                     DecideCanary(first).status,
                     {Finished("jemalloc", jemalloc_verdict, 0.01)},
                     "t2"};
  return DecideCanary(second).status;
}

std::vector<EarlierMeasurement> Earlier(const std::string& canary,
                                        const api::ReplayCanaryStatus& status) {
  std::vector<EarlierMeasurement> out;
  for (const api::VariantStatus& v : status.variants) out.push_back({canary, v, std::nullopt});
  return out;
}

TEST(MeasurementKeyTest, RecordedWithEachFinishedVariant) {
  api::ReplayCanaryStatus status = MeasuredStatus("Flat");
  const api::ReplayCanary c = TwoVariantCanary();
  EXPECT_EQ((*Variant(status, "candidate"))["measurementKey"], MeasurementKey(c, "candidate", {}));
  EXPECT_EQ((*Variant(status, "jemalloc"))["measurementKey"], MeasurementKey(c, "jemalloc", {}));
  EXPECT_NE(MeasurementKey(c, "candidate", {}), MeasurementKey(c, "jemalloc", {}))
      << "glibc and jemalloc runs measure different things";
}

TEST(MeasurementKeyTest, SameAllocatorAsCandidateOrVariantIsTheSameMeasurement) {
  EXPECT_EQ(MeasurementKey(TwoVariantCanary(), "jemalloc", {"server"}),
            MeasurementKey(SwitchedToJemalloc(), "candidate", {"server"}));
}

TEST(MeasurementKeyTest, EveryInputOfTheRunChangesIt) {
  const api::ReplayCanary base = SwitchedToJemalloc();
  const std::string key = MeasurementKey(base, "candidate", {"server"});
  std::vector<std::pair<std::string, api::ReplayCanary>> changed;
  auto with = [&](const std::string& what, auto mutate) {
    api::ReplayCanary c = base;
    mutate(c);
    changed.emplace_back(what, c);
  };
  with("template", [](api::ReplayCanary& c) { c.spec.template_hash = "other"; });
  with("template body", [](api::ReplayCanary& c) { c.spec.pod_template_json = R"({"spec":{}})"; });
  with("tunables", [](api::ReplayCanary& c) {
    c.spec.candidate_allocator.jemalloc_malloc_conf = "dirty_decay_ms:0";
  });
  with("duration", [](api::ReplayCanary& c) { c.spec.canary.duration = std::chrono::seconds(60); });
  with("sampling", [](api::ReplayCanary& c) {
    c.spec.canary.sample_interval = std::chrono::milliseconds(500);
  });
  with("load rate", [](api::ReplayCanary& c) { c.spec.canary.load.rate = 99; });
  with("node selector", [](api::ReplayCanary& c) { c.spec.canary.node_selector["pool"] = "big"; });
  with("production CPUs", [](api::ReplayCanary& c) { c.spec.canary.production_cpus = 64; });
  with("limits",
       [](api::ReplayCanary& c) { c.spec.limits.max_floor_slope_bytes_per_hour = 1LL << 20; });
  for (const auto& [what, c] : changed) {
    EXPECT_NE(MeasurementKey(c, "candidate", {"server"}), key) << what;
  }
  EXPECT_NE(MeasurementKey(base, "candidate", {"sidecar"}), key) << "containers";
  api::ReplayCanary other_name = base;
  other_name.name = "renamed";
  other_name.spec.policy = "another-policy";
  EXPECT_EQ(MeasurementKey(other_name, "candidate", {"server"}), key)
      << "names are not inputs of the measurement";
}

TEST(MeasurementKeyTest, TemplateLabelsAndADaemonSetTargetAreNotInputsAStatefulSetIs) {
  api::ReplayCanary base = SwitchedToJemalloc();
  base.spec.pod_template_json =
      R"({"metadata":{"labels":{"app":"web"},"annotations":{"a":"1"}},"spec":{"containers":[]}})";
  const std::string key = MeasurementKey(base, "candidate", {"server"});

  // The canary's Pods carry labels of their own: a DaemonSet's template that
  // differs from a Deployment's only in its labels runs the same Job.
  api::ReplayCanary daemonset = base;
  daemonset.spec.target_kind = "DaemonSet";
  daemonset.spec.pod_template_json =
      R"({"metadata":{"labels":{"app":"agent"},"annotations":{"a":"1"}},"spec":{"containers":[]}})";
  EXPECT_EQ(MeasurementKey(daemonset, "candidate", {"server"}), key);

  // Annotations stay inputs: the Job keeps them.
  api::ReplayCanary annotated = base;
  annotated.spec.pod_template_json =
      R"({"metadata":{"labels":{"app":"web"},"annotations":{"a":"2"}},"spec":{"containers":[]}})";
  EXPECT_NE(MeasurementKey(annotated, "candidate", {"server"}), key);

  // A StatefulSet's canary runs with the identity of its first pod and its
  // claims mounted: never the same measurement as a Deployment's, nor as
  // another StatefulSet's.
  api::ReplayCanary db = base;
  db.spec.target_kind = "StatefulSet";
  db.spec.target_name = "db";
  const std::string db_key = MeasurementKey(db, "candidate", {"server"});
  EXPECT_NE(db_key, key);
  api::ReplayCanary other_db = db;
  other_db.spec.target_name = "cache";
  EXPECT_NE(MeasurementKey(other_db, "candidate", {"server"}), db_key);
}

TEST(DecideCanaryTest, AVariantMeasuredWithIdenticalInputsIsCopiedNotRun) {
  CanaryInput in{SwitchedToJemalloc(), {}, {}, "t3"};
  in.earlier = Earlier("web-abc", MeasuredStatus("Flat"));
  CanaryActions a = DecideCanary(in);
  EXPECT_FALSE(a.create_job_for_variant.has_value()) << "no second run of jemalloc";
  ASSERT_TRUE(a.finished);
  EXPECT_EQ(S(a.status)["verdict"], "Flat");
  std::optional<json> c = Variant(a.status, "candidate");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ((*c)["reusedFrom"], "web-abc");
  EXPECT_EQ((*c)["allocator"], "jemalloc");
  EXPECT_FALSE(c->contains("job")) << "no Job of this canary ran it";
  EXPECT_EQ((*c)["floorsMiB"].size(), 3u) << "the measured floors come along";
  bool event = false;
  for (const CanaryEvent& e : a.events) {
    event = event || (e.reason == "VariantReused" && !e.warning &&
                      e.note.find("web-abc") != std::string::npos);
  }
  EXPECT_TRUE(event) << "the copy is announced with the canary that measured it";
}

TEST(DecideCanaryTest, AFailedOrDifferentMeasurementIsRunAgain) {
  {
    api::ReplayCanaryStatus status = MeasuredStatus("Failed");
    CanaryInput in{SwitchedToJemalloc(), {}, {}, "t3"};
    in.earlier = Earlier("web-abc", status);
    CanaryActions a = DecideCanary(in);
    ASSERT_TRUE(a.create_job_for_variant.has_value()) << "a Failed run settles nothing";
    EXPECT_EQ(*a.create_job_for_variant, "candidate");
  }
  {
    api::ReplayCanary longer = SwitchedToJemalloc();
    longer.spec.canary.duration = std::chrono::seconds(1800);
    CanaryInput in{longer, {}, {}, "t3"};
    in.earlier = Earlier("web-abc", MeasuredStatus("Flat"));
    EXPECT_TRUE(DecideCanary(in).create_job_for_variant.has_value())
        << "a longer run is a different measurement";
  }
  {
    CanaryInput in{SwitchedToJemalloc(), {}, {}, "t3"};
    in.earlier = Earlier("web-def", MeasuredStatus("Flat"));  // its own name
    EXPECT_TRUE(DecideCanary(in).create_job_for_variant.has_value())
        << "a canary never copies from itself";
  }
}

TEST(DecideCanaryTest, AVariantWithARunningJobIsNotReplacedByACopy) {
  // A Job already started (e.g. before the earlier canary finished) is
  // followed to its own result.
  CanaryInput in{SwitchedToJemalloc(), {}, {Running("candidate")}, "t3"};
  in.earlier = Earlier("web-abc", MeasuredStatus("Flat"));
  CanaryActions a = DecideCanary(in);
  EXPECT_FALSE(a.finished);
  EXPECT_EQ((*Variant(a.status, "candidate"))["phase"], "Running");
  EXPECT_FALSE(Variant(a.status, "candidate")->contains("reusedFrom"));
}

TEST(VariantOrderTest, CandidateFirstThenSpecOrder) {
  api::ReplayCanary c = TwoVariantCanary();
  api::VariantSpec tc;
  tc.name = "tcmalloc";
  c.spec.canary.variants.push_back(tc);
  EXPECT_EQ(VariantOrder(c), (std::vector<std::string>{"candidate", "jemalloc", "tcmalloc"}));
  EXPECT_EQ(VariantAllocator(c, "candidate").name, api::Allocator::kGlibc);
  EXPECT_EQ(VariantAllocator(c, "jemalloc").name, api::Allocator::kJemalloc);
}

// A hand-made canary must not lend the operator's rights (it may create Jobs
// in every namespace): host access and other ServiceAccounts run only for the
// target's own current template.
TEST(RefuseTemplateRightsTest, HostAccessRunsOnlyForTheTargetsOwnTemplate) {
  api::ReplayCanary c = TwoVariantCanary();
  c.spec.target_name = "web";
  const json plain = {{"spec", {{"containers", {{{"name", "app"}, {"image", "web:1"}}}}}}};
  c.spec.pod_template_json = plain.dump();
  EXPECT_EQ(RefuseTemplateRights(c, ""), "") << "an ordinary template runs for anyone";

  json hostile = plain;
  hostile["spec"]["hostPID"] = true;
  hostile["spec"]["serviceAccountName"] = "cluster-admin-sa";
  hostile["spec"]["nodeName"] = "control-plane";
  hostile["spec"]["volumes"] = {{{"name", "root"}, {"hostPath", {{"path", "/"}}}}};
  hostile["spec"]["containers"][0]["securityContext"] = {{"privileged", true}};
  c.spec.pod_template_json = hostile.dump();
  const std::string why = RefuseTemplateRights(c, admission::TemplateHash(plain));
  for (const char* field :
       {"spec.template.spec.hostPID", "spec.template.spec.nodeName",
        "spec.template.spec.containers[0].securityContext.privileged",
        "spec.template.spec.volumes[0].hostPath",
        "spec.template.spec.serviceAccountName (cluster-admin-sa)", "Deployment/web"}) {
    EXPECT_NE(why.find(field), std::string::npos) << field << " in: " << why;
  }
  EXPECT_NE(RefuseTemplateRights(c, ""), "") << "no target Deployment: refused";
  // The same template is the Deployment's own: the canary copies it as it is.
  EXPECT_EQ(RefuseTemplateRights(c, admission::TemplateHash(hostile)), "");
  // The default ServiceAccount is what any pod of the namespace gets.
  json default_sa = plain;
  default_sa["spec"]["serviceAccountName"] = "default";
  c.spec.pod_template_json = default_sa.dump();
  EXPECT_EQ(RefuseTemplateRights(c, ""), "");
}

// The status is read back from the API server on every pass; whoever edited
// it, a field of another type or a verdict allocguard never writes must not
// throw out of the decision (it runs on a worker thread) nor count as Flat.
TEST(DecideCanaryTest, AStatusWithFieldsOfOtherTypesIsReadWithoutThrowing) {
  const json bad_statuses[] = {
      {{"phase", 7}},
      {{"phase", "Running"}, {"variants", "candidate"}},
      {{"phase", "Running"}, {"variants", {{{"name", {{"a", 1}}}, {"phase", true}}}}},
      {{"phase", "Running"},
       {"variants",
        {{{"name", "candidate"},
          {"phase", "Completed"},
          {"verdict", 3},
          {"floorSlopeGiBPerHour", "fast"},
          {"allocator", {1, 2}},
          {"startFailure", 5}},
         {{"name", "jemalloc"}, {"phase", "Completed"}, {"verdict", "Flat"}}}}},
      {{"phase", {{"x", 1}}}, {"verdict", nullptr}, {"explanation", 1.5}},
  };
  for (const json& status : bad_statuses) {
    CanaryActions a;
    // Read as the reconciler reads it, then decided: neither step throws.
    ASSERT_NO_THROW((a = DecideCanary(CanaryInput{TwoVariantCanary(), P(status), {}, "t"})))
        << status.dump();
    EXPECT_NE(S(a.status).value("verdict", json()), "Flat") << status.dump();
  }
}

TEST(DecideCanaryTest, ARecordedVerdictAllocguardDoesNotWriteEndsFailedAndSaysSo) {
  const json status = {{"phase", "Running"},
                       {"variants",
                        {{{"name", "candidate"},
                          {"allocator", "glibc"},
                          {"phase", "Completed"},
                          {"verdict", "Great"}},
                         {{"name", "jemalloc"},
                          {"allocator", "jemalloc"},
                          {"phase", "Completed"},
                          {"verdict", "Flat"}}}}};
  CanaryInput in{TwoVariantCanary(), P(status), {}, "t"};
  CanaryActions a = DecideCanary(in);
  ASSERT_TRUE(a.finished);
  EXPECT_EQ(S(a.status)["verdict"], "Failed");
  EXPECT_NE(
      S(a.status)["explanation"].get<std::string>().find(
          "variant candidate has a recorded verdict \"Great\" that allocguard does not write"),
      std::string::npos)
      << S(a.status)["explanation"];
}

TEST(ObserveVariantTest, ATerminationMessageWithAnUnknownVerdictIsAResultError) {
  const json pod = {
      {"status",
       {{"containerStatuses",
         {{{"name", api::kDriverContainerName},
           {"state",
            {{"terminated",
              {{"message", R"({"v":1,"verdict":"Great","variant":"candidate"})"}}}}}}}}}}};
  const api::JobSummary job = api::ParseJobSummary(pod);
  VariantObservation o = ObserveVariant("candidate", "job", &job, {api::ParsePodSummary(pod)});
  EXPECT_FALSE(o.result.has_value());
  ASSERT_TRUE(o.result_error.has_value());
  EXPECT_NE(o.result_error->find("\"Great\", which is not one allocguard writes"),
            std::string::npos)
      << *o.result_error;
}

}  // namespace
}  // namespace allocguard::controllers

namespace allocguard::controllers {
namespace {

// DecideCanaryStart, rule by rule (the header's list).

CanarySlotAnswer Queued(int position, int namespace_limit = 0) {
  CanarySlotAnswer slot;
  slot.start = false;
  slot.running = 2;
  slot.running_in_namespace = 1;
  slot.position = position;
  slot.waiting = 3;
  slot.limit = 2;
  slot.namespace_limit = namespace_limit;
  return slot;
}

TEST(DecideCanaryStartTest, AskForASlotOnlyWhenANotRunningCanaryCreatesAJob) {
  CanaryInput in{TwoVariantCanary(), {}, {}, "t"};
  CanaryActions a = DecideCanary(in);
  EXPECT_TRUE(NeedsCanarySlot(in, a)) << "a new canary";
  in.status.phase = api::CanaryPhase::kRunning;
  EXPECT_FALSE(NeedsCanarySlot(in, a)) << "a running canary keeps its slot";
  in.status.phase = api::CanaryPhase::kPending;
  a.create_job_for_variant.reset();
  EXPECT_FALSE(NeedsCanarySlot(in, a)) << "no Job to create";
  CanaryStart start;
  EXPECT_FALSE(WaitsForSlot(start));
  start.slot = CanarySlotAnswer{};
  EXPECT_FALSE(WaitsForSlot(start)) << "the default answer starts";
  start.slot = Queued(1);
  EXPECT_TRUE(WaitsForSlot(start));
}

// A spec that does not parse fails the canary once, naming the field.
TEST(DecideInvalidCanaryTest, FailedStalledWithTheParsersMessageOnce) {
  api::ReplayCanaryStatus current;
  current.phase = api::CanaryPhase::kRunning;
  std::optional<api::ReplayCanaryStatus> failed =
      DecideInvalidCanary(current, 3, "spec.canary.duration: not a duration", "t");
  ASSERT_TRUE(failed.has_value());
  const json s = S(*failed);
  EXPECT_EQ(s["phase"], "Failed");
  EXPECT_EQ(s["verdict"], "Failed");
  EXPECT_EQ(s["explanation"], "invalid ReplayCanary: spec.canary.duration: not a duration");
  EXPECT_EQ(s["completionTime"], "t");
  int invalid = 0;
  for (const json& c : s["conditions"]) {
    if (c["type"] == "Ready") {
      EXPECT_EQ(c["status"], "False");
    }
    if (c["type"] == "Stalled") {
      EXPECT_EQ(c["status"], "True");
    }
    if (c["reason"] == "InvalidSpec") {
      ++invalid;
      EXPECT_EQ(c["message"], "spec.canary.duration: not a duration");
      EXPECT_EQ(c["observedGeneration"], 3);
    }
  }
  EXPECT_EQ(invalid, 2);
  EXPECT_FALSE(DecideInvalidCanary(*failed, 3, "again", "t2").has_value())
      << "Failed already: nothing to write";
}

// Rule 1: a queued canary writes only its queue note onto its current status.
TEST(DecideCanaryStartTest, AQueuedCanaryWritesOnlyItsQueueNote) {
  CanaryInput in{TwoVariantCanary(), {}, {}, "2026-11-29T10:00:00Z"};
  CanaryActions decided = DecideCanary(in);
  decided.delete_jobs = {"leftover"};
  CanaryStart start;
  start.slot = Queued(2);
  CanaryActions a = DecideCanaryStart(in, decided, start);
  EXPECT_TRUE(a.queued);
  EXPECT_TRUE(a.status_changed);
  EXPECT_FALSE(a.create_job_for_variant.has_value());
  EXPECT_TRUE(a.delete_jobs.empty());
  EXPECT_TRUE(a.events.empty());
  EXPECT_TRUE(a.start_events.empty());
  EXPECT_FALSE(a.finished);
  const json s = S(a.status);
  EXPECT_EQ(s["phase"], "Pending");
  EXPECT_EQ(s["queuePosition"], 2);
  EXPECT_EQ(s["explanation"],
            "queued: position 2 of 3 waiting; 2 canaries are running, the limit is 2 "
            "(--max-concurrent-canaries)");
  EXPECT_FALSE(s.contains("startTime")) << "the current status, not the decided one";
  EXPECT_FALSE(s.contains("variants"));

  // Asked again with the same answer: nothing to write.
  in.status = a.status;
  CanaryActions again = DecideCanaryStart(in, DecideCanary(in), start);
  EXPECT_TRUE(again.queued);
  EXPECT_FALSE(again.status_changed);

  // Nor when only the queue grew behind it: a write per waiting canary for
  // every arrival is what a long queue cannot afford.
  CanaryStart longer = start;
  longer.slot->waiting = 9998;
  EXPECT_FALSE(DecideCanaryStart(in, DecideCanary(in), longer).status_changed);
  // Its place, or the slots it waits for, are written.
  CanaryStart moved = start;
  moved.slot->position = 1;
  EXPECT_TRUE(DecideCanaryStart(in, DecideCanary(in), moved).status_changed);
  CanaryStart busier = longer;
  busier.slot->running = 1;
  const CanaryActions busier_actions = DecideCanaryStart(in, DecideCanary(in), busier);
  EXPECT_TRUE(busier_actions.status_changed);
  EXPECT_EQ(S(busier_actions.status)["explanation"],
            "queued: position 2 of 9998 waiting; 1 canaries are running, the limit is 2 "
            "(--max-concurrent-canaries)");

  // A namespace limit is named with the namespace.
  start.slot = Queued(2, 1);
  const std::string why = S(DecideCanaryStart(in, DecideCanary(in), start).status)["explanation"];
  EXPECT_NE(why.find(", 1 in namespace shop, whose limit is 1 "
                     "(--max-concurrent-canaries-per-namespace)"),
            std::string::npos)
      << why;
}

// Rule 2: a canary that runs drops the note and the position.
TEST(DecideCanaryStartTest, ARunningCanaryDropsItsQueueNote) {
  CanaryInput in{TwoVariantCanary(), {}, {}, "t"};
  in.status.phase = api::CanaryPhase::kPending;
  in.status.explanation = "queued: position 1 of 1 waiting";
  in.status.queue_position = 1;
  CanaryStart start;
  start.slot = CanarySlotAnswer{};
  start.job = CanaryJobBuild{};
  CanaryActions a = DecideCanaryStart(in, DecideCanary(in), start);
  EXPECT_FALSE(a.queued);
  EXPECT_TRUE(a.status_changed);
  const json s = S(a.status);
  EXPECT_EQ(s["phase"], "Running");
  EXPECT_FALSE(s.contains("explanation"));
  EXPECT_FALSE(s.contains("queuePosition"));
  ASSERT_TRUE(a.create_job_for_variant.has_value());
  EXPECT_EQ(*a.create_job_for_variant, "candidate");

  // A finished canary keeps its explanation.
  in.status.phase = api::CanaryPhase::kCompleted;
  in.status.verdict = Verdict::kFlat;
  in.status.explanation = "flat";
  CanaryActions done = DecideCanaryStart(in, DecideCanary(in), CanaryStart{});
  EXPECT_EQ(done.status.explanation, "flat");
}

// Rule 3: a Job that cannot be built fails its variant and creates nothing.
TEST(DecideCanaryStartTest, AJobThatCannotBeBuiltFailsTheVariant) {
  CanaryInput in{TwoVariantCanary(), {}, {}, "t"};
  CanaryStart start;
  start.job = CanaryJobBuild{};
  start.job->error = "the template asks for spec.template.spec.hostPID";
  CanaryActions a = DecideCanaryStart(in, DecideCanary(in), start);
  EXPECT_FALSE(a.create_job_for_variant.has_value());
  EXPECT_TRUE(a.status_changed);
  const std::optional<json> candidate = Variant(a.status, "candidate");
  ASSERT_TRUE(candidate.has_value());
  EXPECT_EQ((*candidate)["phase"], "Failed");
  EXPECT_EQ((*candidate)["verdict"], "Failed");
  EXPECT_EQ((*candidate)["message"],
            "cannot build the canary Job: the template asks for spec.template.spec.hostPID");
  ASSERT_EQ(a.start_events.size(), 1u);
  EXPECT_TRUE(a.start_events[0].warning);
  EXPECT_EQ(a.start_events[0].reason, "CanaryJobInvalid");
  EXPECT_EQ(a.start_events[0].note, "the template asks for spec.template.spec.hostPID");
  EXPECT_FALSE(a.status.arena_limit.has_value());
}

// Rule 4: conflicts are warnings; a reproduced arena limit wins over a
// recorded CanaryNode one, and nothing else replaces a recorded limit.
TEST(DecideCanaryStartTest, ABuiltJobRecordsItsConflictsAndTheArenaLimitByPrecedence) {
  CanaryInput in{TwoVariantCanary(), {}, {}, "t"};
  in.canary.spec.canary.production_cpus = 4;
  CanaryStart start;
  start.job = CanaryJobBuild{};
  start.job->arena_limit = {canary::ArenaLimitSource::kCanaryNode, ""};
  start.job->conflicts = {"MALLOC_CONF is set by the workload"};
  CanaryActions a = DecideCanaryStart(in, DecideCanary(in), start);
  ASSERT_TRUE(a.create_job_for_variant.has_value());
  ASSERT_EQ(a.start_events.size(), 1u);
  EXPECT_EQ(a.start_events[0].reason, "InjectionConflict");
  EXPECT_EQ(a.start_events[0].note, "MALLOC_CONF is set by the workload");
  ASSERT_TRUE(a.status.arena_limit.has_value()) << "none recorded: this one is";
  EXPECT_EQ(a.status.arena_limit->source, "CanaryNode");

  // A node selector replaces CanaryNode; glibc's default on such a node.
  in.status = a.status;
  start.job->conflicts.clear();
  start.job->arena_limit = {canary::ArenaLimitSource::kNodeSelector, "pool=big"};
  a = DecideCanaryStart(in, DecideCanary(in), start);
  ASSERT_TRUE(a.status.arena_limit.has_value());
  EXPECT_EQ(a.status.arena_limit->source, "NodeSelector");
  EXPECT_EQ(a.status.arena_limit->value, 32);
  EXPECT_EQ(a.status.arena_limit->production_cpus, 4);
  EXPECT_TRUE(a.start_events.empty());

  // A recorded reproduced limit stays, whatever the next Job shows.
  in.status = a.status;
  start.job->arena_limit = {canary::ArenaLimitSource::kArenaMaxEnv, "2"};
  a = DecideCanaryStart(in, DecideCanary(in), start);
  EXPECT_EQ(a.status.arena_limit->source, "NodeSelector");

  // MALLOC_ARENA_MAX is recorded with its number; one that is not a number
  // without a value.
  in.status.arena_limit.reset();
  a = DecideCanaryStart(in, DecideCanary(in), start);
  EXPECT_EQ(a.status.arena_limit->source, "ArenaMaxEnv");
  EXPECT_EQ(a.status.arena_limit->value, 2);
  start.job->arena_limit = {canary::ArenaLimitSource::kArenaMaxEnv, "many"};
  a = DecideCanaryStart(in, DecideCanary(in), start);
  EXPECT_FALSE(a.status.arena_limit->value.has_value());
}

}  // namespace
}  // namespace allocguard::controllers
