#pragma once

// Starting, watching and stopping the workload a replay measures.

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "operator/common/status.h"

namespace allocguard::replay {

struct WorkloadLaunch {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // the complete environment
  std::string stdout_path;                 // created or truncated
  std::string stderr_path;
  // When set, the child moves itself into this cgroup (its cgroup.procs file)
  // before exec, so no allocation of the workload escapes the measurement.
  std::string cgroup_procs_path;
};

struct WorkloadExit {
  bool exited = false;           // false: still running
  int exit_code = -1;            // when it exited normally
  int signal = 0;                // when a signal ended it
  std::string Describe() const;  // "exit code 3", "killed by signal 9 (SIGKILL)"
};

class WorkloadProcess {
 public:
  // Starts argv[0] (searched in PATH) in a process group of its own. Fails
  // when the program cannot be executed, with the reason.
  static Result<WorkloadProcess> Start(const WorkloadLaunch& launch);

  WorkloadProcess(WorkloadProcess&& other) noexcept;
  WorkloadProcess& operator=(WorkloadProcess&&) = delete;
  // Stops the workload if it still runs.
  ~WorkloadProcess();

  pid_t pid() const { return pid_; }
  // Non-blocking; once exited, stays exited.
  WorkloadExit Poll();
  // SIGTERM to the process group, SIGKILL after `grace`. Returns how it ended.
  WorkloadExit Stop(std::chrono::milliseconds grace);

 private:
  explicit WorkloadProcess(pid_t pid) : pid_(pid) {}

  pid_t pid_ = -1;
  WorkloadExit exit_;
};

// The last `lines` lines of a text file, for reporting why a workload failed.
std::string TailOfFile(const std::string& path, int lines);

}  // namespace allocguard::replay
