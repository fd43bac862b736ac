#include "operator/memory/memory_sample.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace allocguard::memory {

std::vector<MinuteFloor> ComputeMinuteFloors(std::span<const MemorySample> samples,
                                             const FloorOptions& options) {
  std::vector<MinuteFloor> out;
  if (samples.empty()) return out;
  double last_t = samples.back().t_seconds;
  for (const MemorySample& s : samples) last_t = std::max(last_t, s.t_seconds);

  std::map<int, MinuteFloor> by_minute;
  for (const MemorySample& s : samples) {
    if (s.t_seconds < 0) continue;
    int minute = static_cast<int>(std::floor(s.t_seconds / 60.0));
    if (minute < options.warmup_minutes) continue;
    auto [it, inserted] = by_minute.try_emplace(minute);
    MinuteFloor& f = it->second;
    auto judged = static_cast<double>(s.JudgedBytes());
    if (inserted || judged < f.floor_bytes) f.floor_bytes = judged;
    f.minute = minute;
    ++f.samples;
  }
  for (const auto& [minute, floor] : by_minute) {
    double minute_end = 60.0 * (minute + 1);
    // Complete when the samples reach within one interval of the minute's end.
    if (last_t + options.sample_interval_seconds + 1e-9 < minute_end) continue;
    out.push_back(floor);
  }
  return out;
}

std::vector<MinuteFloor> ComputeSegmentFloors(std::span<const MemorySample> samples,
                                              const SegmentFloorOptions& options) {
  std::vector<MinuteFloor> out;
  if (samples.empty() || options.segment_seconds <= 0) return out;
  double last_t = samples.back().t_seconds;
  for (const MemorySample& s : samples) last_t = std::max(last_t, s.t_seconds);

  const double warmup_s = 60.0 * options.warmup_minutes;
  std::map<int, std::vector<double>> by_segment;
  for (const MemorySample& s : samples) {
    if (s.t_seconds < warmup_s) continue;
    const int segment = static_cast<int>(std::floor(s.t_seconds / options.segment_seconds));
    by_segment[segment].push_back(static_cast<double>(s.JudgedBytes()));
  }
  for (auto& [segment, values] : by_segment) {
    const double segment_end = options.segment_seconds * (segment + 1);
    if (last_t + options.sample_interval_seconds + 1e-9 < segment_end) continue;
    std::sort(values.begin(), values.end());
    const double pos = options.quantile * static_cast<double>(values.size() - 1);
    const auto lo = static_cast<size_t>(pos);
    const double frac = pos - static_cast<double>(lo);
    const double floor_bytes =
        lo + 1 < values.size() ? values[lo] * (1 - frac) + values[lo + 1] * frac : values[lo];
    out.push_back({.minute = segment,
                   .floor_bytes = floor_bytes,
                   .samples = static_cast<int>(values.size())});
  }
  return out;
}

}  // namespace allocguard::memory
