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

class ProcReader {
 public:
  explicit ProcReader(std::string proc_root = "/proc") : root_(std::move(proc_root)) {}

  // The root and all its descendants that are alive now, root first.
  std::vector<pid_t> ProcessTree(pid_t root) const;

  // Sums over ProcessTree(root). kNotFound when the root is gone. Processes
  // that exit between listing and reading are skipped.
  Result<ProcessTreeUsage> ReadUsage(pid_t root) const;

  // The paths of the shared objects a process has mapped (from maps), in
  // order of first appearance; used to verify which allocator was loaded.
  Result<std::vector<std::string>> MappedLibraries(pid_t pid) const;

 private:
  std::string root_;
};

}  // namespace allocguard::replay
