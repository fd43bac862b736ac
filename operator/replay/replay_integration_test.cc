// The replay engine against real processes, a real memory cgroup and the real
// Debian allocators. Needs root (to create cgroups) and the allocator packages
// that scripts/install-deps.sh installs.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "operator/replay/replay_runner.h"

#ifndef ALLOCGUARD_TEST_WORKLOAD
#error "ALLOCGUARD_TEST_WORKLOAD must name the test workload binary"
#endif

namespace allocguard::replay {
namespace {

namespace fs = std::filesystem;

class ReplayIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    out_ = fs::temp_directory_path() /
           ("ag-replay-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(out_);
    fs::create_directories(out_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(out_);
  }

  ReplayOptions Options(const std::vector<std::string>& workload_args) {
    ReplayOptions o;
    o.command = {ALLOCGUARD_TEST_WORKLOAD, "--port", "{port}"};
    for (auto& a : workload_args) o.command.push_back(a);
    o.load.base_url = "http://127.0.0.1:{port}";
    o.load.rate = 20;
    o.load.workers = 2;
    o.load.ready = {.path = "/healthz", .timeout = std::chrono::seconds(10)};
    o.load.requests = {{.name = "work", .path = "/work?k={key}", .key_space = 10}};
    o.duration = std::chrono::seconds(3);
    o.judge.sample_interval_seconds = 0.25;
    o.out_dir = out_.string();
    return o;
  }

  AllocatorVariant Variant(const std::string& spec) {
    AllocatorVariant v = ParseVariant(spec).value();
    auto lib = ResolveAllocatorLibrary(v.allocator, DefaultLibrarySearchDirs());
    EXPECT_TRUE(lib.ok()) << lib.status().ToString();
    v.library = lib.ok() ? *lib : "";
    return v;
  }

  std::string Slurp(const std::string& name) {
    std::ifstream in(out_ / name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  fs::path out_;
};

TEST_F(ReplayIntegrationTest, WorkloadThatExitsAtOnceIsFailedWithExitCodeAndStderr) {
  ReplayOptions o = Options({"--mode", "exit", "--exit-code", "3"});
  o.variants = {Variant("glibc")};
  auto summary = RunReplay(o, RealClock::Get());
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  const VariantResult& v = summary->variants[0];
  EXPECT_EQ(v.verdict.verdict, memory::Verdict::kFailed);
  EXPECT_NE(v.verdict.explanation.find("exit code 3"), std::string::npos) << v.verdict.explanation;
  EXPECT_NE(v.verdict.explanation.find("configuration missing, giving up"), std::string::npos)
      << v.verdict.explanation;
  EXPECT_EQ(summary->overall.verdict, Verdict::kFailed);
  EXPECT_EQ(memory::ExitCodeForVerdict(summary->overall.verdict), 7);
}

TEST_F(ReplayIntegrationTest, JemallocVariantRunsInItsOwnCgroupWithTheLibraryMapped) {
  ReplayOptions o = Options({});
  o.variants = {Variant("jemalloc,MALLOC_CONF=dirty_decay_ms:1000")};
  auto summary = RunReplay(o, RealClock::Get());
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  const VariantResult& v = summary->variants[0];
  EXPECT_NE(v.verdict.verdict, memory::Verdict::kFailed) << v.verdict.explanation;
  std::string csv = Slurp("jemalloc.csv");
  EXPECT_NE(csv.find("# event: allocator loaded: " + o.variants[0].library), std::string::npos)
      << csv;
  EXPECT_NE(csv.find("# env: MALLOC_CONF=dirty_decay_ms:1000"), std::string::npos);
  auto run = ReadSampleCsv((out_ / "jemalloc.csv").string());
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->Header("cgroup").rfind('v', 0), 0u) << run->Header("cgroup");
  ASSERT_GE(run->rows.size(), 8u);
  const SampleRow& last = run->rows.back();
  EXPECT_TRUE(last.memory.cgroup_anon_bytes.has_value());
  EXPECT_GT(last.memory.anon_bytes, 0);
  EXPECT_GT(last.completed, 20);
  EXPECT_EQ(last.errors, 0);
  // The per-variant JSON and the summary are written.
  EXPECT_NE(Slurp("jemalloc.json").find("\"variant\": \"jemalloc\""), std::string::npos);
  EXPECT_NE(Slurp("summary.json").find("\"variants\""), std::string::npos);
  // The cgroup is removed after the run.
  std::string cgroup = run->Header("cgroup").substr(3);
  EXPECT_FALSE(fs::exists(cgroup)) << cgroup;
}

TEST_F(ReplayIntegrationTest, CgroupLimitReachedIsOOMKilledWithTheMinute) {
  ReplayOptions o = Options({"--mode", "grow", "--grow-mib", "8"});
  o.variants = {Variant("glibc")};
  o.memory_limit_bytes = int64_t{64} << 20;
  o.duration = std::chrono::seconds(20);
  auto summary = RunReplay(o, RealClock::Get());
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  const VariantResult& v = summary->variants[0];
  EXPECT_EQ(v.verdict.verdict, memory::Verdict::kOOMKilled) << v.verdict.explanation;
  EXPECT_EQ(v.oom_minute, 0);
  EXPECT_EQ(memory::ExitCodeForVerdict(summary->overall.verdict), 5);
}

TEST_F(ReplayIntegrationTest, WithoutACgroupItSaysSoAndSamplesProcOnly) {
  ReplayOptions o = Options({});
  o.variants = {Variant("glibc")};
  o.use_cgroup = false;
  std::vector<std::string> progress;
  o.progress = [&](const std::string& line) { progress.push_back(line); };
  auto summary = RunReplay(o, RealClock::Get());
  ASSERT_TRUE(summary.ok());
  auto run = ReadSampleCsv((out_ / "glibc.csv").string()).value();
  EXPECT_EQ(run.Header("cgroup"), "none: disabled by --no-cgroup");
  EXPECT_FALSE(run.rows.back().memory.cgroup_anon_bytes.has_value());
  EXPECT_GT(run.rows.back().memory.anon_bytes, 0);
  bool said = false;
  for (const auto& l : progress) said = said || l.find("sampling /proc only") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST_F(ReplayIntegrationTest, UnexpectedStatusesGoToTheErrorsFile) {
  ReplayOptions o = Options({});
  o.variants = {Variant("glibc")};
  o.load.requests = {{.name = "missing", .path = "/nope?k={key}", .key_space = 5, .expect = {200}}};
  auto summary = RunReplay(o, RealClock::Get());
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->variants[0].verdict.verdict, memory::Verdict::kErrors);
  std::string errors = Slurp("glibc.errors");
  EXPECT_NE(errors.find(",missing,GET,/nope?k="), std::string::npos) << errors;
  EXPECT_NE(errors.find(",404,"), std::string::npos) << errors;
}

TEST_F(ReplayIntegrationTest, VariantsRunOneAfterAnotherOnTheSameLoad) {
  ReplayOptions o = Options({});
  o.variants = {Variant("glibc"), Variant("tcmalloc"), Variant("mimalloc")};
  auto summary = RunReplay(o, RealClock::Get());
  ASSERT_TRUE(summary.ok());
  ASSERT_EQ(summary->variants.size(), 3u);
  std::vector<std::string> firsts;
  for (const auto& v : summary->variants) {
    EXPECT_NE(v.verdict.verdict, memory::Verdict::kFailed)
        << v.variant << ": " << v.verdict.explanation;
    auto run = ReadSampleCsv((out_ / (v.variant + ".csv")).string()).value();
    // Same seed and spec: the same number of requests released in the same time.
    EXPECT_GT(run.rows.back().completed, 20) << v.variant;
  }
}

}  // namespace
}  // namespace allocguard::replay
