#pragma once

// One memory sample of a workload, as the replay engine and the guard take it
// every ~2 s, and the per-minute floors computed from a series of them.

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace allocguard::memory {

inline constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;
inline constexpr double kBytesPerMiB = 1024.0 * 1024.0;

struct MemorySample {
  double t_seconds = 0;  // since the start of the measured phase
  // Sum of RssAnon over the workload's process tree (from /proc/<pid>/status).
  int64_t anon_bytes = 0;
  // Sum of VmRSS over the process tree; recorded, never judged (seed 003).
  int64_t rss_bytes = 0;
  // From the workload's memory cgroup, when one is visible; absent otherwise.
  std::optional<int64_t> cgroup_anon_bytes;
  std::optional<int64_t> cgroup_dirty_bytes;
  std::optional<int64_t> cgroup_writeback_bytes;
  std::optional<int64_t> cgroup_usage_bytes;

  // The figure that is judged: anon memory plus dirty and writeback file pages,
  // which is what the cgroup's OOM killer counts and the kernel cannot drop.
  int64_t JudgedBytes() const {
    return anon_bytes + cgroup_dirty_bytes.value_or(0) + cgroup_writeback_bytes.value_or(0);
  }
};

// The lowest judged figure within one minute of the run. Peaks are in-flight
// work; the floor is what stays.
struct MinuteFloor {
  int minute = 0;  // minute index from the start: minute m covers [60m, 60m+60) s
  double floor_bytes = 0;
  int samples = 0;
};

struct FloorOptions {
  // Minutes at the start that are excluded: the workload warms caches and
  // arenas there, which is growth the method must not count.
  int warmup_minutes = 1;
  // The nominal sample interval; a minute counts only when the samples reach
  // within one interval of its end, so a run cut mid-minute does not report a
  // floor from a few seconds of data.
  double sample_interval_seconds = 2.0;
};

// Per-minute floors of complete minutes after warm-up, in minute order.
// Minutes with no samples (a stalled sampler) are skipped, not invented.
std::vector<MinuteFloor> ComputeMinuteFloors(std::span<const MemorySample> samples,
                                             const FloorOptions& options);

// Floors of shorter segments or by a low quantile instead of the minimum:
// for comparing floor statistics (`allocguard evaluate-verdicts --samples`,
// docs/verdicts.md). The judged product uses ComputeMinuteFloors.
struct SegmentFloorOptions {
  double segment_seconds = 60;
  // 0 is the minimum. Otherwise the quantile of the segment's judged figures
  // with linear interpolation between order statistics: position
  // quantile * (count - 1) in the sorted figures, counting from 0.
  double quantile = 0;
  int warmup_minutes = 1;
  double sample_interval_seconds = 2.0;
};

// One floor per complete segment after warm-up, in order. MinuteFloor::minute
// is then the segment index from the start (segment k covers
// [k segment_seconds, (k + 1) segment_seconds)), so a judge given these
// floors works in segments, not minutes. With 60 s segments and quantile 0
// this is ComputeMinuteFloors.
std::vector<MinuteFloor> ComputeSegmentFloors(std::span<const MemorySample> samples,
                                              const SegmentFloorOptions& options);

}  // namespace allocguard::memory
