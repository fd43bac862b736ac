// Integration: the guard against real processes, real Debian allocators and
// a real cgroup v1 memory limit. Needs root for the cgroup and setuid parts
// (skipped otherwise). Label: integration.

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <csignal>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "operator/guard/allocator_check.h"
#include "operator/guard/guard.h"
#include "operator/guard/workload_source.h"
#include "operator/replay/memory_cgroup.h"
#include "operator/replay/proc_reader.h"

namespace allocguard::guard {
namespace {

using ::testing::HasSubstr;
constexpr char kJemalloc[] = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";

template <typename F>
bool Eventually(F cond, std::chrono::seconds limit = std::chrono::seconds(30)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

// A child process; killed and reaped on destruction unless waited for.
class Child {
 public:
  Child(const std::string& binary, std::vector<std::string> args, const std::string& preload) {
    int fds[2];
    int ready[2];
    EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0);
    EXPECT_EQ(pipe2(ready, O_CLOEXEC), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[0], 0);
    posix_spawn_file_actions_adddup2(&actions, ready[1], 1);
    std::vector<std::string> env_storage;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::string(*e).rfind("LD_PRELOAD=", 0) != 0) env_storage.emplace_back(*e);
    }
    if (!preload.empty()) env_storage.push_back("LD_PRELOAD=" + preload);
    std::vector<char*> envp;
    envp.reserve(env_storage.size());
    for (auto& e : env_storage) envp.push_back(e.data());
    envp.push_back(nullptr);
    args.insert(args.begin(), binary);
    std::vector<char*> argv;
    argv.reserve(args.size());
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(), envp.data()), 0)
        << binary;
    posix_spawn_file_actions_destroy(&actions);
    close(fds[0]);
    close(ready[1]);
    go_fd_ = fds[1];
    // Wait until main() runs: the loader has mapped everything it will.
    char c = 0;
    EXPECT_EQ(read(ready[0], &c, 1), 1) << "child never ran " << binary;
    close(ready[0]);
  }
  ~Child() {
    if (go_fd_ >= 0) close(go_fd_);
    if (!reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  void Go() const {
    char c = 'g';
    EXPECT_EQ(write(go_fd_, &c, 1), 1);
  }
  // The wait status once it exits.
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    return status;
  }

 private:
  pid_t pid_ = 0;
  int go_fd_ = -1;
  bool reaped_ = false;
};

TEST(GuardAllocatorIntegrationTest, ReadsTheAllocatorRealProcessesLoaded) {
  Child glibc(ALLOCGUARD_GUARD_WORKLOAD, {"sleep"}, "");
  Child jemalloc(ALLOCGUARD_GUARD_WORKLOAD, {"sleep"}, kJemalloc);
  Child static_binary(ALLOCGUARD_GUARD_WORKLOAD_STATIC, {"sleep"}, kJemalloc);

  AllocatorObservation g = ObserveAllocator("/proc", glibc.pid());
  ASSERT_TRUE(g.allocator.has_value()) << g.not_loaded_reason;
  EXPECT_EQ(*g.allocator, replay::Allocator::kGlibc);
  EXPECT_THAT(g.library, HasSubstr("libc.so.6"));

  AllocatorObservation j = ObserveAllocator("/proc", jemalloc.pid());
  ASSERT_TRUE(j.allocator.has_value()) << j.not_loaded_reason;
  EXPECT_EQ(*j.allocator, replay::Allocator::kJemalloc);
  EXPECT_THAT(j.library, HasSubstr("libjemalloc.so.2"));

  // The static binary got the same LD_PRELOAD and ignored it.
  AllocatorObservation s = ObserveAllocator("/proc", static_binary.pid());
  EXPECT_FALSE(s.allocator.has_value());
  EXPECT_THAT(s.not_loaded_reason, HasSubstr("static binary"));

  // The policy's check over all three: jemalloc expected.
  AllocatorCheck check = CheckAllocators(replay::Allocator::kJemalloc, {g, j, s});
  EXPECT_FALSE(check.matches);
  EXPECT_EQ(check.reason, "AllocatorNotLoaded");
  EXPECT_THAT(check.message,
              HasSubstr("process " + std::to_string(glibc.pid()) + " runs on glibc"));
  EXPECT_THAT(check.message, HasSubstr("process " + std::to_string(static_binary.pid()) +
                                       ": allocator not loaded: static binary"));
  EXPECT_THAT(check.message, ::testing::Not(HasSubstr(std::to_string(jemalloc.pid()) + " ")));
  EXPECT_TRUE(CheckAllocators(replay::Allocator::kJemalloc, {j}).matches);
}

TEST(GuardAllocatorIntegrationTest, SetuidProgramIgnoresThePreload) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to make a setuid copy";
  char tmpl[] = "/tmp/guard-setuid-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string copy = dir + "/guard_test_workload";
  std::filesystem::copy_file(ALLOCGUARD_GUARD_WORKLOAD, copy);
  ASSERT_EQ(chmod(dir.c_str(), 0755), 0);
  ASSERT_EQ(chown(copy.c_str(), 65534, 65534), 0);
  ASSERT_EQ(chmod(copy.c_str(), 04755), 0);  // chown clears the bit; set it after
  {
    Child setuid(copy, {"sleep"}, kJemalloc);
    AllocatorObservation o = ObserveAllocator("/proc", setuid.pid());
    EXPECT_FALSE(o.allocator.has_value());
    EXPECT_THAT(o.not_loaded_reason, HasSubstr("setuid"));
    // And the loader really did ignore it (read as root, which may read its maps).
    auto libs = replay::ProcReader().MappedLibraries(setuid.pid());
    ASSERT_TRUE(libs.ok());
    for (const auto& l : *libs) EXPECT_THAT(l, ::testing::Not(HasSubstr("jemalloc")));
  }
  std::filesystem::remove_all(dir);
}

// The workload grows 2 MiB every 50 ms toward a 192 MiB cgroup v1 limit. The
// guard acts 64 MiB under the limit, 1.6 s of growth: room for a loaded
// machine to delay a 100 ms sample many times over.
class GuardRestartIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to create a memory cgroup";
    auto cgroup = replay::MemoryCgroup::Create(
        "guard-restart-" + std::to_string(getpid()) + "-" + std::to_string(++counter_), kLimit);
    if (!cgroup.ok()) GTEST_SKIP() << cgroup.status().ToString();
    if ((*cgroup)->version() != 1) GTEST_SKIP() << "this test is written for cgroup v1";
    cgroup_ = std::move(*cgroup);
  }

  static constexpr int64_t kLimit = 192LL << 20;
  static inline int counter_ = 0;
  std::unique_ptr<replay::MemoryCgroup> cgroup_;
};

TEST_F(GuardRestartIntegrationTest, WithoutTheGuardTheOOMKillerKillsIt) {
  Child child(ALLOCGUARD_GUARD_WORKLOAD, {"grow", "2", "50"}, "");
  ASSERT_TRUE(cgroup_->AddProcess(child.pid()).ok());
  child.Go();
  const int status = child.Wait();
  ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status;
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  auto stat = cgroup_->ReadStat();
  ASSERT_TRUE(stat.ok());
  EXPECT_GE(stat->oom_kills, 1);
}

TEST_F(GuardRestartIntegrationTest, RestartSendsSigtermBeforeTheOOMKiller) {
  Child child(ALLOCGUARD_GUARD_WORKLOAD, {"grow", "2", "50"}, "");
  ASSERT_TRUE(cgroup_->AddProcess(child.pid()).ok());

  ProcWorkloadSourceOptions source_options;
  source_options.pids = {child.pid()};
  auto source = NewProcWorkloadSource(source_options);
  GuardOptions options;
  options.action = GuardAction::kRestart;
  options.interval = std::chrono::milliseconds(100);
  options.restart.margin_min_bytes = 64LL << 20;
  metrics::Registry registry;
  std::vector<std::string> log;
  std::mutex log_mu;
  Guard guard(options, source.get(), nullptr, &registry, RealClock::Get(),
              [&](const std::string& l) {
                std::lock_guard<std::mutex> lock(log_mu);
                log.push_back(l);
              });
  std::thread loop([&] { guard.Run(); });
  // The guard sees the cgroup's limit before the workload grows.
  ASSERT_TRUE(Eventually([&] {
    auto s = guard.Snapshot();
    return s.last && s.last->limit_bytes == kLimit;
  })) << "the guard never read the cgroup's limit";
  child.Go();
  const int status = child.Wait();
  guard.Stop();
  loop.join();

  // Exit status 42 is the workload's SIGTERM handler: a graceful stop.
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 42);
  auto stat = cgroup_->ReadStat();
  ASSERT_TRUE(stat.ok());
  EXPECT_EQ(stat->oom_kills, 0);
  EXPECT_THAT(guard.Snapshot().terminated, ::testing::Contains(child.pid()));
  std::lock_guard<std::mutex> lock(log_mu);
  bool logged = false;
  for (const auto& l : log) {
    logged =
        logged || (l.find("sent SIGTERM to process(es) " + std::to_string(child.pid())) !=
                       std::string::npos &&
                   l.find("restart level 128 MiB (memory limit 192 MiB)") != std::string::npos);
  }
  EXPECT_TRUE(logged) << ::testing::PrintToString(log);
  EXPECT_THAT(registry.Render(), HasSubstr("allocguard_guard_actions_total{action=\"sigterm\"} 1"));
}

}  // namespace
}  // namespace allocguard::guard
