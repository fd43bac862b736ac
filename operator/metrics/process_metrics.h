#pragma once

// The standard process_* metrics of Prometheus client libraries, read from
// /proc at scrape time: resident and virtual memory, CPU time, open and
// maximum file descriptors, start time.

#include <cstdint>
#include <optional>
#include <string>

#include "operator/common/status.h"
#include "operator/metrics/registry.h"

namespace allocguard::metrics {

struct ProcessStats {
  double cpu_seconds = 0;         // utime + stime
  double start_time_seconds = 0;  // since the Unix epoch
  int64_t resident_bytes = 0;     // VmRSS
  int64_t virtual_bytes = 0;      // VmSize
  int64_t open_fds = 0;
  std::optional<int64_t> max_fds;  // soft RLIMIT_NOFILE; absent when unlimited
};

// Parses the text of /proc/<pid>/stat: utime and stime (fields 14, 15) in
// seconds and starttime (field 22) in seconds since boot. The command name in
// parentheses may contain spaces and parentheses.
struct ProcStatTimes {
  double cpu_seconds = 0;
  double start_seconds_since_boot = 0;
};
Result<ProcStatTimes> ParseProcStat(const std::string& text, int64_t ticks_per_second);

// The "btime" line of /proc/stat: boot time in seconds since the epoch.
Result<int64_t> ParseBootTime(const std::string& text);

// A "Name:   123 kB" line of /proc/<pid>/status, in bytes; nullopt when the
// field is absent.
std::optional<int64_t> StatusFieldBytes(const std::string& text, const std::string& field);

// The soft "Max open files" limit from /proc/<pid>/limits; nullopt when
// "unlimited" or absent.
std::optional<int64_t> ParseMaxOpenFiles(const std::string& text);

// Reads the calling process's stats from <proc_root>/self/... and
// <proc_root>/stat. Thread-safe (no state besides the root).
class ProcessStatsReader {
 public:
  explicit ProcessStatsReader(std::string proc_root = "/proc") : root_(std::move(proc_root)) {}
  Result<ProcessStats> Read() const;

 private:
  std::string root_;
};

// Registers a collector rendering process_cpu_seconds_total,
// process_start_time_seconds, process_resident_memory_bytes,
// process_virtual_memory_bytes, process_open_fds and process_max_fds from
// reader at every scrape; nothing when the read fails.
void AddProcessMetrics(Registry& registry, ProcessStatsReader reader = ProcessStatsReader());

// allocguard_build_info{version="0.1.0"} 1: which release a process runs
// (the repository's VERSION file), as Prometheus exporters do with
// <name>_build_info.
void AddBuildInfo(Registry& registry);

}  // namespace allocguard::metrics
