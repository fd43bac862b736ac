// The replay engine over a scripted machine (replay_env_for_test.h): the
// verdicts and the files a user reads, for a ratchet, a flat run, a workload
// that exits early, an OOM kill, and the ways a run fails before it measures.
// replay_integration_test.cc runs the same engine against real processes.

#include "operator/replay/replay_runner.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "operator/replay/in_pod.h"
#include "operator/replay/replay_env_for_test.h"
#include "operator/replay/sample_csv.h"

namespace allocguard::replay {
namespace {

namespace fs = std::filesystem;
using memory::kBytesPerMiB;
using memory::Verdict;

constexpr double kGiB = 1024 * kBytesPerMiB;

// A floor that moves by up to ±2 MiB from minute to minute, with samples up
// to 4 MiB above it within the minute, plus `gib_per_hour` of growth.
std::function<int64_t(double)> Memory(double gib_per_hour) {
  return [gib_per_hour](double t) {
    const int minute = static_cast<int>(t / 60);
    const double wobble = std::sin(minute * 12.9898) * 2 * kBytesPerMiB;
    const double within = static_cast<double>(static_cast<int>(t / 2) % 5) * kBytesPerMiB;
    return static_cast<int64_t>(300 * kBytesPerMiB + wobble + within +
                                gib_per_hour * kGiB * t / 3600);
  };
}

class ReplayRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    out_ = fs::temp_directory_path() /
           ("ag-replay-runner-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(out_);
    fs::create_directories(out_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(out_);
  }

  ReplayOptions Options() {
    ReplayOptions o;
    o.command = {"server", "--port", "{port}"};
    o.variants = {{.name = "glibc"}};
    o.load.base_url = "http://127.0.0.1:{port}";
    o.load.rate = 10;
    o.load.ready = {.path = "/healthz", .timeout = std::chrono::seconds(5)};
    o.load.requests = {{.name = "work", .path = "/work"}};
    o.duration = std::chrono::minutes(15);
    o.out_dir = out_.string();
    o.env = &env_;
    o.progress = [this](const std::string& line) { progress_ += line + "\n"; };
    return o;
  }

  CsvRun Csv(const std::string& variant) {
    auto run = ReadSampleCsv((out_ / (variant + ".csv")).string());
    EXPECT_TRUE(run.ok()) << run.status().ToString();
    return run.ok() ? *run : CsvRun{};
  }

  std::string Slurp(const std::string& name) {
    std::ifstream in(out_ / name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  fs::path out_;
  FakeClock clock_;
  FakeReplayEnv env_{&clock_};
  std::string progress_;
};

TEST_F(ReplayRunnerTest, AGrowingFloorIsARatchetAndTheRunStopsAtTheDecision) {
  env_.anon_bytes = Memory(3);
  auto summary = RunReplay(Options(), &clock_);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  const VariantResult& r = summary->variants.front();
  EXPECT_EQ(r.verdict.verdict, Verdict::kRatchet) << r.verdict.explanation;
  EXPECT_EQ(summary->overall.verdict, Verdict::kRatchet);
  ASSERT_TRUE(r.decided_at_minute.has_value());
  EXPECT_LT(*r.decided_at_minute, 15);

  // The port was chosen for the run and given to the workload and the load.
  ASSERT_EQ(env_.launches.size(), 1u);
  EXPECT_EQ(env_.launches[0].argv, (std::vector<std::string>{"server", "--port", "40000"}));
  EXPECT_EQ(env_.launches[0].cgroup_procs_path,
            "/fake/cgroup/" + env_.cgroups_created.at(0) + "/cgroup.procs");
  EXPECT_EQ(env_.stops, 1);

  CsvRun csv = Csv("glibc");
  EXPECT_EQ(csv.Header("variant"), "glibc");
  EXPECT_EQ(csv.Header("allocator"), "glibc");
  EXPECT_EQ(csv.Header("command"), "server --port 40000");
  EXPECT_EQ(csv.Header("base_url"), "http://127.0.0.1:40000");
  EXPECT_EQ(csv.Header("cgroup"), "v2 /fake/cgroup/allocguard-glibc-" + std::to_string(getpid()));
  // One row every 2 s up to the minute the judge decided in.
  ASSERT_FALSE(csv.rows.empty());
  EXPECT_DOUBLE_EQ(csv.rows[0].memory.t_seconds, 0);
  EXPECT_DOUBLE_EQ(csv.rows[1].memory.t_seconds, 2);
  EXPECT_EQ(csv.rows[0].memory.anon_bytes, Memory(3)(0));
  EXPECT_EQ(csv.rows[0].memory.cgroup_anon_bytes, Memory(3)(0));
  EXPECT_EQ(csv.rows[30].completed, 600);  // 10 requests/s for 60 s
  EXPECT_NEAR(csv.rows.back().memory.t_seconds, 60.0 * (*r.decided_at_minute + 1), 2.01);
  ASSERT_EQ(csv.events.size(), 2u);
  EXPECT_EQ(FormatRunEvent(csv.events[0]),
            "decided: Ratchet at minute " + std::to_string(*r.decided_at_minute));
  EXPECT_EQ(FormatRunEvent(csv.events[1]), "latency: p50_ms=1.5 p99_ms=9.2 max_ms=20.0");
  EXPECT_EQ(r.p99_ms, 9.2);
  // `allocguard analyze` of the CSV agrees with the live run.
  JudgeSettings settings;
  settings.FromHeader(csv);
  VariantResult again = AnalyzeRun(csv, settings, /*finished=*/true);
  EXPECT_EQ(again.verdict.verdict, r.verdict.verdict);
  EXPECT_EQ(again.decided_at_minute, r.decided_at_minute);
  EXPECT_EQ(again.p99_ms, r.p99_ms);

  // The result files say the same.
  EXPECT_NE(Slurp("glibc.json").find("\"verdict\": \"Ratchet\""), std::string::npos);
  EXPECT_NE(Slurp("summary.json").find("\"verdict\": \"Ratchet\""), std::string::npos);
  EXPECT_NE(progress_.find("glibc: started pid 4242 (glibc)"), std::string::npos) << progress_;
  EXPECT_NE(progress_.find("glibc: stopped (killed by signal 15 (SIGTERM))"), std::string::npos)
      << progress_;
}

TEST_F(ReplayRunnerTest, AFlatFloorIsFlatForEveryVariant) {
  env_.anon_bytes = Memory(0);
  ReplayOptions o = Options();
  o.variants = {{.name = "glibc"},
                {.name = "jemalloc",
                 .allocator = Allocator::kJemalloc,
                 .library = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"}};
  auto summary = RunReplay(o, &clock_);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  ASSERT_EQ(summary->variants.size(), 2u);
  for (const VariantResult& r : summary->variants) {
    EXPECT_EQ(r.verdict.verdict, Verdict::kFlat) << r.variant << ": " << r.verdict.explanation;
    EXPECT_FALSE(r.failure.has_value());
  }
  EXPECT_EQ(summary->overall.verdict, Verdict::kFlat);
  EXPECT_EQ(env_.launches.size(), 2u);
  EXPECT_EQ(env_.launches[1].env.at("LD_PRELOAD"), "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2");

  CsvRun jemalloc = Csv("jemalloc");
  EXPECT_EQ(jemalloc.Header("allocator"), "jemalloc");
  EXPECT_EQ(jemalloc.Header("library"), "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2");
  ASSERT_FALSE(jemalloc.events.empty());
  EXPECT_EQ(FormatRunEvent(jemalloc.events[0]),
            "allocator loaded: /usr/lib/x86_64-linux-gnu/libjemalloc.so.2");
  EXPECT_EQ(jemalloc.events[1].kind, RunEventKind::kDecided);
  EXPECT_EQ(jemalloc.events[1].text, "Flat");
  for (const SampleRow& row : jemalloc.rows) {
    EXPECT_GE(row.memory.anon_bytes, 298 * kBytesPerMiB);
    EXPECT_LE(row.memory.anon_bytes, 306 * kBytesPerMiB);
  }
}

// --no-early-stop: a floor the judge calls Flat after a few minutes still
// runs its whole duration (before, the live judge stopped it all the same).
TEST_F(ReplayRunnerTest, WithoutEarlyStopAFlatRunLastsItsDuration) {
  env_.anon_bytes = Memory(0);
  ReplayOptions o = Options();
  o.judge.early_stop = false;
  auto summary = RunReplay(o, &clock_);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->variants.front().verdict.verdict, Verdict::kFlat);
  CsvRun csv = Csv("glibc");
  ASSERT_FALSE(csv.rows.empty());
  EXPECT_GE(csv.rows.back().memory.t_seconds, 15 * 60 - 2) << "sampled to the end of 15 minutes";
  for (const RunEvent& e : csv.events) EXPECT_NE(e.kind, RunEventKind::kDecided);
}

TEST_F(ReplayRunnerTest, AWorkloadThatExitsEarlyFailsWithTheMinuteAndItsStderr) {
  env_.exit_at = 150;
  env_.exit_code = 3;
  env_.stderr_text = "starting\npanic: out of cheese\n";
  auto summary = RunReplay(Options(), &clock_);
  ASSERT_TRUE(summary.ok());
  const VariantResult& r = summary->variants.front();
  EXPECT_EQ(r.verdict.verdict, Verdict::kFailed);
  EXPECT_EQ(r.exit_minute, 2);
  ASSERT_TRUE(r.failure.has_value());
  EXPECT_EQ(*r.failure,
            "the workload died during the run in minute 2 (exit code 3); last stderr lines: "
            "starting\npanic: out of cheese");

  CsvRun csv = Csv("glibc");
  EXPECT_EQ(csv.rows.size(), 75u);  // t = 0, 2, ..., 148
  ASSERT_GE(csv.events.size(), 2u);
  EXPECT_EQ(csv.events[0], RunEvent::Exited(2));
  // The CSV line holds the failure on one line.
  EXPECT_NE(Slurp("glibc.csv")
                .find("\n# event: failed: the workload died during the run in "
                      "minute 2 (exit code 3); last stderr lines: starting "
                      "panic: out of cheese\n"),
            std::string::npos)
      << Slurp("glibc.csv");
}

TEST_F(ReplayRunnerTest, AnOomKillIsOOMKilledNotFailed) {
  env_.anon_bytes = Memory(1);
  env_.oom_at = 200;
  ReplayOptions o = Options();
  o.judge.early_stop = false;
  auto summary = RunReplay(o, &clock_);
  ASSERT_TRUE(summary.ok());
  const VariantResult& r = summary->variants.front();
  EXPECT_EQ(r.verdict.verdict, Verdict::kOOMKilled) << r.verdict.explanation;
  EXPECT_EQ(r.oom_minute, 3);
  EXPECT_FALSE(r.exit_minute.has_value());

  CsvRun csv = Csv("glibc");
  EXPECT_EQ(csv.rows.size(), 100u);  // t = 0, 2, ..., 198
  for (const SampleRow& row : csv.rows) EXPECT_EQ(row.oom_kills, 0);
  ASSERT_FALSE(csv.events.empty());
  EXPECT_EQ(csv.events[0], RunEvent::Oom(3));
}

TEST_F(ReplayRunnerTest, WithoutACgroupTheRunSamplesProcOnlyAndSaysSo) {
  env_.cgroup_error = "no memory controller";
  env_.exit_at = 30;
  auto summary = RunReplay(Options(), &clock_);
  ASSERT_TRUE(summary.ok());
  CsvRun csv = Csv("glibc");
  EXPECT_EQ(csv.Header("cgroup"), "none: no memory controller");
  ASSERT_FALSE(csv.rows.empty());
  EXPECT_FALSE(csv.rows[0].memory.cgroup_anon_bytes.has_value());
  EXPECT_EQ(env_.launches.at(0).cgroup_procs_path, "");
  EXPECT_NE(progress_.find("glibc: no memory cgroup (no memory controller); sampling /proc only"),
            std::string::npos)
      << progress_;
}

TEST_F(ReplayRunnerTest, RunsThatNeverMeasureFailWithTheReason) {
  env_.not_ready_answers = 1000;
  auto not_ready = RunReplay(Options(), &clock_);
  ASSERT_TRUE(not_ready.ok());
  EXPECT_EQ(not_ready->variants[0].verdict.verdict, Verdict::kFailed);
  EXPECT_EQ(not_ready->variants[0].failure,
            "workload not ready: not ready after 5.000000 s: GET /healthz answered 503");
  EXPECT_TRUE(Csv("glibc").rows.empty());

  FakeReplayEnv ignored_preload(&clock_);
  ignored_preload.mapped_libraries = std::vector<std::string>{"/lib/x86_64-linux-gnu/libc.so.6"};
  ReplayOptions o = Options();
  o.env = &ignored_preload;
  o.variants = {{.name = "tcmalloc", .allocator = Allocator::kTcmalloc, .library = "/l/tc.so"}};
  auto summary = RunReplay(o, &clock_);
  ASSERT_TRUE(summary.ok());
  ASSERT_TRUE(summary->variants[0].failure.has_value());
  EXPECT_EQ(summary->variants[0].failure->rfind("/l/tc.so is not mapped into the workload", 0), 0u)
      << *summary->variants[0].failure;
}

TEST_F(ReplayRunnerTest, AnAttachedPidIsMeasuredInItsOwnCgroup) {
  ReplayOptions o = Options();
  o.attach_pid = 77;
  o.attach_name = "web";
  o.attach_allocator = "jemalloc";
  env_.exit_at = 61;
  auto summary = RunReplay(o, &clock_);
  ASSERT_TRUE(summary.ok());
  EXPECT_TRUE(env_.launches.empty());
  const VariantResult& r = summary->variants.front();
  EXPECT_EQ(r.variant, "web");
  EXPECT_EQ(r.failure, "the workload died during the run in minute 1 (process is gone)");
  CsvRun csv = Csv("web");
  EXPECT_EQ(csv.Header("attached_pid"), "77");
  EXPECT_EQ(csv.Header("allocator"), "jemalloc");
  EXPECT_EQ(csv.Header("cgroup"), "v2 /fake/cgroup/of-77");
}

// The in-pod driver's options as a canary Job passes them: the demo's load
// on port 8080, fifteen minutes, one variant writing into `out`.
InPodOptions InPodFor(const fs::path& out, ReplayEnv* env, const std::string& allocator) {
  InPodOptions o;
  o.load_text = "rate: 5\nready:\n  path: /healthz\nrequests:\n  - path: /a\n";
  o.port = 8080;
  o.duration = std::chrono::minutes(15);
  o.variant = "candidate";
  o.allocator = allocator;
  o.out_dir = (out / "in-pod").string();
  o.termination_log = (out / "termination-log").string();
  o.env = env;
  return o;
}

TEST_F(ReplayRunnerTest, TheInPodDriverMeasuresThePodsProcessesAnonOnly) {
  env_.processes = {{.pid = 1, .ppid = 0, .comm = "pause", .state = 'S'},
                    {.pid = 7, .ppid = 0, .comm = "server", .state = 'S'}};
  env_.live_pids = {7};
  env_.anon_bytes = Memory(0);
  const InPodOptions o = InPodFor(out_, &env_, "mimalloc");
  auto result = RunInPod(o, &clock_);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->verdict, Verdict::kFlat) << result->message;
  EXPECT_TRUE(result->anon_only);
  EXPECT_FALSE(Slurp("termination-log").empty());

  auto csv = ReadSampleCsv(o.out_dir + "/candidate.csv");
  ASSERT_TRUE(csv.ok());
  EXPECT_EQ(csv->Header("attached_pid"), "processes of the pod");
  EXPECT_EQ(csv->Header("base_url"), "http://127.0.0.1:8080");
  EXPECT_EQ(csv->Header("cgroup"),
            "none: the workload's cgroup is not visible from the driver; RssAnon only");
  ASSERT_FALSE(csv->rows.empty());
  EXPECT_FALSE(csv->rows[0].memory.cgroup_anon_bytes.has_value());
  EXPECT_EQ(csv->rows[0].processes, 1);
}

InPodOptions InPodWithBooks(const fs::path& out, ReplayEnv* env) {
  InPodOptions o = InPodFor(out, env, "glibc");
  o.books_dir = "/var/run/allocguard/books";
  return o;
}

// The demo's glibc ratchet as the stats agent sees it: the floor climbs
// 3 GiB/h, the program's own bytes stay level and the arenas keep the rest.
// The judge decides alone (Ratchet); the books say which figure climbed, in
// the result, its termination message and the CSV.
TEST_F(ReplayRunnerTest, TheInPodDriverRecordsTheBooksAndTheirReadingExplainsTheVerdict) {
  env_.processes = {{.pid = 7, .ppid = 0, .comm = "server", .state = 'S'}};
  env_.live_pids = {7};
  env_.anon_bytes = Memory(3);
  env_.books = [](double t) {
    AllocatorBooks b;
    b.pid = 7;
    b.allocator = BooksAllocator::kGlibc;
    b.in_use_bytes = static_cast<uint64_t>(250 * kBytesPerMiB);
    b.retained_bytes = static_cast<uint64_t>(20 * kBytesPerMiB + 3 * kGiB * t / 3600);
    return std::optional<std::vector<AllocatorBooks>>({b});
  };
  auto result = RunInPod(InPodWithBooks(out_, &env_), &clock_);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->verdict, Verdict::kRatchet) << result->message;
  EXPECT_EQ(result->books_reading, BooksReading::kRetention) << result->message;
  EXPECT_NE(result->message.find("in-use flat ("), std::string::npos) << result->message;
  EXPECT_NE(result->message.find("retained climbing (+3.00 GiB/h)"), std::string::npos)
      << result->message;
  EXPECT_EQ(result->in_use_floors_mib.size(), result->retained_floors_mib.size());
  ASSERT_GE(result->in_use_floors_mib.size(), 3u);
  EXPECT_DOUBLE_EQ(result->in_use_floors_mib.front(), 250);
  EXPECT_GT(result->retained_floors_mib.back(), result->retained_floors_mib.front());
  EXPECT_FALSE(env_.books_dirs_read.empty());
  EXPECT_EQ(env_.books_dirs_read.front(), "/var/run/allocguard/books");

  auto written = DecodeCanaryResult(Slurp("termination-log"));
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(written->books_reading, BooksReading::kRetention);
  EXPECT_EQ(written->retained_floors_mib.size(), result->retained_floors_mib.size());

  auto csv = ReadSampleCsv((out_ / "in-pod" / "candidate.csv").string());
  ASSERT_TRUE(csv.ok()) << csv.status().ToString();
  EXPECT_EQ(csv->Header("books_dir"), "/var/run/allocguard/books");
  ASSERT_FALSE(csv->rows.empty());
  EXPECT_EQ(csv->rows[0].books_in_use_bytes, static_cast<int64_t>(250 * kBytesPerMiB));
  EXPECT_EQ(csv->rows[0].books_processes, 1);
}

// A leak: the program's own bytes climb with the floor.
TEST_F(ReplayRunnerTest, BooksWithInUseClimbingReadAsALeak) {
  env_.processes = {{.pid = 7, .ppid = 0, .comm = "server", .state = 'S'}};
  env_.live_pids = {7};
  env_.anon_bytes = Memory(3);
  env_.books = [](double t) {
    AllocatorBooks b;
    b.pid = 7;
    b.allocator = BooksAllocator::kJemalloc;
    b.in_use_bytes = static_cast<uint64_t>(250 * kBytesPerMiB + 3 * kGiB * t / 3600);
    b.retained_bytes = static_cast<uint64_t>(20 * kBytesPerMiB);
    return std::optional<std::vector<AllocatorBooks>>({b});
  };
  auto result = RunInPod(InPodWithBooks(out_, &env_), &clock_);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->verdict, Verdict::kRatchet) << result->message;
  EXPECT_EQ(result->books_reading, BooksReading::kLeak) << result->message;
  EXPECT_NE(result->message.find("in-use climbing (+3.00 GiB/h)"), std::string::npos)
      << result->message;
}

// Without books (no agent, an allocator without a split, a stale file) the
// result carries none and the explanation is the judge's alone.
TEST_F(ReplayRunnerTest, WithoutBooksTheResultHasNoneAndTheVerdictIsTheSame) {
  env_.processes = {{.pid = 7, .ppid = 0, .comm = "server", .state = 'S'}};
  env_.live_pids = {7};
  env_.anon_bytes = Memory(3);
  env_.books = [](double) {
    AllocatorBooks no_split;  // mimalloc's release builds report no split
    no_split.pid = 7;
    no_split.allocator = BooksAllocator::kMimalloc;
    return std::optional<std::vector<AllocatorBooks>>({no_split});
  };
  auto with_agent = RunInPod(InPodWithBooks(out_, &env_), &clock_);
  ASSERT_TRUE(with_agent.ok()) << with_agent.status().ToString();
  EXPECT_FALSE(with_agent->books_reading.has_value());
  EXPECT_EQ(with_agent->message.find("books"), std::string::npos) << with_agent->message;
  auto csv = ReadSampleCsv((out_ / "in-pod" / "candidate.csv").string());
  ASSERT_TRUE(csv.ok());
  ASSERT_FALSE(csv->rows.empty());
  EXPECT_EQ(csv->rows[0].books_processes, 1);
  EXPECT_FALSE(csv->rows[0].books_in_use_bytes.has_value());

  FakeClock clock;
  FakeReplayEnv env{&clock};
  env.processes = env_.processes;
  env.live_pids = env_.live_pids;
  env.anon_bytes = Memory(3);
  InPodOptions no_dir = InPodWithBooks(out_ / "no-dir", &env);
  no_dir.books_dir.clear();
  fs::create_directories(out_ / "no-dir");
  auto without = RunInPod(no_dir, &clock);
  ASSERT_TRUE(without.ok()) << without.status().ToString();
  EXPECT_TRUE(env.books_dirs_read.empty());
  EXPECT_FALSE(without->books_reading.has_value());
  EXPECT_EQ(without->verdict, with_agent->verdict);
  EXPECT_EQ(without->message, with_agent->message);
}

TEST_F(ReplayRunnerTest, TheInPodDriverFailsWhenNoWorkloadProcessAppears) {
  env_.processes = {{.pid = 1, .ppid = 0, .comm = "pause", .state = 'S'}};
  InPodOptions o;
  o.load_text = "rate: 5\nready:\n  path: /healthz\n  timeout: 3s\nrequests:\n  - path: /a\n";
  o.port = 8080;
  o.out_dir = (out_ / "in-pod").string();
  o.termination_log = (out_ / "termination-log").string();
  o.env = &env_;
  auto result = RunInPod(o, &clock_);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->verdict, Verdict::kFailed);
  EXPECT_NE(result->message.find("no workload process appeared in the pod"), std::string::npos)
      << result->message;
}

}  // namespace
}  // namespace allocguard::replay
