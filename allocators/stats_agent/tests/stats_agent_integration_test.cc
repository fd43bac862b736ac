// The stats agent in real processes with real allocators: glibc's malloc and
// Debian's libjemalloc2, libmimalloc2.0 and libtcmalloc-minimal4
// (scripts/install-deps.sh), preloaded with the agent into books_workload.c,
// which allocates and frees what the test tells it. The books are read with
// the operator's reader (operator/replay/allocator_books.h).
//
// Tolerances: the books count what the allocator hands out, so an in-use
// figure is the program's requested bytes plus the allocator's rounding of
// each block (4000-byte blocks: glibc 4016-byte chunks, +0.4 %; jemalloc and
// tcmalloc 4096-byte size classes, +2.4 %), plus whatever the program's libc
// allocated meanwhile (stdio buffers, under 1 MiB). The test therefore
// accepts 99 % to 106 % of the requested bytes, plus 1 MiB.

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>
#include <csignal>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "operator/replay/allocator_books.h"
#include "operator/replay/allocator_variant.h"

namespace allocguard::replay {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kBlocks = 8192;
constexpr uint64_t kBlockSize = 4000;
constexpr uint64_t kLive = kBlocks * kBlockSize;  // 31.25 MiB

// A books_workload process: commands on its stdin, one answer line each.
class Workload {
 public:
  explicit Workload(const std::map<std::string, std::string>& env,
                    std::string path = ALLOCGUARD_BOOKS_WORKLOAD) {
    int in[2];
    int out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) return;
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string kv = *e;
      std::string key = kv.substr(0, kv.find('='));
      if (key == "LD_PRELOAD" || key.rfind("ALLOCGUARD_STATS_", 0) == 0 ||
          key.rfind("MALLOC_", 0) == 0) {
        continue;
      }
      env_strings.push_back(kv);
    }
    for (const auto& [k, v] : env) env_strings.push_back(std::string(k).append("=").append(v));
    std::vector<char*> envp;
    envp.reserve(env_strings.size());
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    char* argv[] = {path.data(), nullptr};
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      execve(argv[0], argv, envp.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_ = in[1];
    from_ = out[0];
    std::string first = Line();
    if (first.rfind("pid ", 0) == 0) workload_pid_ = std::stoi(first.substr(4));
  }
  // SIGKILL before the pipes close: the workload exits normally at the end
  // of its input, and its agent's destructor would then remove the books
  // that a killed process leaves behind (which a test below relies on).
  ~Workload() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (to_ >= 0) close(to_);
    if (from_ >= 0) close(from_);
  }
  Workload(const Workload&) = delete;
  Workload& operator=(const Workload&) = delete;

  pid_t pid() const { return workload_pid_; }

  // Sends one command and returns its answer ("" after 10 s without one).
  std::string Command(const std::string& line) {
    std::string text = line + "\n";
    if (write(to_, text.data(), text.size()) != static_cast<ssize_t>(text.size())) return "";
    return Line();
  }

  // Closes stdin after `exit` and waits (10 s at most) for the exit status.
  int ExitStatus() {
    std::string text = "exit\n";
    if (write(to_, text.data(), text.size()) < 0) return -1;
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < deadline) {
      int status = 0;
      pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        reaped_ = true;
        return status;
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
    return -1;
  }

  std::string Line() {
    std::string line;
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < deadline) {
      pollfd p{from_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char c;
      if (read(from_, &c, 1) != 1) break;
      if (c == '\n') return line;
      line += c;
    }
    return line;
  }

 private:
  pid_t pid_ = -1;
  pid_t workload_pid_ = -1;
  int to_ = -1, from_ = -1;
  bool reaped_ = false;
};

uint64_t Number(const std::string& answer, const std::string& word) {
  if (answer.rfind(word + " ", 0) != 0) return 0;
  return std::stoull(answer.substr(word.size() + 1));
}

struct AllocatorCase {
  BooksAllocator books;
  Allocator allocator;
  bool split;  // reports in-use and retained
};

void PrintTo(const AllocatorCase& c, std::ostream* os) { *os << BooksAllocatorName(c.books); }

class StatsAgentTest : public ::testing::TestWithParam<AllocatorCase> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("stats_agent_test-" + std::to_string(getpid()) + "-" +
                                        std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::map<std::string, std::string> Env() {
    std::string preload = ALLOCGUARD_STATS_AGENT;
    if (GetParam().allocator != Allocator::kGlibc) {
      auto lib = ResolveAllocatorLibrary(GetParam().allocator, DefaultLibrarySearchDirs());
      if (!lib.ok()) {
        ADD_FAILURE() << lib.status().ToString();
        return {};
      }
      preload = *lib + ":" + preload;
    }
    return {{"LD_PRELOAD", preload},
            {"ALLOCGUARD_STATS_DIR", dir_.string()},
            {"ALLOCGUARD_STATS_INTERVAL_MS", "100"}};
  }

  std::string BooksPath(pid_t pid) const {
    return (dir_ / ("books-" + std::to_string(pid))).string();
  }

  // The first sample of `pid` taken after `after` that satisfies `want`;
  // fails after 5 s (50 intervals) without one.
  AllocatorBooks WaitBooks(
      pid_t pid, std::chrono::system_clock::time_point after,
      const std::function<bool(const AllocatorBooks&)>& want = [](const AllocatorBooks&) {
        return true;
      }) {
    auto deadline = Clock::now() + std::chrono::seconds(5);
    std::string last = "no file";
    while (Clock::now() < deadline) {
      auto r = ReadAllocatorBooks(BooksPath(pid));
      if (r.ok() && r->sample_time > after && want(*r)) return *r;
      last = r.ok() ? "sample " + std::to_string(r->sequence) + " not as wanted"
                    : r.status().ToString();
      std::this_thread::sleep_for(milliseconds(20));
    }
    ADD_FAILURE() << "no wanted sample of pid " << pid << " within 5 s; last: " << last;
    return {};
  }

  fs::path dir_;
};

TEST_P(StatsAgentTest, BooksTrackTheProgramsLiveBytes) {
  const AllocatorCase c = GetParam();
  Workload w(Env());
  ASSERT_GT(w.pid(), 0);
  AllocatorBooks idle = WaitBooks(w.pid(), {});
  EXPECT_EQ(idle.allocator, c.books) << idle.allocator_object;
  EXPECT_EQ(idle.pid, w.pid());
  // The interval asked for, unless a sample cost more than the agent's CPU
  // budget allows at it (a loaded machine, a sanitizer build): then a longer
  // one, and the books say so.
  if (idle.throttled) {
    EXPECT_GT(idle.interval, milliseconds(100));
  } else {
    EXPECT_EQ(idle.interval, milliseconds(100));
  }
  EXPECT_EQ(w.Command("threads"), "threads 2");  // the program's and the publisher

  ASSERT_EQ(Number(w.Command("alloc " + std::to_string(kBlocks) + " " + std::to_string(kBlockSize)),
                   "live"),
            kLive);
  AllocatorBooks full = WaitBooks(w.pid(), std::chrono::system_clock::now());
  ASSERT_EQ(w.Command("free"), "live " + std::to_string(kBlockSize));
  AllocatorBooks freed = WaitBooks(w.pid(), std::chrono::system_clock::now());
  EXPECT_GT(freed.sequence, full.sequence);
  EXPECT_GT(full.sequence, idle.sequence);

  if (!c.split) {
    EXPECT_FALSE(full.in_use_bytes.has_value());
    EXPECT_FALSE(full.retained_bytes.has_value());
    EXPECT_GE(full.held_bytes, kLive) << "committed must cover the live bytes";
  } else {
    ASSERT_TRUE(idle.in_use_bytes && full.in_use_bytes && freed.in_use_bytes);
    ASSERT_TRUE(full.retained_bytes && freed.retained_bytes);
    double grown =
        static_cast<double>(*full.in_use_bytes) - static_cast<double>(*idle.in_use_bytes);
    EXPECT_GE(grown, 0.99 * kLive)
        << "in-use " << *full.in_use_bytes << " idle " << *idle.in_use_bytes;
    EXPECT_LE(grown, 1.06 * kLive + kMiB) << "in-use " << *full.in_use_bytes;
    double left =
        static_cast<double>(*freed.in_use_bytes) - static_cast<double>(*idle.in_use_bytes);
    EXPECT_LE(left, 0.01 * kLive + kMiB) << "in-use after the free " << *freed.in_use_bytes;
    // Freed below a live block: every allocator here keeps it, at least
    // for the next sample (jemalloc's dirty pages decay over 10 s).
    EXPECT_GE(*freed.retained_bytes, *full.retained_bytes + kLive / 2)
        << "retained " << *full.retained_bytes << " -> " << *freed.retained_bytes;
    EXPECT_GE(freed.held_bytes, *freed.in_use_bytes + *freed.retained_bytes / 2);
  }
  EXPECT_GT(freed.agent_cpu.count(), 0);

  int status = w.ExitStatus();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_FALSE(fs::exists(BooksPath(w.pid()))) << "exit removes the process's file";
}

TEST_P(StatsAgentTest, AForkedChildPublishesItsOwnFileNeverTheParents) {
  Workload w(Env());
  ASSERT_GT(w.pid(), 0);
  AllocatorBooks before = WaitBooks(w.pid(), {});
  pid_t child = static_cast<pid_t>(Number(w.Command("fork 1500"), "child"));
  ASSERT_GT(child, 0);

  // While the child lives (1.5 s): the parent's file is the parent's, its
  // sequence never goes back; the child's appears under its own PID.
  bool child_seen = false;
  uint64_t last_sequence = before.sequence;
  auto end = Clock::now() + milliseconds(1300);
  while (Clock::now() < end) {
    auto parent = ReadAllocatorBooks(BooksPath(w.pid()));
    ASSERT_TRUE(parent.ok()) << parent.status().ToString();
    EXPECT_EQ(parent->pid, w.pid());
    EXPECT_GE(parent->sequence, last_sequence) << "the parent's file was rewritten from the start";
    last_sequence = parent->sequence;
    auto mine = ReadAllocatorBooks(BooksPath(child));
    if (mine.ok()) {
      child_seen = true;
      EXPECT_EQ(mine->pid, child);
      if (GetParam().split) {
        EXPECT_GE(*mine->in_use_bytes, kMiB) << "the child's own 1 MiB block";
      }
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_TRUE(child_seen) << "no books-" << child << " while the child lived";
  // The child exits normally: its file goes, the parent's stays and moves on.
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (fs::exists(BooksPath(child)) && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_FALSE(fs::exists(BooksPath(child)));
  AllocatorBooks after = WaitBooks(w.pid(), std::chrono::system_clock::now());
  EXPECT_EQ(after.pid, w.pid());
  EXPECT_GT(after.sequence, last_sequence);
  int status = w.ExitStatus();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST_P(StatsAgentTest, WithForkOffAChildPublishesNothing) {
  auto env = Env();
  env["ALLOCGUARD_STATS_FORK"] = "off";
  Workload w(env);
  ASSERT_GT(w.pid(), 0);
  WaitBooks(w.pid(), {});
  pid_t child = static_cast<pid_t>(Number(w.Command("fork 800"), "child"));
  ASSERT_GT(child, 0);
  auto end = Clock::now() + milliseconds(700);  // 7 intervals of the child's life
  while (Clock::now() < end) {
    EXPECT_FALSE(fs::exists(BooksPath(child)));
    std::this_thread::sleep_for(milliseconds(20));
  }
  AllocatorBooks parent = WaitBooks(w.pid(), std::chrono::system_clock::now());
  EXPECT_EQ(parent.pid, w.pid());
  int status = w.ExitStatus();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// A cleanup that removes the file (the process looked gone) does not end the
// books: the next sample makes it anew.
TEST_P(StatsAgentTest, AFileRemovedFromOutsideIsWrittenAgain) {
  Workload w(Env());
  ASSERT_GT(w.pid(), 0);
  AllocatorBooks first = WaitBooks(w.pid(), {});
  ASSERT_TRUE(fs::remove(BooksPath(w.pid())));
  AllocatorBooks again = WaitBooks(w.pid(), std::chrono::system_clock::now());
  EXPECT_GT(again.sequence, first.sequence);
  int status = w.ExitStatus();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_FALSE(fs::exists(BooksPath(w.pid())));
}

// Where the agent cannot start, the process behaves as without it: same
// answers, no extra thread, normal exit, no file anywhere.
TEST_P(StatsAgentTest, WithoutAWritableDirectoryTheProcessRunsAsWithoutTheAgent) {
  const std::vector<std::string> script = {"alloc 100 1000", "threads", "free", "alloc 10 50",
                                           "threads"};
  auto run = [&](const std::map<std::string, std::string>& env) {
    Workload w(env);
    std::vector<std::string> answers;
    answers.reserve(script.size());
    for (const auto& line : script) answers.push_back(w.Command(line));
    int status = w.ExitStatus();
    answers.push_back(WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                        : "status " + std::to_string(status));
    return answers;
  };
  auto plain_env = Env();
  std::string agent = ALLOCGUARD_STATS_AGENT;
  std::string preload = plain_env["LD_PRELOAD"];
  preload = preload.substr(0, preload.size() - agent.size());
  if (!preload.empty()) preload.pop_back();  // the ':'
  std::map<std::string, std::string> without = {{"LD_PRELOAD", preload}};
  auto expected = run(without);
  ASSERT_EQ(expected.back(), "exit 0");
  ASSERT_EQ(expected[1], "threads 1");

  std::ofstream(dir_ / "a-file") << "x";
  for (const std::string& bad :
       {(dir_ / "absent" / "dir").string(), (dir_ / "a-file" / "sub").string(), std::string()}) {
    auto env = Env();
    env["ALLOCGUARD_STATS_DIR"] = bad;
    EXPECT_EQ(run(env), expected) << "ALLOCGUARD_STATS_DIR=" << bad;
  }
  std::vector<std::string> left;
  for (const auto& e : fs::recursive_directory_iterator(dir_)) left.push_back(e.path().filename());
  EXPECT_THAT(left, ::testing::ElementsAre("a-file"));
}

// ALLOCGUARD_STATS_INTERVAL_MS that is not a number of milliseconds: the
// default, 2 s (the first sample comes one interval after the start).
TEST(StatsAgentIntervalTest, AnIntervalThatIsNotDigitsIsTheDefault) {
  fs::path dir =
      fs::temp_directory_path() / ("stats_agent_interval_test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  Workload w({{"LD_PRELOAD", ALLOCGUARD_STATS_AGENT},
              {"ALLOCGUARD_STATS_DIR", dir.string()},
              {"ALLOCGUARD_STATS_INTERVAL_MS", "2s"}});
  ASSERT_GT(w.pid(), 0);
  std::string path = (dir / ("books-" + std::to_string(w.pid()))).string();
  Result<AllocatorBooks> books = NotFound("not read");
  auto deadline = Clock::now() + std::chrono::seconds(6);
  while (Clock::now() < deadline && !(books = ReadAllocatorBooks(path)).ok()) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_TRUE(books.ok()) << books.status().ToString();
  if (books.ok()) {
    EXPECT_EQ(books->interval, milliseconds(2000));
    EXPECT_FALSE(books->throttled);
  }
  int status = w.ExitStatus();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  fs::remove_all(dir);
}

// A process killed by a signal (the OOM killer) leaves its last sample; the
// next process that loads the agent in that directory removes the files of
// PIDs that no longer exist, and leaves those of live processes and other
// names alone.
TEST(StatsAgentCleanupTest, TheNextProcessRemovesTheFilesOfDeadOnes) {
  fs::path dir =
      fs::temp_directory_path() / ("stats_agent_cleanup_test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // A PID that is gone: a child that has exited and been reaped.
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  waitpid(dead, nullptr, 0);
  {
    // A process killed with SIGKILL: its file stays behind.
    Workload w({{"LD_PRELOAD", ALLOCGUARD_STATS_AGENT},
                {"ALLOCGUARD_STATS_DIR", dir.string()},
                {"ALLOCGUARD_STATS_INTERVAL_MS", "50"}});
    ASSERT_GT(w.pid(), 0);
    fs::path mine = dir / ("books-" + std::to_string(w.pid()));
    auto deadline = Clock::now() + std::chrono::seconds(5);
    while (!fs::exists(mine) && Clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    ASSERT_TRUE(fs::exists(mine));
  }  // ~Workload: SIGKILL
  std::vector<std::string> before;
  for (const auto& e : fs::directory_iterator(dir)) before.push_back(e.path().filename());
  ASSERT_EQ(before.size(), 1u) << "the killed process's file";
  const std::string killed = before[0];
  for (const std::string& name :
       {"books-" + std::to_string(dead), ".books-" + std::to_string(dead) + ".tmp",
        "books-" + std::to_string(getpid()), std::string("books-x"), std::string("notes")}) {
    std::ofstream(dir / name) << "x";
  }
  // Its own first sample comes 10 s later, after the listing below.
  Workload w({{"LD_PRELOAD", ALLOCGUARD_STATS_AGENT},
              {"ALLOCGUARD_STATS_DIR", dir.string()},
              {"ALLOCGUARD_STATS_INTERVAL_MS", "10000"}});
  ASSERT_GT(w.pid(), 0);
  EXPECT_EQ(w.Command("threads"), "threads 2");  // the constructor has run
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir)) left.push_back(e.path().filename());
  EXPECT_THAT(left, ::testing::UnorderedElementsAre("books-" + std::to_string(getpid()),
                                                    std::string("books-x"), std::string("notes")))
      << "removed: " << killed << ", books-" << dead;
  int status = w.ExitStatus();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  fs::remove_all(dir);
}

// exec keeps the PID and runs no destructor: the new program's agent removes
// the old program's file (its own PID's) at start, so a shell that execs a
// short command, or an entrypoint's `exec app`, leaves no books behind.
TEST(StatsAgentExecTest, TheProgramAfterExecRemovesTheBooksOfTheOneBefore) {
  fs::path dir = fs::temp_directory_path() / ("stats_agent_exec_test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  Workload w({{"LD_PRELOAD", ALLOCGUARD_STATS_AGENT},
              {"ALLOCGUARD_STATS_DIR", dir.string()},
              {"ALLOCGUARD_STATS_INTERVAL_MS", "50"}});
  ASSERT_GT(w.pid(), 0);
  const fs::path mine = dir / ("books-" + std::to_string(w.pid()));
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (!fs::exists(mine) && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_TRUE(fs::exists(mine));
  // The new program's first sample comes 10 s later, after the check below.
  EXPECT_EQ(w.Command("exec 10000"), "pid " + std::to_string(w.pid()));
  EXPECT_EQ(w.Command("threads"), "threads 2");  // its agent has started
  EXPECT_FALSE(fs::exists(mine)) << "the books of the program before exec are still there";
  int status = w.ExitStatus();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(fs::is_empty(dir));
  fs::remove_all(dir);
}

// The CPU budget: glibc's mallinfo2 walks every free chunk, so a heap of
// 32768 free chunks that cannot coalesce costs about a millisecond a sample;
// at a 10 ms interval that is far above a quarter of one percent of a core,
// and the agent stretches its interval (and says so) instead of spending it.
TEST(StatsAgentBudgetTest, ACostlySampleStretchesTheInterval) {
  fs::path dir =
      fs::temp_directory_path() / ("stats_agent_budget_test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  Workload w({{"LD_PRELOAD", ALLOCGUARD_STATS_AGENT},
              {"ALLOCGUARD_STATS_DIR", dir.string()},
              {"ALLOCGUARD_STATS_INTERVAL_MS", "10"}});
  ASSERT_GT(w.pid(), 0);
  std::string path = (dir / ("books-" + std::to_string(w.pid()))).string();
  ASSERT_EQ(Number(w.Command("alloc 65536 512"), "live"), 65536u * 512u);
  ASSERT_EQ(Number(w.Command("thin"), "live"), 32768u * 512u);
  auto deadline = Clock::now() + std::chrono::seconds(10);
  Result<AllocatorBooks> books = NotFound("not read");
  while (Clock::now() < deadline) {
    books = ReadAllocatorBooks(path);
    if (books.ok() && books->throttled) break;
    std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_TRUE(books.ok()) << books.status().ToString();
  ASSERT_TRUE(books->throttled) << "interval " << books->interval.count() << " ms";
  EXPECT_GT(books->interval, milliseconds(10));
  // The interval it publishes is the one in force: the next sample comes
  // within it (and a reader's staleness check uses it).
  uint64_t seq = books->sequence;
  auto next_by = Clock::now() + 3 * books->interval + std::chrono::seconds(1);
  while (Clock::now() < next_by) {
    auto again = ReadAllocatorBooks(path);
    if (again.ok() && again->sequence > seq) break;
    std::this_thread::sleep_for(milliseconds(20));
  }
  auto again = ReadAllocatorBooks(path);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_GT(again->sequence, seq);
  EXPECT_FALSE(BooksAreStale(*again, std::chrono::system_clock::now()));
  int status = w.ExitStatus();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  fs::remove_all(dir);
}

// The agent built with musl-gcc in a musl process (musl's own malloc, which
// has no statistics API): it starts, names the allocator unknown and the
// object musl's loader, publishes no split, follows fork, and cleans up.
TEST(StatsAgentMuslTest, PublishesUnderMuslsOwnMalloc) {
#if !defined(ALLOCGUARD_STATS_AGENT_MUSL)
  FAIL() << "musl-gcc was not found at configure time: scripts/install-deps.sh installs "
            "musl-tools; then re-run cmake";
#else
  fs::path dir = fs::temp_directory_path() / ("stats_agent_musl_test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto path = [&](pid_t pid) { return (dir / ("books-" + std::to_string(pid))).string(); };
  auto wait = [&](pid_t pid) -> Result<AllocatorBooks> {
    auto deadline = Clock::now() + std::chrono::seconds(5);
    Result<AllocatorBooks> r = NotFound("not read");
    while (Clock::now() < deadline) {
      r = ReadAllocatorBooks(path(pid));
      if (r.ok()) return r;
      std::this_thread::sleep_for(milliseconds(20));
    }
    return r;
  };
  {
    Workload w({{"LD_PRELOAD", ALLOCGUARD_STATS_AGENT_MUSL},
                {"ALLOCGUARD_STATS_DIR", dir.string()},
                {"ALLOCGUARD_STATS_INTERVAL_MS", "100"}},
               ALLOCGUARD_BOOKS_WORKLOAD_MUSL);
    ASSERT_GT(w.pid(), 0);
    auto books = wait(w.pid());
    ASSERT_TRUE(books.ok()) << books.status().ToString();
    EXPECT_EQ(books->allocator, BooksAllocator::kUnknown);
    EXPECT_THAT(books->allocator_object, ::testing::HasSubstr("musl"));
    EXPECT_FALSE(books->in_use_bytes.has_value());
    EXPECT_EQ(w.Command("threads"), "threads 2");
    pid_t child = static_cast<pid_t>(Number(w.Command("fork 1000"), "child"));
    ASSERT_GT(child, 0);
    auto child_books = wait(child);
    ASSERT_TRUE(child_books.ok()) << child_books.status().ToString();
    EXPECT_EQ(child_books->pid, child);
    int status = w.ExitStatus();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    EXPECT_FALSE(fs::exists(path(w.pid())));
  }
  {
    Workload w({{"LD_PRELOAD", ALLOCGUARD_STATS_AGENT_MUSL},
                {"ALLOCGUARD_STATS_DIR", (dir / "absent").string()}},
               ALLOCGUARD_BOOKS_WORKLOAD_MUSL);
    EXPECT_EQ(w.Command("threads"), "threads 1");
    int status = w.ExitStatus();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  fs::remove_all(dir);
#endif
}

INSTANTIATE_TEST_SUITE_P(
    Allocators, StatsAgentTest,
    ::testing::Values(AllocatorCase{BooksAllocator::kGlibc, Allocator::kGlibc, true},
                      AllocatorCase{BooksAllocator::kJemalloc, Allocator::kJemalloc, true},
                      AllocatorCase{BooksAllocator::kMimalloc, Allocator::kMimalloc, false},
                      AllocatorCase{BooksAllocator::kTcmalloc, Allocator::kTcmalloc, true}),
    [](const ::testing::TestParamInfo<AllocatorCase>& p) {
      return std::string(BooksAllocatorName(p.param.books));
    });

}  // namespace
}  // namespace allocguard::replay
