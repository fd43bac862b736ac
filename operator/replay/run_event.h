#pragma once

// What happened during a replay run, besides its samples: the workload failed,
// the OOM killer struck, the workload exited, the judge decided, the allocator
// was seen loaded, the load's latencies. The runner records typed events; the
// text form ("oom: minute 7") exists only in the CSV's "# event:" lines, written
// by FormatRunEvent and read back once by ParseRunEvent.

#include <optional>
#include <string>

namespace allocguard::replay {

enum class RunEventKind {
  kFailed,           // "failed: <reason>"
  kOom,              // "oom: minute <m>"
  kExited,           // "exited: minute <m>"
  kDecided,          // "decided: <decision> at minute <m>"
  kAllocatorLoaded,  // "allocator loaded: <library>"
  kLatency,          // "latency: p50_ms=<v> p99_ms=<v> max_ms=<v>"
  kOther,            // any other line a file holds, kept as its text
};

struct RunEvent {
  RunEventKind kind = RunEventKind::kOther;
  // kFailed: the reason; kDecided: the decision's name; kAllocatorLoaded: the
  // library; kOther: the whole line.
  std::string text;
  // kOom, kExited, kDecided. Read from a file, nullopt when the minute is
  // not a number from 0 to INT_MAX.
  std::optional<int> minute;
  // kLatency, with one decimal as the CSV keeps them; read from a file,
  // nullopt for a missing or malformed figure.
  std::optional<double> p50_ms, p99_ms, max_ms;

  static RunEvent Failed(std::string reason);
  static RunEvent Oom(int minute);
  static RunEvent Exited(int minute);
  static RunEvent Decided(std::string decision, int minute);
  static RunEvent AllocatorLoaded(std::string library);
  static RunEvent Latency(double p50_ms, double p99_ms, double max_ms);

  bool operator==(const RunEvent&) const = default;
};

// The event's line in a CSV (without the "# event: " prefix); the latency
// figures with one decimal.
std::string FormatRunEvent(const RunEvent& event);

// The event a line written by FormatRunEvent stands for. Never fails: a line
// of no known form is kOther with the line as its text, so that a damaged or
// newer file still reads.
RunEvent ParseRunEvent(const std::string& line);

// For test failure messages (GoogleTest finds it): the text form.
void PrintTo(const RunEvent& event, std::ostream* os);

}  // namespace allocguard::replay
