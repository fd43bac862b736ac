#include "operator/common/subprocess.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <csignal>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace allocguard {
namespace {

namespace fs = std::filesystem;

class SubprocessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ag-subprocess-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Slurp(const std::string& name) {
    std::ifstream in(dir_ / name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  fs::path dir_;
};

TEST_F(SubprocessTest, CapturesStdoutWithTheGivenEnvironment) {
  SubprocessOptions o;
  o.argv = {"sh", "-c", R"(printf '%s,%s' "$GREETING" "$1")", "sh", "world"};
  o.env = CurrentEnvironment();
  (*o.env)["GREETING"] = "hello";
  o.capture_stdout = true;
  auto child = Subprocess::Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  auto out = child->ReadStdout(std::chrono::seconds(10), 1 << 20);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, "hello,world");
  SubprocessExit exit = child->Wait();
  EXPECT_TRUE(exit.exited);
  EXPECT_EQ(exit.exit_code, 0);
  EXPECT_EQ(exit.Describe(), "exit code 0");
}

TEST_F(SubprocessTest, WritesStdoutAndStderrToFilesAndReportsTheExitCode) {
  SubprocessOptions o;
  o.argv = {"sh", "-c", "echo out; echo err >&2; exit 3"};
  o.stdout_path = (dir_ / "out").string();
  o.stderr_path = (dir_ / "err").string();
  auto child = Subprocess::Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  SubprocessExit exit = child->Wait();
  EXPECT_EQ(exit.exit_code, 3);
  EXPECT_EQ(exit.Describe(), "exit code 3");
  EXPECT_EQ(Slurp("out"), "out\n");
  EXPECT_EQ(Slurp("err"), "err\n");
}

TEST_F(SubprocessTest, AProgramThatCannotBeExecutedFailsWithTheSystemsReason) {
  SubprocessOptions o;
  o.argv = {(dir_ / "missing").string()};
  auto child = Subprocess::Spawn(o);
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(child.status().message(), "No such file or directory");
}

TEST_F(SubprocessTest, AnUnwritableOutputFileNamesThePath) {
  SubprocessOptions o;
  o.argv = {"true"};
  o.stdout_path = (dir_ / "no-such-dir" / "out").string();
  auto child = Subprocess::Spawn(o);
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(child.status().message().find(o.stdout_path), std::string::npos);
}

TEST_F(SubprocessTest, ReadStdoutTimesOutOnAChildThatHangs) {
  SubprocessOptions o;
  o.argv = {"sleep", "30"};
  o.capture_stdout = true;
  auto child = Subprocess::Spawn(o);
  ASSERT_TRUE(child.ok());
  auto out = child->ReadStdout(std::chrono::milliseconds(100), 1 << 20);
  EXPECT_EQ(out.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(child->Poll().exited);
  child->Signal(SIGKILL);
  SubprocessExit exit = child->Wait();
  EXPECT_EQ(exit.signal, SIGKILL);
  EXPECT_EQ(exit.Describe(), "killed by signal 9 (SIGKILL)");
}

TEST_F(SubprocessTest, StopEndsTheWholeProcessGroup) {
  SubprocessOptions o;
  // The shell's child writes its pid and would outlive the shell.
  o.argv = {"sh", "-c", "sleep 30 & echo $! > " + (dir_ / "grandchild").string() + "; wait"};
  o.new_process_group = true;
  auto child = Subprocess::Spawn(o);
  ASSERT_TRUE(child.ok());
  pid_t grandchild = 0;
  for (int i = 0; i < 500 && grandchild == 0; ++i) {
    std::string text = Slurp("grandchild");
    if (!text.empty() && text.back() == '\n') grandchild = std::stoi(text);
    usleep(10000);
  }
  ASSERT_GT(grandchild, 0);
  SubprocessExit exit = child->Stop(std::chrono::milliseconds(2000));
  EXPECT_TRUE(exit.exited);
  EXPECT_EQ(exit.signal, SIGTERM);
  // The grandchild got the group's signal: it is gone (reaped by init) or a
  // zombie awaiting it.
  bool gone = false;
  for (int i = 0; i < 500 && !gone; ++i) {
    std::ifstream stat("/proc/" + std::to_string(grandchild) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    gone = !stat || text.find(") Z") != std::string::npos;
    if (!gone) usleep(10000);
  }
  EXPECT_TRUE(gone);
}

}  // namespace
}  // namespace allocguard
