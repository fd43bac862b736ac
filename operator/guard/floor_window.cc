#include "operator/guard/floor_window.h"

#include <cmath>
#include <limits>

namespace allocguard::guard {

std::optional<memory::MinuteFloor> FloorWindow::Add(const memory::MemorySample& sample) {
  const int minute = static_cast<int>(std::floor(sample.t_seconds / 60.0));
  std::optional<memory::MinuteFloor> closed;
  if (minute != open_minute_ && !open_.empty()) {
    const size_t before = floors_.size();
    CloseOpenMinute();
    if (floors_.size() > before) closed = floors_.back();
  }
  open_minute_ = minute;
  open_.push_back(sample);
  // Drop floors that fell out of the window ending at the open minute.
  while (!floors_.empty() && floors_.front().minute <= minute - 1 - options_.window_minutes) {
    floors_.pop_front();
  }
  return closed;
}

void FloorWindow::CloseOpenMinute() {
  memory::FloorOptions floor_options;
  floor_options.warmup_minutes = options_.warmup_minutes;
  floor_options.sample_interval_seconds = options_.sample_interval_seconds;
  for (const memory::MinuteFloor& floor : memory::ComputeMinuteFloors(open_, floor_options)) {
    floors_.push_back(floor);
  }
  open_.clear();
}

std::optional<memory::MinuteFloor> FloorWindow::current_floor() const {
  if (floors_.empty()) return std::nullopt;
  return floors_.back();
}

FloorSlope FloorWindow::Slope() const {
  FloorSlope s;
  std::vector<memory::MinuteFloor> floors(floors_.begin(), floors_.end());
  s.floors = static_cast<int>(floors.size());
  s.low_gib_per_h = -std::numeric_limits<double>::infinity();
  s.high_gib_per_h = std::numeric_limits<double>::infinity();
  if (floors.size() < 2) return s;
  s.theil_sen_gib_per_h = memory::BytesPerMinuteToGiBPerHour(memory::TheilSenSlope(floors));
  const memory::SlopeInterval fit = memory::FitSlopeInterval(floors, options_.one_sided_alpha);
  s.slope_gib_per_h = memory::BytesPerMinuteToGiBPerHour(fit.slope);
  s.valid = fit.valid;
  if (fit.valid) {
    s.low_gib_per_h = memory::BytesPerMinuteToGiBPerHour(fit.low);
    s.high_gib_per_h = memory::BytesPerMinuteToGiBPerHour(fit.high);
  }
  return s;
}

}  // namespace allocguard::guard
