// The in-pod driver against a real workload process that is not its child,
// as in a canary Pod: the test starts the workload as a sibling (double
// fork), names it as "the pod" through the test hook, and reads the
// termination log the driver writes.

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <csignal>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "operator/replay/in_pod.h"

#ifndef ALLOCGUARD_TEST_WORKLOAD
#error "ALLOCGUARD_TEST_WORKLOAD must name the test workload binary"
#endif

namespace allocguard::replay {
namespace {

namespace fs = std::filesystem;

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  close(fd);
  return ntohs(addr.sin_port);
}

// Starts the test workload as a grandchild whose parent has exited, so it is
// not among the driver's descendants (as a workload container's process is
// not). Returns its pid.
pid_t StartSibling(int port) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  std::string port_text = std::to_string(port);
  pid_t child = fork();
  if (child == 0) {
    pid_t grandchild = fork();
    if (grandchild == 0) {
      close(fds[0]);
      close(fds[1]);
      setsid();
      execl(ALLOCGUARD_TEST_WORKLOAD, ALLOCGUARD_TEST_WORKLOAD, "--port", port_text.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    ssize_t n = write(fds[1], &grandchild, sizeof grandchild);
    _exit(n == sizeof grandchild ? 0 : 1);
  }
  close(fds[1]);
  pid_t grandchild = -1;
  EXPECT_EQ(read(fds[0], &grandchild, sizeof grandchild), static_cast<ssize_t>(sizeof grandchild));
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return grandchild;
}

class InPodIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ag-in-pod-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    port_ = FreePort();
    workload_ = StartSibling(port_);
    ASSERT_GT(workload_, 0);
  }
  void TearDown() override {
    if (workload_ > 0) kill(workload_, SIGKILL);
    if (!HasFailure()) fs::remove_all(dir_);
  }

  InPodOptions Options() {
    InPodOptions o;
    o.load_text =
        "rate: 20\nworkers: 2\nready:\n  path: /healthz\n  timeout: 10s\n"
        "requests:\n  - name: work\n    path: /work?k={key}\n    key_space: 10\n";
    o.port = port_;
    o.duration = std::chrono::seconds(3);
    o.judge.sample_interval_seconds = 0.25;
    o.judge.max_minutes = 1;
    o.judge.warmup_minutes = 0;
    o.variant = "candidate";
    o.allocator = "jemalloc";
    o.termination_log = (dir_ / "termination-log").string();
    o.out_dir = (dir_ / "out").string();
    o.pod_pids_for_test = {workload_};
    return o;
  }

  std::string TerminationLog() {
    std::ifstream in(dir_ / "termination-log");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  fs::path dir_;
  int port_ = 0;
  pid_t workload_ = -1;
};

// Floors are per minute: this test runs one minute and a bit.
TEST_F(InPodIntegrationTest, MeasuresTheSiblingAndWritesTheCompactResult) {
  InPodOptions o = Options();
  o.duration = std::chrono::seconds(61);
  o.judge.sample_interval_seconds = 0.5;
  auto result = RunInPod(o, RealClock::Get());
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  std::string text = TerminationLog();
  ASSERT_LE(text.size(), kMaxTerminationMessageBytes);
  auto decoded = DecodeCanaryResult(text);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString() << "\n" << text;
  EXPECT_EQ(decoded->variant, "candidate");
  EXPECT_EQ(decoded->allocator, "jemalloc");
  EXPECT_NE(decoded->verdict, Verdict::kFailed) << decoded->message;
  EXPECT_NE(decoded->verdict, Verdict::kErrors) << decoded->message;
  ASSERT_FALSE(decoded->floors_mib.empty()) << text;
  EXPECT_GT(decoded->floors_mib.front(), 0);
  EXPECT_GT(decoded->peak_mib, 0);
  EXPECT_GT(decoded->requests, 600);
  EXPECT_EQ(decoded->errors, 0);
  EXPECT_TRUE(decoded->anon_only);
  EXPECT_FALSE(decoded->workload_exited);
  EXPECT_EQ(decoded->minutes, 1);
  // The driver leaves the workload running.
  EXPECT_EQ(kill(workload_, 0), 0);
  // The CSV says where the figure came from.
  std::ifstream csv(fs::path(Options().out_dir) / "candidate.csv");
  std::stringstream ss;
  ss << csv.rdbuf();
  EXPECT_NE(ss.str().find("RssAnon only"), std::string::npos);
}

TEST_F(InPodIntegrationTest, AWorkloadKilledDuringTheRunIsReportedWithItsMinute) {
  InPodOptions o = Options();
  o.duration = std::chrono::seconds(30);
  // Kill the workload once the driver has measured it for a while, as the OOM
  // killer would.
  std::thread killer([this, o] {
    for (int i = 0; i < 200 && !fs::exists(fs::path(o.out_dir) / "candidate.csv"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::this_thread::sleep_for(std::chrono::seconds(2));
    kill(workload_, SIGKILL);
  });
  auto result = RunInPod(o, RealClock::Get());
  killer.join();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  auto decoded = DecodeCanaryResult(TerminationLog());
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->verdict, Verdict::kFailed);
  EXPECT_TRUE(decoded->workload_exited);
  EXPECT_EQ(decoded->exit_minute, 0);
  EXPECT_NE(decoded->message.find("gone"), std::string::npos) << decoded->message;
}

TEST_F(InPodIntegrationTest, ABadLoadIsWrittenAsAFailedResult) {
  InPodOptions o = Options();
  o.load_text = "rate: 20\nrequests: []\n";
  auto result = RunInPod(o, RealClock::Get());
  EXPECT_FALSE(result.ok());
  auto decoded = DecodeCanaryResult(TerminationLog());
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->verdict, Verdict::kFailed);
  EXPECT_NE(decoded->message.find("load"), std::string::npos) << decoded->message;
  // Nothing was measured, so there is no slope to report (not +0.00 GiB/h).
  EXPECT_TRUE(std::isnan(decoded->slope_gib_per_hour)) << decoded->slope_gib_per_hour;
}

}  // namespace
}  // namespace allocguard::replay
