#include "operator/replay/run_event.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <sstream>

namespace allocguard::replay {

namespace {

constexpr char kFailedPrefix[] = "failed: ";
constexpr char kOomPrefix[] = "oom: minute ";
constexpr char kExitedPrefix[] = "exited: minute ";
constexpr char kDecidedPrefix[] = "decided: ";
constexpr char kDecidedMinute[] = " at minute ";
constexpr char kAllocatorPrefix[] = "allocator loaded: ";
constexpr char kLatencyPrefix[] = "latency: ";

bool ParseDouble(const std::string& s, double* out) {
  try {
    *out = std::stod(s);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// The minute an event names, when it is one: a number from 0 to what an int
// holds (5.6e77 from a damaged file was undefined behaviour to convert, found
// by fuzz/sample_csv_fuzzer).
std::optional<int> ParseMinute(const std::string& text) {
  double m;
  if (!ParseDouble(text, &m) || !(m >= 0 && m <= INT_MAX)) return std::nullopt;
  return static_cast<int>(m);
}

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

std::string After(const std::string& s, const char* prefix) {
  return s.substr(std::char_traits<char>::length(prefix));
}

RunEvent ParseLatency(const std::string& figures) {
  RunEvent e{.kind = RunEventKind::kLatency};
  std::istringstream in(figures);
  std::string kv;
  while (in >> kv) {
    double v;
    auto eq = kv.find('=');
    if (eq == std::string::npos || !ParseDouble(kv.substr(eq + 1), &v)) continue;
    const std::string key = kv.substr(0, eq);
    if (key == "p50_ms") e.p50_ms = v;
    if (key == "p99_ms") e.p99_ms = v;
    if (key == "max_ms") e.max_ms = v;
  }
  return e;
}

std::string MinuteText(const std::optional<int>& minute) {
  return minute ? std::to_string(*minute) : "";
}

std::string FormatLatency(const RunEvent& e) {
  std::string out = kLatencyPrefix;
  auto add = [&out](const char* key, const std::optional<double>& v) {
    if (!v) return;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s=%.1f",
                  out.size() > std::char_traits<char>::length(kLatencyPrefix) ? " " : "", key, *v);
    out += buf;
  };
  add("p50_ms", e.p50_ms);
  add("p99_ms", e.p99_ms);
  add("max_ms", e.max_ms);
  return out;
}

// `v` as the CSV writes it ("%.1f"), so that a live result and the same run
// re-read from its CSV agree to the last digit.
double OneDecimal(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return std::strtod(buf, nullptr);
}

}  // namespace

RunEvent RunEvent::Failed(std::string reason) {
  return {.kind = RunEventKind::kFailed, .text = std::move(reason)};
}
RunEvent RunEvent::Oom(int minute) { return {.kind = RunEventKind::kOom, .minute = minute}; }
RunEvent RunEvent::Exited(int minute) { return {.kind = RunEventKind::kExited, .minute = minute}; }
RunEvent RunEvent::Decided(std::string decision, int minute) {
  return {.kind = RunEventKind::kDecided, .text = std::move(decision), .minute = minute};
}
RunEvent RunEvent::AllocatorLoaded(std::string library) {
  return {.kind = RunEventKind::kAllocatorLoaded, .text = std::move(library)};
}
RunEvent RunEvent::Latency(double p50_ms, double p99_ms, double max_ms) {
  return {.kind = RunEventKind::kLatency,
          .p50_ms = OneDecimal(p50_ms),
          .p99_ms = OneDecimal(p99_ms),
          .max_ms = OneDecimal(max_ms)};
}

std::string FormatRunEvent(const RunEvent& e) {
  switch (e.kind) {
    case RunEventKind::kFailed:
      return kFailedPrefix + e.text;
    case RunEventKind::kOom:
      return kOomPrefix + MinuteText(e.minute);
    case RunEventKind::kExited:
      return kExitedPrefix + MinuteText(e.minute);
    case RunEventKind::kDecided:
      return kDecidedPrefix + e.text + kDecidedMinute + MinuteText(e.minute);
    case RunEventKind::kAllocatorLoaded:
      return kAllocatorPrefix + e.text;
    case RunEventKind::kLatency:
      return FormatLatency(e);
    case RunEventKind::kOther:
      break;
  }
  return e.text;
}

RunEvent ParseRunEvent(const std::string& line) {
  if (StartsWith(line, kFailedPrefix)) return RunEvent::Failed(After(line, kFailedPrefix));
  if (StartsWith(line, kOomPrefix)) {
    return {.kind = RunEventKind::kOom, .minute = ParseMinute(After(line, kOomPrefix))};
  }
  if (StartsWith(line, kExitedPrefix)) {
    return {.kind = RunEventKind::kExited, .minute = ParseMinute(After(line, kExitedPrefix))};
  }
  if (StartsWith(line, kLatencyPrefix)) return ParseLatency(After(line, kLatencyPrefix));
  if (StartsWith(line, kAllocatorPrefix)) {
    return RunEvent::AllocatorLoaded(After(line, kAllocatorPrefix));
  }
  const size_t start = std::char_traits<char>::length(kDecidedPrefix);
  const size_t at = line.rfind(kDecidedMinute);
  if (StartsWith(line, kDecidedPrefix) && at != std::string::npos && at >= start) {
    return {
        .kind = RunEventKind::kDecided,
        .text = line.substr(start, at - start),
        .minute = ParseMinute(line.substr(at + std::char_traits<char>::length(kDecidedMinute)))};
  }
  return {.kind = RunEventKind::kOther, .text = line};
}

void PrintTo(const RunEvent& event, std::ostream* os) { *os << FormatRunEvent(event); }

}  // namespace allocguard::replay
