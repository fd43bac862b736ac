#pragma once

// Reading a process tree's memory and CPU from /proc.
//
// All paths are relative to a proc root ("/proc" in production) so tests can
// point the reader at a hand-made tree.

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "operator/common/status.h"

namespace allocguard::replay {

struct ProcessTreeUsage {
  int processes = 0;
  int threads = 0;
  int64_t anon_bytes = 0;  // sum of RssAnon
  int64_t rss_bytes = 0;   // sum of VmRSS
  // utime + stime of the live processes, plus the root's reaped children.
  double cpu_seconds = 0;
};

// One process as /proc/<pid>/stat shows it.
struct ProcessInfo {
  pid_t pid = 0;
  pid_t ppid = 0;
  std::string comm;  // the command name (at most 15 bytes, as the kernel keeps it)
  char state = '?';  // R, S, D, Z (zombie), ...
};

class ProcReader {
 public:
  explicit ProcReader(std::string proc_root = "/proc") : root_(std::move(proc_root)) {}

  // The root and all its descendants that are alive now, root first.
  std::vector<pid_t> ProcessTree(pid_t root) const;

  // Sums over ProcessTree(root). kNotFound when the root is gone. Processes
  // that exit between listing and reading are skipped.
  Result<ProcessTreeUsage> ReadUsage(pid_t root) const;

  // Sums over the union of the trees of `roots` (a process in two trees is
  // counted once). kNotFound when none of the roots is alive.
  Result<ProcessTreeUsage> ReadUsage(const std::vector<pid_t>& roots) const;

  // Every process visible under the proc root, in no particular order.
  std::vector<ProcessInfo> ListProcesses() const;

  // The paths of the shared objects a process has mapped (from maps), in
  // order of first appearance; used to verify which allocator was loaded.
  Result<std::vector<std::string>> MappedLibraries(pid_t pid) const;

 private:
  std::string root_;
};

}  // namespace allocguard::replay
