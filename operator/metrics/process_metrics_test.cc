#include "operator/metrics/process_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "operator/common/version.h"

namespace allocguard::metrics {
namespace {

using ::testing::HasSubstr;

namespace fs = std::filesystem;

// utime=250 stime=50 starttime=12345 at field 14, 15, 22; a command name with
// spaces and parentheses.
constexpr char kStat[] =
    "4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 7 0 12345 "
    "100000000 2000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
constexpr char kStatus[] =
    "Name:\tmy (odd) cmd\nVmPeak:\t  300000 kB\nVmSize:\t  200000 kB\nVmRSS:\t    8000 kB\n"
    "RssAnon:\t    5000 kB\nThreads:\t7\n";
constexpr char kSystemStat[] = "cpu  1 2 3 4\nintr 5\nbtime 1700000000\nprocesses 9\n";
constexpr char kLimits[] =
    "Limit                     Soft Limit           Hard Limit           Units     \n"
    "Max open files            1024                 524288               files     \n";

TEST(ProcessMetricsTest, ParsesStatTimesPastAParenthesizedName) {
  auto times = ParseProcStat(kStat, 100);
  ASSERT_TRUE(times.ok()) << times.status().ToString();
  EXPECT_DOUBLE_EQ(times->cpu_seconds, 3.0);
  EXPECT_DOUBLE_EQ(times->start_seconds_since_boot, 123.45);
}

TEST(ProcessMetricsTest, RejectsTruncatedStat) {
  EXPECT_FALSE(ParseProcStat("1 (x) S 1 2 3", 100).ok());
  EXPECT_FALSE(ParseProcStat("no parenthesis", 100).ok());
}

TEST(ProcessMetricsTest, ParsesBootTimeStatusFieldsAndLimits) {
  auto boot = ParseBootTime(kSystemStat);
  ASSERT_TRUE(boot.ok());
  EXPECT_EQ(*boot, 1700000000);
  EXPECT_FALSE(ParseBootTime("cpu 1 2\n").ok());
  EXPECT_EQ(StatusFieldBytes(kStatus, "VmRSS"), 8000 * 1024);
  EXPECT_EQ(StatusFieldBytes(kStatus, "RssAnon"), 5000 * 1024);
  EXPECT_EQ(StatusFieldBytes(kStatus, "RssShmem"), std::nullopt);
  EXPECT_EQ(ParseMaxOpenFiles(kLimits), 1024);
  EXPECT_EQ(ParseMaxOpenFiles("Max open files            unlimited            unlimited   files\n"),
            std::nullopt);
}

class FakeProcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("ag-metrics-proc-" + std::to_string(getpid()));
    fs::create_directories(root_ / "self" / "fd");
    Write("self/stat", kStat);
    Write("self/status", kStatus);
    Write("self/limits", kLimits);
    Write("stat", kSystemStat);
    for (const char* fd : {"0", "1", "2", "7"}) Write(std::string("self/fd/") + fd, "");
  }
  void TearDown() override { fs::remove_all(root_); }
  void Write(const std::string& rel, const std::string& text) {
    std::ofstream(root_ / rel) << text;
  }
  fs::path root_;
};

TEST_F(FakeProcTest, ReaderCombinesTheFiles) {
  auto stats = ProcessStatsReader(root_.string()).Read();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  const auto ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  EXPECT_DOUBLE_EQ(stats->cpu_seconds, 300 / ticks);
  EXPECT_DOUBLE_EQ(stats->start_time_seconds, 1700000000 + 12345 / ticks);
  EXPECT_EQ(stats->resident_bytes, 8000 * 1024);
  EXPECT_EQ(stats->virtual_bytes, 200000 * 1024);
  EXPECT_EQ(stats->open_fds, 4);
  EXPECT_EQ(stats->max_fds, 1024);
}

TEST_F(FakeProcTest, CollectorRendersTheStandardNames) {
  Registry registry;
  AddProcessMetrics(registry, ProcessStatsReader(root_.string()));
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("# TYPE process_cpu_seconds_total counter\n"));
  EXPECT_THAT(text, HasSubstr("process_resident_memory_bytes 8192000\n"));
  EXPECT_THAT(text, HasSubstr("process_virtual_memory_bytes 204800000\n"));
  EXPECT_THAT(text, HasSubstr("process_open_fds 4\n"));
  EXPECT_THAT(text, HasSubstr("process_max_fds 1024\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE process_start_time_seconds gauge\n"));
}

TEST(BuildInfoTest, NamesTheVersionOfTheVersionFile) {
  Registry registry;
  AddBuildInfo(registry);
  EXPECT_THAT(registry.Render(),
              HasSubstr("allocguard_build_info{version=\"" + std::string(Version()) + "\"} 1\n"));
  EXPECT_FALSE(Version().empty());
}

TEST_F(FakeProcTest, CollectorRendersNothingWhenProcIsUnreadable) {
  fs::remove(root_ / "self" / "stat");
  Registry registry;
  registry.AddGauge("up", "h");
  AddProcessMetrics(registry, ProcessStatsReader(root_.string()));
  EXPECT_EQ(registry.Render(), "# HELP up h\n# TYPE up gauge\nup 0\n");
}

TEST(ProcessMetricsRealProcTest, ReadsThisProcess) {
  auto stats = ProcessStatsReader().Read();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_GT(stats->resident_bytes, 0);
  EXPECT_GE(stats->virtual_bytes, stats->resident_bytes);
  EXPECT_GE(stats->open_fds, 3);  // stdin, stdout, stderr
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // This test process started within the last day, not in the future (the
  // clock-tick rounding allows a second).
  EXPECT_LE(stats->start_time_seconds, now + 1);
  EXPECT_GT(stats->start_time_seconds, now - 86400);
}

}  // namespace
}  // namespace allocguard::metrics
