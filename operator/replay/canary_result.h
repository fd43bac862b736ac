#pragma once

// The compact result an in-pod replay driver writes into its container's
// termination message, and the operator reads back from the Pod's status.
//
// The kubelet keeps at most 4096 bytes of a termination message, so
// EncodeCanaryResult guarantees its output fits: when the full result would
// not, it shortens the message and then keeps every k-th floor (floor_stride
// records k), always the same way for the same input.

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "operator/common/books_reading.h"
#include "operator/common/status.h"
#include "operator/common/verdict.h"

namespace allocguard::replay {

// The kubelet's limit on a termination message, in bytes.
inline constexpr size_t kMaxTerminationMessageBytes = 4096;

struct CanaryResult {
  int version = 1;
  std::string variant;                 // the variant's name ("candidate", "glibc", ...)
  std::string allocator;               // "glibc" | "jemalloc" | "mimalloc" | "tcmalloc"
  Verdict verdict = Verdict::kFailed;  // written as its name: Flat, Ratchet, Errors, Failed, ...
  // Per-minute floors after warm-up, in MiB, oldest first. When floor_stride
  // is k > 1, entry i is the floor of the i*k-th judged minute, and the last
  // entry is always the last judged minute.
  std::vector<double> floors_mib;
  int floor_stride = 1;
  // Least-squares slope of the floors and its confidence interval; NaN when
  // there were too few floors to fit.
  double slope_gib_per_hour = 0;
  double slope_low = 0;
  double slope_high = 0;
  double peak_mib = 0;
  // What a bake-off ranks by (bake_off.h), NaN when not measured: the floor
  // level (the median per-minute floor, from every floor even when
  // floors_mib is thinned), the workload's CPU seconds over the run, and the
  // p99 latency of its responses in milliseconds.
  double floor_level_mib = std::numeric_limits<double>::quiet_NaN();
  double cpu_seconds = std::numeric_limits<double>::quiet_NaN();
  double p99_ms = std::numeric_limits<double>::quiet_NaN();
  int64_t requests = 0;  // completed
  int64_t errors = 0;    // responses outside the expected set
  int64_t late = 0;      // requests started later than late_after
  // The workload's processes disappeared during the run (exited or killed by
  // the OOM killer; the Pod status tells which), in minute exit_minute from
  // the start of the load.
  bool workload_exited = false;
  int exit_minute = -1;
  // The memory figure is the RssAnon of the workload's processes only: the
  // driver cannot see another container's cgroup (dirty/writeback pages).
  bool anon_only = false;
  int minutes = 0;      // length of the run in whole minutes
  std::string message;  // one line for a person: the verdict's explanation or the failure
  // The allocator's books (books_floors.h), when the stats agent published
  // them: their reading (absent: no books; written as its name), per-minute
  // floors of in-use and retained bytes in MiB (thinned like floors_mib,
  // with the same floor_stride), and their slopes in GiB/h (NaN with too
  // few floors).
  std::optional<BooksReading> books_reading;
  std::vector<double> in_use_floors_mib;
  std::vector<double> retained_floors_mib;
  double in_use_slope_gib_per_hour = 0;
  double retained_slope_gib_per_hour = 0;
};

// Compact JSON of at most kMaxTerminationMessageBytes bytes. Non-finite
// numbers are written as null; invalid UTF-8 in strings is replaced.
std::string EncodeCanaryResult(const CanaryResult& result);

// Reads what EncodeCanaryResult wrote. Never throws: garbage, a truncated
// message, a wrong type in a field or an unknown version is InvalidArgument
// saying what was wrong. Unknown fields are ignored; missing fields keep
// their defaults, except verdict, which is required and must be one of the
// names VerdictName writes.
Result<CanaryResult> DecodeCanaryResult(const std::string& text);

}  // namespace allocguard::replay
