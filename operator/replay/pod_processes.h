#pragma once

// Finding the workload's processes from a driver container that shares its
// Pod's process namespace (shareProcessNamespace: true).
//
// In such a Pod, PID 1 is the sandbox's pause process and every container's
// processes are visible. The workload is every live process except PID 1,
// the driver itself and its children, and other allocguard processes;
// optionally only processes with a given command name (and their
// descendants), to leave another sidecar of the template out.

#include <sys/types.h>

#include <string>
#include <vector>

#include "operator/replay/proc_reader.h"

namespace allocguard::replay {

// The command name allocguard's own processes have.
inline constexpr char kAllocguardComm[] = "allocguard";

struct PodProcessFilter {
  pid_t self = 0;           // the driver; it and its descendants are never targets
  std::string target_comm;  // when set, only processes with this comm and their descendants
  // Test hook: treat only these processes (and their descendants) as the
  // Pod, instead of every process but PID 1. Lets a test run beside the
  // rest of a machine's processes.
  std::vector<pid_t> pod_pids_for_test;
};

// Pure: the workload's processes among `all`, ascending by pid. Zombies are
// not targets (they hold no memory and mean the process has exited).
std::vector<pid_t> SelectWorkloadProcesses(const std::vector<ProcessInfo>& all,
                                           const PodProcessFilter& filter);

}  // namespace allocguard::replay
