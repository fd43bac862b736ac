#include "operator/replay/memory_cgroup.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace allocguard::replay {
namespace {

namespace fs = std::filesystem;

// A hand-made /proc and /sys tree in a temporary directory.
class FakeFs {
 public:
  FakeFs()
      : root_(fs::temp_directory_path() /
              ("ag-cg-" + std::to_string(getpid()) + "-" + std::to_string(counter_++))) {
    fs::create_directories(root_);
  }
  ~FakeFs() { fs::remove_all(root_); }
  void Write(const std::string& rel, const std::string& text) {
    fs::path p = root_ / rel.substr(1);
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::string prefix() const { return root_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path root_;
};

void SetUpV1(FakeFs& f) {
  f.Write("/proc/self/mountinfo",
          "30 25 0:26 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n"
          "31 25 0:27 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n");
  f.Write("/proc/self/cgroup", "5:cpu:/\n4:memory:/ci/job\n0::/\n");
  f.Write("/proc/42/cgroup", "4:memory:/ci/job/app\n");
  const char* stat =
      "cache 100\nrss 5000\ndirty 7\nwriteback 3\ntotal_rss 6000\ntotal_dirty 70\n"
      "total_writeback 30\n";
  f.Write("/sys/fs/cgroup/memory/ci/job/app/memory.stat", stat);
  f.Write("/sys/fs/cgroup/memory/ci/job/app/memory.usage_in_bytes", "9000\n");
  f.Write("/sys/fs/cgroup/memory/ci/job/app/memory.oom_control",
          "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
}

TEST(MemoryCgroupTest, V1ReadsHierarchicalAnonDirtyWritebackAndOomKills) {
  FakeFs f;
  SetUpV1(f);
  auto cg = MemoryCgroup::OfProcess(42, f.prefix());
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  EXPECT_EQ((*cg)->version(), 1);
  EXPECT_EQ((*cg)->path(), f.prefix() + "/sys/fs/cgroup/memory/ci/job/app");
  auto st = (*cg)->ReadStat();
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->anon_bytes, 6000);
  EXPECT_EQ(st->dirty_bytes, 70);
  EXPECT_EQ(st->writeback_bytes, 30);
  EXPECT_EQ(st->usage_bytes, 9000);
  EXPECT_EQ(st->oom_kills, 2);
}

TEST(MemoryCgroupTest, V1CreateMakesAChildOfOurOwnCgroupWithTheLimit) {
  FakeFs f;
  SetUpV1(f);
  // The kernel would populate the new directory; the fake pre-creates it.
  f.Write("/sys/fs/cgroup/memory/ci/job/run1/memory.stat", "rss 1\n");
  f.Write("/sys/fs/cgroup/memory/ci/job/run1/memory.usage_in_bytes", "1\n");
  auto cg = MemoryCgroup::Create("run1", int64_t{256} << 20, f.prefix());
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  std::ifstream limit(f.prefix() + "/sys/fs/cgroup/memory/ci/job/run1/memory.limit_in_bytes");
  std::string text;
  limit >> text;
  EXPECT_EQ(text, "268435456");
}

TEST(MemoryCgroupTest, V2ReadsAnonFileDirtyAndMemoryEvents) {
  FakeFs f;
  f.Write("/proc/self/mountinfo",
          "35 24 0:30 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n");
  f.Write("/sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n");
  f.Write("/proc/7/cgroup", "0::/kubepods/pod1/c1\n");
  f.Write("/sys/fs/cgroup/kubepods/pod1/c1/memory.stat",
          "anon 111\nfile 999\nfile_dirty 22\nfile_writeback 3\n");
  f.Write("/sys/fs/cgroup/kubepods/pod1/c1/memory.current", "4096\n");
  f.Write("/sys/fs/cgroup/kubepods/pod1/c1/memory.events",
          "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n");
  auto cg = MemoryCgroup::OfProcess(7, f.prefix());
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  EXPECT_EQ((*cg)->version(), 2);
  auto st = (*cg)->ReadStat().value();
  EXPECT_EQ(st.anon_bytes, 111);
  EXPECT_EQ(st.dirty_bytes, 22);
  EXPECT_EQ(st.writeback_bytes, 3);
  EXPECT_EQ(st.usage_bytes, 4096);
  EXPECT_EQ(st.oom_kills, 1);
}

TEST(MemoryCgroupTest, HybridWithoutMemoryControllerSaysSo) {
  FakeFs f;
  f.Write("/proc/self/mountinfo", "31 25 0:27 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n");
  f.Write("/sys/fs/cgroup/unified/cgroup.controllers", "\n");
  auto cg = MemoryCgroup::Create("x", std::nullopt, f.prefix());
  ASSERT_FALSE(cg.ok());
  EXPECT_NE(cg.status().message().find("has no memory controller"), std::string::npos)
      << cg.status().message();
}

TEST(MemoryCgroupTest, UnreadableCgroupIsAClearErrorNotACrash) {
  FakeFs f;
  SetUpV1(f);
  fs::remove(f.prefix() + "/sys/fs/cgroup/memory/ci/job/app/memory.stat");
  auto cg = MemoryCgroup::OfProcess(42, f.prefix());
  ASSERT_FALSE(cg.ok());
  EXPECT_NE(cg.status().message().find("cannot read " + f.prefix() +
                                       "/sys/fs/cgroup/memory/ci/job/app/memory.stat"),
            std::string::npos)
      << cg.status().message();
}

TEST(MemoryCgroupTest, GarbageInUsageFileIsAnError) {
  FakeFs f;
  SetUpV1(f);
  f.Write("/sys/fs/cgroup/memory/ci/job/app/memory.usage_in_bytes", "lots\n");
  auto cg = MemoryCgroup::OfProcess(42, f.prefix());
  ASSERT_FALSE(cg.ok());
  EXPECT_NE(cg.status().message().find("does not hold a number"), std::string::npos);
}

TEST(MemoryCgroupTest, NoCgroupMountedAtAll) {
  FakeFs f;
  f.Write("/proc/self/mountinfo", "22 1 0:21 / /proc rw - proc proc rw\n");
  auto cg = MemoryCgroup::Create("x", std::nullopt, f.prefix());
  ASSERT_FALSE(cg.ok());
  EXPECT_NE(cg.status().message().find("no memory cgroup hierarchy is mounted"), std::string::npos);
}

}  // namespace
}  // namespace allocguard::replay
