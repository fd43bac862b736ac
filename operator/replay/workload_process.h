#pragma once

// Starting, watching and stopping the workload a replay measures.

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "operator/common/status.h"
#include "operator/common/subprocess.h"

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

// How the workload ended: "exit code 3", "killed by signal 9 (SIGKILL)".
using WorkloadExit = SubprocessExit;

class WorkloadProcess {
 public:
  // Starts argv[0] (searched in PATH) in a process group of its own, killed
  // when this process dies (a Subprocess with those options). Fails when the
  // program cannot be executed, with the reason.
  static Result<WorkloadProcess> Start(const WorkloadLaunch& launch);

  WorkloadProcess(WorkloadProcess&& other) noexcept;
  WorkloadProcess& operator=(WorkloadProcess&&) = delete;
  // Stops the workload if it still runs.
  ~WorkloadProcess();

  pid_t pid() const { return process_.pid(); }
  // Non-blocking; once exited, stays exited.
  WorkloadExit Poll();
  // SIGTERM to the process group, SIGKILL after `grace`. Returns how it ended.
  WorkloadExit Stop(std::chrono::milliseconds grace);

 private:
  explicit WorkloadProcess(Subprocess process) : process_(std::move(process)) {}

  Subprocess process_;
};

// The last `lines` lines of a text file, for reporting why a workload failed.
std::string TailOfFile(const std::string& path, int lines);

}  // namespace allocguard::replay
