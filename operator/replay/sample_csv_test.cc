#include "operator/replay/sample_csv.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace allocguard::replay {
namespace {

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("ag-csv-" + std::to_string(getpid()) + "-" + name))
      .string();
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(SampleCsvTest, WrittenLineByLineAndReadBack) {
  std::string path = TempPath("roundtrip.csv");
  {
    auto w = SampleCsvWriter::Open(path, {{"variant", "glibc"}, {"env", "MALLOC_ARENA_MAX=2"}});
    ASSERT_TRUE(w.ok());
    SampleRow a;
    a.memory.t_seconds = 2;
    a.memory.anon_bytes = 1000;
    a.memory.rss_bytes = 5000;
    a.memory.cgroup_dirty_bytes = 24;
    a.memory.cgroup_writeback_bytes = 0;
    a.cpu_seconds = 1.5;
    a.completed = 40;
    a.late = 1;
    ASSERT_TRUE(w->Append(a).ok());
    // Already on disk before the writer is closed: a killed run keeps it.
    EXPECT_NE(Slurp(path).find("\n2.000,1000,5000,,24,0,,1024,1.50,"), std::string::npos)
        << Slurp(path);
    SampleRow b;
    b.memory.t_seconds = 4;
    b.memory.anon_bytes = 2000;
    ASSERT_TRUE(w->Append(b).ok());
    ASSERT_TRUE(w->AppendEvent(RunEvent::Failed("exit code 3")).ok());
  }
  auto run = ReadSampleCsv(path);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->Header("variant"), "glibc");
  EXPECT_EQ(run->Header("env"), "MALLOC_ARENA_MAX=2");
  ASSERT_EQ(run->rows.size(), 2u);
  EXPECT_EQ(run->rows[0].memory.JudgedBytes(), 1024);
  EXPECT_FALSE(run->rows[0].memory.cgroup_anon_bytes.has_value());
  EXPECT_EQ(run->rows[0].late, 1);
  EXPECT_EQ(run->rows[1].memory.anon_bytes, 2000);
  EXPECT_NE(Slurp(path).find("\n# event: failed: exit code 3\n"), std::string::npos);
  EXPECT_EQ(run->events, std::vector<RunEvent>{RunEvent::Failed("exit code 3")});
  std::filesystem::remove(path);
}

TEST(SampleCsvTest, TheBooksColumnsAreWrittenAndReadBack) {
  std::string path = TempPath("books.csv");
  {
    auto w = SampleCsvWriter::Open(path, {{"variant", "glibc"}});
    ASSERT_TRUE(w.ok());
    SampleRow a;
    a.memory.t_seconds = 2;
    a.memory.anon_bytes = 1000;
    a.books_in_use_bytes = 700;
    a.books_retained_bytes = 200;
    a.books_processes = 2;
    ASSERT_TRUE(w->Append(a).ok());
    SampleRow b;  // the agent published nothing (yet)
    b.memory.t_seconds = 4;
    b.memory.anon_bytes = 1000;
    ASSERT_TRUE(w->Append(b).ok());
  }
  EXPECT_NE(
      Slurp(path).find(",oom_kills,books_in_use_bytes,books_retained_bytes,books_processes\n"),
      std::string::npos)
      << Slurp(path);
  auto run = ReadSampleCsv(path);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->rows.size(), 2u);
  EXPECT_EQ(run->rows[0].books_in_use_bytes, 700);
  EXPECT_EQ(run->rows[0].books_retained_bytes, 200);
  EXPECT_EQ(run->rows[0].books_processes, 2);
  EXPECT_FALSE(run->rows[1].books_in_use_bytes.has_value());
  EXPECT_EQ(run->rows[1].books_processes, 0);
  std::filesystem::remove(path);
}

// Runs recorded before the books columns (18 columns) still read, without books.
TEST(SampleCsvTest, AFileWithoutTheBooksColumnsStillReads) {
  auto run = ParseSampleCsv(
      "# variant: x\n"
      "t_s,anon_bytes,rss_bytes,cg_anon_bytes,cg_dirty_bytes,cg_writeback_bytes,cg_usage_bytes,"
      "judged_bytes,cpu_s,processes,threads,released,sent,completed,late,errors,in_flight,"
      "oom_kills\n"
      "2.000,1000,5000,,,,,1000,0.50,1,4,10,10,10,0,0,0,0\n");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->rows.size(), 1u);
  EXPECT_FALSE(run->rows[0].books_in_use_bytes.has_value());
  // A new header with a row of the old width is an error that says so.
  auto mixed = ParseSampleCsv(
      "t_s,anon_bytes,rss_bytes,cg_anon_bytes,cg_dirty_bytes,cg_writeback_bytes,cg_usage_bytes,"
      "judged_bytes,cpu_s,processes,threads,released,sent,completed,late,errors,in_flight,"
      "oom_kills,books_in_use_bytes,books_retained_bytes,books_processes\n"
      "2.000,1000,5000,,,,,1000,0.50,1,4,10,10,10,0,0,0,0\n"
      "4.000,1000,5000,,,,,1000,0.50,1,4,10,10,10,0,0,0,0,,,0\n");
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("expected 21 columns, got 18"), std::string::npos)
      << mixed.status().message();
}

TEST(SampleCsvTest, PartialLastLineOfAKilledRunIsDropped) {
  std::string text =
      "# variant: x\n" + std::string("t_s,anon_bytes,rss_bytes,cg_anon_bytes,cg_dirty_bytes,") +
      "cg_writeback_bytes,cg_usage_bytes,judged_bytes,cpu_s,processes,threads,released,sent,"
      "completed,late,errors,in_flight,oom_kills\n"
      "0.000,1,1,,,,,1,0.00,1,1,0,0,0,0,0,0,0\n"
      "2.000,2,2,,,,";
  auto run = ParseSampleCsv(text);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->rows.size(), 1u);
}

TEST(SampleCsvTest, MalformedRowNamesLineAndColumn) {
  std::string text =
      "t_s,anon_bytes,rss_bytes,cg_anon_bytes,cg_dirty_bytes,cg_writeback_bytes,cg_usage_bytes,"
      "judged_bytes,cpu_s,processes,threads,released,sent,completed,late,errors,in_flight,"
      "oom_kills\n"
      "0.000,1,1,,,,,1,0.00,1,1,0,0,0,0,0,0,0\n"
      "2.000,lots,1,,,,,1,0.00,1,1,0,0,0,0,0,0,0\n"
      "4.000,1,1,,,,,1,0.00,1,1,0,0,0,0,0,0,0\n";
  auto run = ParseSampleCsv(text);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().message(), "line 3: column anon_bytes is \"lots\", not an integer");
}

// Found by fuzz/sample_csv_fuzzer (UBSan): a row at t_s 1e28 with a new OOM
// kill made the analysis convert 1.7e26 minutes to an int. Times outside 0
// to 1e8 s (about three years), and ones that are not finite, are refused.
TEST(SampleCsvTest, ATimeOutsideAnyRunIsRefused) {
  const std::string columns =
      "t_s,anon_bytes,rss_bytes,cg_anon_bytes,cg_dirty_bytes,cg_writeback_bytes,cg_usage_bytes,"
      "judged_bytes,cpu_s,processes,threads,released,sent,completed,late,errors,in_flight,"
      "oom_kills\n0.000,1,1,,,,,1,0.00,1,1,0,0,0,0,0,0,0\n";
  for (const char* t : {"1e28", "-2.000", "nan", "inf", "100000000.5"}) {
    auto run = ParseSampleCsv(columns + t + ",1,1,,,,,1,0.00,1,1,0,0,0,0,0,0,1\n");
    ASSERT_FALSE(run.ok()) << t;
    EXPECT_EQ(run.status().message(),
              "line 3: column t_s is \"" + std::string(t) + "\", not a time from 0 to 1e8 seconds");
  }
  EXPECT_TRUE(ParseSampleCsv(columns + "100000000,1,1,,,,,1,0.00,1,1,0,0,0,0,0,0,1\n").ok());
}

TEST(SampleCsvTest, CrlfLineEndingsAreAccepted) {
  std::string text =
      "# variant: x\r\n"
      "t_s,anon_bytes,rss_bytes,cg_anon_bytes,cg_dirty_bytes,cg_writeback_bytes,cg_usage_bytes,"
      "judged_bytes,cpu_s,processes,threads,released,sent,completed,late,errors,in_flight,"
      "oom_kills\r\n"
      "0.000,1,1,,,,,1,0.00,1,1,0,0,0,0,0,0,7\r\n";
  auto run = ParseSampleCsv(text);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->Header("variant"), "x");
  EXPECT_EQ(run->rows.at(0).oom_kills, 7);
}

TEST(SampleCsvTest, NotAReplayCsv) {
  auto run = ParseSampleCsv("name,value\na,1\n");
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("expected the column header"), std::string::npos);
}

}  // namespace
}  // namespace allocguard::replay
