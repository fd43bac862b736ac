#pragma once

// Per-minute floors of the guard's samples and the floor slope over a rolling
// window, kept incrementally: the guard runs for weeks, so it holds only the
// open minute's samples and the floors inside the window.
//
// A minute's floor is computed by memory::ComputeMinuteFloors (the replay
// engine's rule: the lowest judged figure, and only for a minute whose samples
// reach within one interval of its end); the slope by
// memory::FitSlopeInterval and memory::TheilSenSlope. Not thread-safe: the
// sampling loop owns it.

#include <deque>
#include <optional>
#include <vector>

#include "operator/memory/memory_sample.h"
#include "operator/memory/slope_interval.h"

namespace allocguard::guard {

struct FloorWindowOptions {
  int window_minutes = 30;  // floors older than this many minutes drop out
  int warmup_minutes = 1;   // minutes from the start that never give a floor
  double sample_interval_seconds = 2.0;
  // Each side of the slope interval excludes the true slope with this chance.
  double one_sided_alpha = 0.05;
};

struct FloorSlope {
  int floors = 0;              // floors in the window the fit rests on
  double slope_gib_per_h = 0;  // least squares
  double low_gib_per_h = 0;    // interval; -inf/+inf when not valid
  double high_gib_per_h = 0;
  double theil_sen_gib_per_h = 0;  // robust companion
  bool valid = false;              // at least 3 floors in distinct minutes
};

class FloorWindow {
 public:
  explicit FloorWindow(FloorWindowOptions options) : options_(options) {}

  // Adds a sample. REQUIRES: t_seconds never decreases between calls.
  // Returns the floor of a minute that this sample completed, if any.
  std::optional<memory::MinuteFloor> Add(const memory::MemorySample& sample);

  // The floors inside the window, oldest first.
  const std::deque<memory::MinuteFloor>& floors() const { return floors_; }
  // The most recent completed floor.
  std::optional<memory::MinuteFloor> current_floor() const;
  FloorSlope Slope() const;

 private:
  void CloseOpenMinute();

  FloorWindowOptions options_;
  int open_minute_ = -1;
  std::vector<memory::MemorySample> open_;  // samples of open_minute_
  std::deque<memory::MinuteFloor> floors_;
};

}  // namespace allocguard::guard
