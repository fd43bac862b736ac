#include "operator/memory/change_point.h"

namespace allocguard::memory {

LateGrowth FindLateGrowth(std::span<const MinuteFloor> floors, double threshold_bytes_per_minute,
                          double alpha, int min_segment, SlopeNoise noise) {
  LateGrowth result;
  const int n = static_cast<int>(floors.size());
  const int last_start = n - min_segment;  // index of the last start examined
  if (last_start < 1) return result;
  result.candidates = last_start;
  const double per_start_alpha = alpha / result.candidates;
  bool have_best = false;
  for (int i = 1; i <= last_start; ++i) {
    SlopeInterval tail = FitSlopeInterval(floors.subspan(i), per_start_alpha, noise);
    if (!tail.valid) continue;
    if (!have_best || tail.low > result.tail.low) {
      result.tail = tail;
      result.start_minute = floors[i].minute;
      have_best = true;
    }
  }
  result.found = have_best && result.tail.low > threshold_bytes_per_minute;
  return result;
}

}  // namespace allocguard::memory
