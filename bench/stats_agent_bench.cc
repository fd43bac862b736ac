// Stats agent benchmark: the CPU the agent's publisher thread costs a
// process, per allocator, at a 2 s interval (the default) and at 100 ms.
//
// Usage: stats_agent_bench [--slow-seconds N] [--fast-seconds N] [--blocks N]
// For each of glibc, jemalloc, mimalloc and tcmalloc (Debian's packages), it
// starts allocators/stats_agent/tests/books_workload.c with the allocator and
// the agent preloaded, has it allocate N blocks of 512 bytes (default
// 65536, 32 MiB) and free every other one, so the heap holds N/2 free chunks
// that cannot coalesce (glibc's mallinfo2 and malloc_info walk every free
// chunk: its costliest heap), then measures the publisher thread ("ag-books")
// over the run from the outside, /proc/PID/task/TID/schedstat (nanoseconds
// on the CPU), and from the inside, the agent_cpu_ns the agent publishes
// (CLOCK_THREAD_CPUTIME_ID). Prints CPU per sample and as a share of one
// core, and the interval in force at the end (longer than requested when
// the agent's CPU budget throttled it).

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>
#include <csignal>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "operator/replay/allocator_books.h"
#include "operator/replay/allocator_variant.h"

namespace {

namespace fs = std::filesystem;
using allocguard::replay::Allocator;
using allocguard::replay::AllocatorBooks;

struct Child {
  pid_t pid = -1;
  int to = -1, from = -1;
};

Child Spawn(const std::vector<std::string>& extra_env) {
  Child c;
  int in[2];
  int out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) return c;
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "LD_PRELOAD=", 11) != 0 &&
        std::strncmp(*e, "ALLOCGUARD_STATS_", 17) != 0) {
      env.emplace_back(*e);
    }
  }
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> envp;
  envp.reserve(env.size());
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string path = ALLOCGUARD_BOOKS_WORKLOAD;
  char* argv[] = {path.data(), nullptr};
  c.pid = fork();
  if (c.pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    execve(argv[0], argv, envp.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  c.to = in[1];
  c.from = out[0];
  return c;
}

std::string Line(const Child& c) {
  std::string line;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{c.from, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char ch;
    if (read(c.from, &ch, 1) != 1) break;
    if (ch == '\n') return line;
    line += ch;
  }
  return line;
}

std::string Command(const Child& c, const std::string& line) {
  std::string text = line + "\n";
  if (write(c.to, text.data(), text.size()) != static_cast<ssize_t>(text.size())) return "";
  return Line(c);
}

// The publisher thread's nanoseconds on the CPU, from schedstat; -1 if absent.
int64_t PublisherCpuNs(pid_t pid) {
  std::string task_dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(task_dir.c_str());
  if (d == nullptr) return -1;
  int64_t ns = -1;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::string base = task_dir + "/" + e->d_name;
    std::string comm;
    std::getline(std::ifstream(base + "/comm"), comm);
    if (comm != "ag-books") continue;
    std::ifstream(base + "/schedstat") >> ns;
  }
  closedir(d);
  return ns;
}

struct Measure {
  int64_t schedstat_ns = -1;
  uint64_t agent_ns = 0;
  uint64_t sequence = 0;
  int64_t interval_ms = 0;  // in force
  bool throttled = false;
};

bool Read(pid_t pid, const fs::path& dir, Measure* m) {
  auto books =
      allocguard::replay::ReadAllocatorBooks((dir / ("books-" + std::to_string(pid))).string());
  if (!books.ok()) {
    std::fprintf(stderr, "stats_agent_bench: %s\n", books.status().ToString().c_str());
    return false;
  }
  m->schedstat_ns = PublisherCpuNs(pid);
  m->agent_ns = static_cast<uint64_t>(books->agent_cpu.count());
  m->sequence = books->sequence;
  m->interval_ms = books->interval.count();
  m->throttled = books->throttled;
  return true;
}

// Waits until the agent has published a sample after `after` (a sequence).
bool WaitSample(pid_t pid, const fs::path& dir, uint64_t after, int timeout_ms, Measure* m) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(dir / ("books-" + std::to_string(pid))) && Read(pid, dir, m) &&
        m->sequence > after) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  int slow_seconds = 60;
  int fast_seconds = 10;
  int blocks = 65536;
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--slow-seconds")) slow_seconds = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--fast-seconds")) fast_seconds = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--blocks")) blocks = std::atoi(argv[++i]);
  }
  fs::path dir = fs::temp_directory_path() / ("stats_agent_bench-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::printf("%d blocks of 512 bytes, every other one freed; publisher thread CPU\n", blocks);
  std::printf("%-9s %9s %9s %8s %10s %10s %12s %12s\n", "allocator", "interval", "in force",
              "samples", "per sample", "(agent)", "% of a core", "(agent)");
  int failures = 0;
  for (Allocator a :
       {Allocator::kGlibc, Allocator::kJemalloc, Allocator::kMimalloc, Allocator::kTcmalloc}) {
    std::string preload = ALLOCGUARD_STATS_AGENT;
    if (a != Allocator::kGlibc) {
      auto lib = allocguard::replay::ResolveAllocatorLibrary(
          a, allocguard::replay::DefaultLibrarySearchDirs());
      if (!lib.ok()) {
        std::fprintf(stderr, "stats_agent_bench: %s\n", lib.status().ToString().c_str());
        ++failures;
        continue;
      }
      preload = std::string(*lib).append(":").append(preload);
    }
    for (int interval_ms : {2000, 100}) {
      int seconds = interval_ms >= 1000 ? slow_seconds : fast_seconds;
      Child c = Spawn({"LD_PRELOAD=" + preload, "ALLOCGUARD_STATS_DIR=" + dir.string(),
                       "ALLOCGUARD_STATS_INTERVAL_MS=" + std::to_string(interval_ms)});
      std::string first = Line(c);
      pid_t pid = c.pid;
      Command(c, "alloc " + std::to_string(blocks) + " 512");
      Command(c, "thin");
      Measure m0;
      Measure m1;
      // From the first sample after the heap was built to the last one of the run.
      bool ok = WaitSample(pid, dir, 0, 3 * interval_ms + 1000, &m0);
      auto start = std::chrono::steady_clock::now();
      std::this_thread::sleep_for(std::chrono::seconds(seconds));
      ok = ok && WaitSample(pid, dir, m0.sequence, 3 * interval_ms + 1000, &m1);
      double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      Command(c, "exit");
      close(c.to);
      close(c.from);
      int status = 0;
      waitpid(pid, &status, 0);
      uint64_t samples = m1.sequence - m0.sequence;
      if (!ok || samples == 0 || m0.schedstat_ns < 0 || m1.schedstat_ns < 0) {
        std::fprintf(stderr, "stats_agent_bench: %s at %d ms: no measurement (%s)\n",
                     allocguard::replay::AllocatorName(a), interval_ms, first.c_str());
        ++failures;
        continue;
      }
      auto sched = static_cast<double>(m1.schedstat_ns - m0.schedstat_ns);
      auto agent = static_cast<double>(m1.agent_ns - m0.agent_ns);
      std::printf(
          "%-9s %6d ms %6lld ms%s %7llu %7.1f µs %7.1f µs %11.4f %% %11.4f %%\n",
          allocguard::replay::AllocatorName(a), interval_ms, static_cast<long long>(m1.interval_ms),
          m1.throttled ? "*" : " ", static_cast<unsigned long long>(samples),
          sched / 1e3 / static_cast<double>(samples), agent / 1e3 / static_cast<double>(samples),
          100.0 * sched / (wall * 1e9), 100.0 * agent / (wall * 1e9));
      std::fflush(stdout);
    }
  }
  std::printf("in force: the interval of the last sample; * THROTTLED (the agent's CPU budget)\n");
  fs::remove_all(dir);
  return failures == 0 ? 0 : 1;
}
