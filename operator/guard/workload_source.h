#pragma once

// Where the guard's samples come from: the workload's processes in /proc and
// their memory cgroup. An interface, so the guard's loop is tested with a
// table of readings and then again against real processes.

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "operator/common/status.h"
#include "operator/guard/allocator_check.h"
#include "operator/memory/memory_sample.h"

namespace allocguard::replay {
class MemoryCgroup;
}

namespace allocguard::guard {

struct WorkloadReading {
  std::vector<pid_t> pids;       // every workload process, ascending
  std::vector<pid_t> main_pids;  // those whose parent is not a workload process
  // anon/rss over the processes, cgroup figures when visible; t_seconds unset.
  memory::MemorySample sample;
  // The cgroup's memory limit, or the configured one; absent when unlimited
  // or unknown.
  std::optional<int64_t> limit_bytes;
  // Why no cgroup figures are in the sample, when they are not ("" when they are).
  std::string cgroup_note;
};

class WorkloadSource {
 public:
  virtual ~WorkloadSource() = default;
  // kNotFound when no workload process is alive.
  virtual Result<WorkloadReading> Read() = 0;
  virtual AllocatorObservation ObserveAllocator(pid_t pid) = 0;
  // Sends SIGTERM.
  virtual Status Terminate(pid_t pid) = 0;
};

struct ProcWorkloadSourceOptions {
  std::string proc_root = "/proc";
  std::string fs_prefix;  // below which /proc/self/mountinfo and cgroupfs are read ("" = /)
  // Local mode: these processes and their descendants are the workload.
  // Empty: pod mode, every process of the shared process namespace except
  // PID 1 (the pause process) and allocguard's own processes.
  std::vector<pid_t> pids;
  pid_t self = 0;           // the guard; 0: getpid()
  bool read_cgroup = true;  // false: /proc only (--cgroup none)
  // A limit to use when the cgroup's is not visible; the lower one wins when
  // both are known.
  std::optional<int64_t> limit_bytes;
};

std::unique_ptr<WorkloadSource> NewProcWorkloadSource(ProcWorkloadSourceOptions options);

// The memory limit of a cgroup directory (memory.limit_in_bytes on v1,
// memory.max on v2); nullopt when unlimited or unreadable.
std::optional<int64_t> ReadCgroupLimit(const std::string& cgroup_dir, int version);

}  // namespace allocguard::guard
