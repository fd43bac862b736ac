#include "operator/metrics/process_metrics.h"

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "operator/common/version.h"

namespace allocguard::metrics {
namespace {

Result<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(path + ": " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Entries of a directory other than "." and "..".
Result<int64_t> CountEntries(const std::string& path) {
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return NotFound(path + ": " + std::strerror(errno));
  int64_t count = 0;
  while (dirent* entry = readdir(dir)) {
    if (std::strcmp(entry->d_name, ".") != 0 && std::strcmp(entry->d_name, "..") != 0) ++count;
  }
  closedir(dir);
  return count;
}

bool ParseInt64(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const auto v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

}  // namespace

Result<ProcStatTimes> ParseProcStat(const std::string& text, int64_t ticks_per_second) {
  if (ticks_per_second <= 0) return InvalidArgument("ticks per second must be positive");
  // The command name is the text between the first '(' and the last ')'.
  size_t close = text.rfind(')');
  if (close == std::string::npos) return InvalidArgument("stat: no ')' after the command name");
  std::istringstream rest(text.substr(close + 1));
  std::vector<std::string> fields;  // fields[0] is field 3 (state)
  for (std::string f; rest >> f;) fields.push_back(f);
  // utime, stime, starttime are fields 14, 15, 22.
  constexpr size_t kUtime = 14 - 3;
  constexpr size_t kStime = 15 - 3;
  constexpr size_t kStart = 22 - 3;
  if (fields.size() <= kStart) return InvalidArgument("stat: fewer than 22 fields");
  int64_t utime = 0;
  int64_t stime = 0;
  int64_t start = 0;
  if (!ParseInt64(fields[kUtime], &utime) || !ParseInt64(fields[kStime], &stime) ||
      !ParseInt64(fields[kStart], &start)) {
    return InvalidArgument("stat: utime, stime or starttime is not a number");
  }
  ProcStatTimes times;
  times.cpu_seconds = static_cast<double>(utime + stime) / static_cast<double>(ticks_per_second);
  times.start_seconds_since_boot =
      static_cast<double>(start) / static_cast<double>(ticks_per_second);
  return times;
}

Result<int64_t> ParseBootTime(const std::string& text) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("btime ", 0) != 0) continue;
    int64_t value = 0;
    if (!ParseInt64(line.substr(6), &value)) return InvalidArgument("stat: btime is not a number");
    return value;
  }
  return NotFound("stat: no btime line");
}

std::optional<int64_t> StatusFieldBytes(const std::string& text, const std::string& field) {
  std::istringstream lines(text);
  const std::string prefix = field + ":";
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::istringstream rest(line.substr(prefix.size()));
    int64_t value = 0;
    std::string unit;
    if (!(rest >> value)) return std::nullopt;
    rest >> unit;
    return unit == "kB" ? value * 1024 : value;
  }
  return std::nullopt;
}

std::optional<int64_t> ParseMaxOpenFiles(const std::string& text) {
  std::istringstream lines(text);
  const std::string prefix = "Max open files";
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::istringstream rest(line.substr(prefix.size()));
    std::string soft;
    rest >> soft;
    int64_t value = 0;
    if (soft == "unlimited" || !ParseInt64(soft, &value)) return std::nullopt;
    return value;
  }
  return std::nullopt;
}

Result<ProcessStats> ProcessStatsReader::Read() const {
  const std::string self = root_ + "/self";
  AG_ASSIGN_OR_RETURN(std::string stat_text, ReadWholeFile(self + "/stat"));
  AG_ASSIGN_OR_RETURN(ProcStatTimes times, ParseProcStat(stat_text, sysconf(_SC_CLK_TCK)));
  AG_ASSIGN_OR_RETURN(std::string system_stat, ReadWholeFile(root_ + "/stat"));
  AG_ASSIGN_OR_RETURN(int64_t boot_time, ParseBootTime(system_stat));
  AG_ASSIGN_OR_RETURN(std::string status_text, ReadWholeFile(self + "/status"));
  AG_ASSIGN_OR_RETURN(int64_t open_fds, CountEntries(self + "/fd"));

  ProcessStats stats;
  stats.cpu_seconds = times.cpu_seconds;
  stats.start_time_seconds = static_cast<double>(boot_time) + times.start_seconds_since_boot;
  stats.resident_bytes = StatusFieldBytes(status_text, "VmRSS").value_or(0);
  stats.virtual_bytes = StatusFieldBytes(status_text, "VmSize").value_or(0);
  // Like other Prometheus clients, counts the descriptor that lists them.
  stats.open_fds = open_fds;
  auto limits = ReadWholeFile(self + "/limits");
  if (limits.ok()) stats.max_fds = ParseMaxOpenFiles(*limits);
  return stats;
}

void AddProcessMetrics(Registry& registry, ProcessStatsReader reader) {
  registry.AddCollector([reader = std::move(reader)]() {
    std::vector<CollectedFamily> families;
    auto stats = reader.Read();
    if (!stats.ok()) return families;
    auto add = [&](const char* name, const char* help, MetricType type, double value) {
      families.push_back(CollectedFamily{name, help, type, {CollectedSample{{}, value}}});
    };
    add("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
        MetricType::kCounter, stats->cpu_seconds);
    add("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
        MetricType::kGauge, stats->start_time_seconds);
    add("process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::kGauge,
        static_cast<double>(stats->resident_bytes));
    add("process_virtual_memory_bytes", "Virtual memory size in bytes.", MetricType::kGauge,
        static_cast<double>(stats->virtual_bytes));
    add("process_open_fds", "Number of open file descriptors.", MetricType::kGauge,
        static_cast<double>(stats->open_fds));
    if (stats->max_fds) {
      add("process_max_fds", "Maximum number of open file descriptors.", MetricType::kGauge,
          static_cast<double>(*stats->max_fds));
    }
    return families;
  });
}

void AddBuildInfo(Registry& registry) {
  registry
      .AddGauge("allocguard_build_info", "The allocguard release this process runs; always 1.",
                {"version"})
      .With({std::string(Version())})
      .Set(1);
}

}  // namespace allocguard::metrics
