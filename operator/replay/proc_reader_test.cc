#include "operator/replay/proc_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace allocguard::replay {
namespace {

namespace fs = std::filesystem;

class FakeProc {
 public:
  FakeProc() : root_(fs::temp_directory_path() / ("ag-proc-" + std::to_string(getpid()))) {
    fs::create_directories(root_);
  }
  ~FakeProc() { fs::remove_all(root_); }
  // A process with the given parent, anon and resident KiB and CPU ticks.
  void Add(int pid, int ppid, int64_t anon_kib, int64_t rss_kib, int utime, int cutime = 0) {
    fs::path d = root_ / std::to_string(pid);
    fs::create_directories(d);
    // Field 2 holds spaces and a ')' to check the parser counts from the last ')'.
    std::ofstream(d / "stat") << pid << " (my (weird) name) S " << ppid << " 1 1 0 -1 0 0 0 0 0 "
                              << utime << " 0 " << cutime << " 0 20 0 3 0 100 0 0\n";
    std::ofstream(d / "status") << "Name:\tx\nVmRSS:\t" << rss_kib << " kB\nRssAnon:\t" << anon_kib
                                << " kB\nRssFile:\t1 kB\n";
  }
  std::string root() const { return root_.string(); }

 private:
  fs::path root_;
};

TEST(ProcReaderTest, SeveralRootsAreSummedOnceEach) {
  FakeProc p;
  p.Add(100, 1, 1000, 4000, 100);
  p.Add(101, 100, 200, 300, 10);
  p.Add(300, 1, 7, 8, 1);
  p.Add(200, 1, 99999, 99999, 999);  // unrelated
  ProcReader reader(p.root());
  // 101 is named and is also 100's child: counted once.
  auto u = reader.ReadUsage(std::vector<pid_t>{100, 300, 101});
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->processes, 3);
  EXPECT_EQ(u->anon_bytes, (1000 + 200 + 7) * 1024);
  // Gone roots are skipped; all gone is NotFound.
  auto some = reader.ReadUsage(std::vector<pid_t>{555, 300});
  ASSERT_TRUE(some.ok());
  EXPECT_EQ(some->anon_bytes, 7 * 1024);
  EXPECT_EQ(reader.ReadUsage(std::vector<pid_t>{555}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(reader.ReadUsage(std::vector<pid_t>{}).status().code(), StatusCode::kNotFound);
}

TEST(ProcReaderTest, ListsProcessesWithCommAndState) {
  FakeProc p;
  p.Add(100, 1, 1, 1, 1);
  p.Add(101, 100, 1, 1, 1);
  ProcReader reader(p.root());
  auto all = reader.ListProcesses();
  ASSERT_EQ(all.size(), 2u);
  for (const auto& info : all) {
    EXPECT_EQ(info.comm, "my (weird) name");
    EXPECT_EQ(info.state, 'S');
    EXPECT_EQ(info.ppid, info.pid == 101 ? 100 : 1);
  }
}

TEST(ProcReaderTest, SumsTheWholeTreeAndNothingElse) {
  FakeProc p;
  p.Add(100, 1, 1000, 4000, 100, 50);  // root; 50 ticks of reaped children
  p.Add(101, 100, 200, 300, 10);       // child
  p.Add(102, 101, 30, 40, 1);          // grandchild
  p.Add(200, 1, 99999, 99999, 999);    // unrelated
  ProcReader reader(p.root());
  EXPECT_EQ(reader.ProcessTree(100), (std::vector<pid_t>{100, 101, 102}));
  auto u = reader.ReadUsage(100);
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->processes, 3);
  EXPECT_EQ(u->threads, 9);
  EXPECT_EQ(u->anon_bytes, (1000 + 200 + 30) * 1024);
  EXPECT_EQ(u->rss_bytes, (4000 + 300 + 40) * 1024);
  EXPECT_NEAR(u->cpu_seconds, (100 + 50 + 10 + 1) / static_cast<double>(sysconf(_SC_CLK_TCK)),
              1e-9);
}

TEST(ProcReaderTest, GoneRootIsNotFound) {
  FakeProc p;
  ProcReader reader(p.root());
  auto u = reader.ReadUsage(4242);
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.status().code(), StatusCode::kNotFound);
}

TEST(ProcReaderTest, MappedLibrariesOfThisProcessIncludeLibc) {
  ProcReader reader;
  auto libs = reader.MappedLibraries(getpid());
  ASSERT_TRUE(libs.ok());
  bool libc = false;
  for (const auto& l : *libs) libc = libc || l.find("libc.so") != std::string::npos;
  EXPECT_TRUE(libc);
}

}  // namespace
}  // namespace allocguard::replay
