#pragma once

// A workload's memory cgroup, on cgroup v1 (these machines) or v2 (most
// production nodes), found through /proc/self/mountinfo and /proc/<pid>/cgroup.
//
// Every path is read below a filesystem prefix ("" in production) so tests can
// build a fake /proc and /sys tree in a temporary directory.

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "operator/common/status.h"

namespace allocguard::replay {

struct CgroupMemoryStat {
  int64_t anon_bytes = 0;
  int64_t dirty_bytes = 0;
  int64_t writeback_bytes = 0;
  int64_t usage_bytes = 0;
  // Processes the kernel's OOM killer killed in this cgroup so far.
  int64_t oom_kills = 0;
};

class MemoryCgroup {
 public:
  // Creates a memory cgroup `name` below the one this process runs in, with
  // an optional limit. Fails with a message saying why (no memory controller,
  // no permission, v2 controller not delegated) so the caller can fall back
  // to /proc only and say so.
  static Result<std::unique_ptr<MemoryCgroup>> Create(const std::string& name,
                                                      std::optional<int64_t> limit_bytes,
                                                      const std::string& fs_prefix = "");

  // The memory cgroup `pid` already runs in, for reading only; never removed.
  static Result<std::unique_ptr<MemoryCgroup>> OfProcess(pid_t pid,
                                                         const std::string& fs_prefix = "");

  // Removes a created cgroup, killing any process still in it.
  ~MemoryCgroup();

  MemoryCgroup(const MemoryCgroup&) = delete;
  MemoryCgroup& operator=(const MemoryCgroup&) = delete;

  int version() const { return version_; }
  // The cgroup's directory, including the filesystem prefix.
  const std::string& path() const { return path_; }

  Status AddProcess(pid_t pid);
  Result<CgroupMemoryStat> ReadStat() const;

 private:
  MemoryCgroup(int version, std::string path, bool owned)
      : version_(version), path_(std::move(path)), owned_(owned) {}

  int version_;
  std::string path_;
  bool owned_;
};

}  // namespace allocguard::replay
