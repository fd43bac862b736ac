#pragma once

// Everything the replay engine touches outside its own process, behind one
// interface in the shape of LevelDB's Env: /proc (process trees, their memory
// and mapped libraries), memory cgroups, starting the workload, free ports,
// HTTP to the workload and the load driver. ReplayEnv::Default() is the real
// machine; replay_env_for_test.h has a scripted one, so the runner's logic
// (readiness, sampling, judging, OOM and exit handling, the files it writes)
// is tested without processes, cgroups or sockets.
//
// The runner calls an env from its own thread only (the load driver makes its
// connections in Start, on that thread); ReplayEnv::Default() is thread-safe
// all the same, and the objects it returns may be used from any one thread.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "operator/common/clock.h"
#include "operator/common/status.h"
#include "operator/net/http.h"
#include "operator/replay/allocator_books.h"
#include "operator/replay/load_driver.h"
#include "operator/replay/load_spec.h"
#include "operator/replay/memory_cgroup.h"
#include "operator/replay/proc_reader.h"
#include "operator/replay/workload_process.h"

namespace allocguard::replay {

// A memory cgroup a run reads. A cgroup the run created is removed (killing
// what is left in it) when this object is destroyed; one it found is not.
class RunCgroup {
 public:
  virtual ~RunCgroup() = default;
  // "v1 /sys/fs/cgroup/memory/...": the version and directory, for the CSV.
  virtual std::string Describe() const = 0;
  // The file a process writes its pid to in order to join the cgroup.
  virtual std::string ProcsPath() const = 0;
  virtual Result<CgroupMemoryStat> ReadStat() const = 0;
};

// A workload process the run started.
class RunProcess {
 public:
  // Stops the workload if it still runs.
  virtual ~RunProcess() = default;
  virtual pid_t pid() const = 0;
  // Non-blocking; once exited, stays exited.
  virtual WorkloadExit Poll() = 0;
  // SIGTERM to the workload's processes, SIGKILL after `grace`.
  virtual WorkloadExit Stop(std::chrono::milliseconds grace) = 0;
};

// Sends a load to the workload (LoadDriver in production).
class RunLoad {
 public:
  virtual ~RunLoad() = default;
  virtual Status Start() = 0;
  virtual void Stop() = 0;
  // Thread-safe.
  virtual LoadStats Snapshot() const = 0;
};

class ReplayEnv {
 public:
  virtual ~ReplayEnv() = default;

  // The real machine: /proc, /sys/fs/cgroup, fork and exec, loopback
  // sockets. Never deleted; thread-safe.
  static ReplayEnv* Default();

  // /proc. As ProcReader: sums over the union of the trees of `roots`;
  // kNotFound when none of them is alive.
  virtual Result<ProcessTreeUsage> ReadUsage(const std::vector<pid_t>& roots) = 0;
  virtual std::vector<ProcessInfo> ListProcesses() = 0;
  virtual Result<std::vector<std::string>> MappedLibraries(pid_t pid) = 0;
  // The path with every symbolic link resolved; fails when it does not exist.
  virtual Result<std::string> CanonicalPath(const std::string& path) = 0;
  // The stats agent's books under `dir` (ReadAllocatorBooksTree).
  virtual Result<std::vector<BooksFile>> ReadBooks(const std::string& dir) = 0;

  // Memory cgroups. As MemoryCgroup::Create and MemoryCgroup::OfProcess: a
  // failure says why there is no cgroup, for the run's header.
  virtual Result<std::unique_ptr<RunCgroup>> CreateCgroup(const std::string& name,
                                                          std::optional<int64_t> limit_bytes) = 0;
  virtual Result<std::unique_ptr<RunCgroup>> CgroupOfProcess(pid_t pid) = 0;

  // Starts the workload as WorkloadProcess::Start does.
  virtual Result<std::unique_ptr<RunProcess>> StartWorkload(const WorkloadLaunch& launch) = 0;

  // A loopback port that was free a moment ago.
  virtual Result<int> PickFreePort() = 0;

  // HTTP to the workload: its readiness probe and the load.
  virtual Result<std::unique_ptr<net::HttpClient>> NewHttpClient(
      const net::HttpClientOptions& options) = 0;
  // REQUIRES: spec outlives the load; as LoadDriver's constructor.
  virtual std::unique_ptr<RunLoad> NewLoad(const LoadSpec& spec, HttpClientFactory client_factory,
                                           Clock* clock, UnexpectedResponseSink sink) = 0;
};

}  // namespace allocguard::replay
