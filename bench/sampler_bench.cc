// Sampler benchmark: the CPU one memory sample costs (process tree from
// /proc, RssAnon and VmRSS of every process, CPU times, cgroup memory.stat),
// and what that is at one sample every 2 s.
//
// Usage: sampler_bench [--threads N] [--samples N]
// Starts a child with N threads (default 64) in a memory cgroup of its own,
// so the sampled tree resembles a real workload, and samples it N times.

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>
#include <vector>

#include "operator/replay/memory_cgroup.h"
#include "operator/replay/proc_reader.h"

using allocguard::replay::MemoryCgroup;
using allocguard::replay::ProcReader;

namespace {

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 64;
  int samples = 500;
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--samples")) samples = std::atoi(argv[++i]);
  }
  auto cgroup =
      MemoryCgroup::Create("allocguard-sampler-bench-" + std::to_string(getpid()), std::nullopt);
  pid_t child = fork();
  if (child == 0) {
    if (cgroup.ok()) (void)(*cgroup)->AddProcess(getpid());
    std::vector<std::thread> ts;
    ts.reserve(static_cast<size_t>(std::max(threads, 0)));
    for (int i = 0; i < threads; ++i) ts.emplace_back([] { pause(); });
    pause();
    _exit(0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ProcReader proc;
  const int proc_entries = static_cast<int>(proc.ProcessTree(1).size());

  double t0 = ThreadCpuSeconds();
  int64_t sink = 0;
  for (int i = 0; i < samples; ++i) {
    auto u = proc.ReadUsage(child);
    if (u.ok()) sink += u->anon_bytes;
    if (cgroup.ok()) {
      auto st = (*cgroup)->ReadStat();
      if (st.ok()) sink += st->anon_bytes;
    }
  }
  double per_sample = (ThreadCpuSeconds() - t0) / samples;
  std::printf("sampler: %d samples of a %d-thread process (%s), %d processes on the machine\n",
              samples, threads + 1, cgroup.ok() ? "with cgroup" : "no cgroup", proc_entries);
  std::printf("CPU per sample: %.1f us\n", per_sample * 1e6);
  std::printf("overhead at one sample every 2 s: %.4f %% of one core\n", per_sample / 2.0 * 100);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  return sink == -1;  // keep the reads from being optimised away
}
