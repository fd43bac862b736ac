#include "operator/guard/actions.h"

#include <algorithm>
#include <cmath>

namespace allocguard::guard {

int64_t BackpressureGate::release_bytes() const {
  return static_cast<int64_t>(
      std::floor(static_cast<double>(threshold_) * options_.release_fraction));
}

bool BackpressureGate::Observe(int64_t judged_bytes) {
  if (open_) {
    above_ = judged_bytes > threshold_ ? above_ + 1 : 0;
    if (above_ >= std::max(1, options_.samples_above_to_close)) {
      open_ = false;
      above_ = 0;
      below_ = 0;
      return true;
    }
    return false;
  }
  below_ = judged_bytes <= release_bytes() ? below_ + 1 : 0;
  if (below_ >= std::max(1, options_.samples_below_to_open)) {
    open_ = true;
    above_ = 0;
    below_ = 0;
    return true;
  }
  return false;
}

std::optional<int64_t> RestartTriggerBytes(std::optional<int64_t> threshold_bytes,
                                           std::optional<int64_t> limit_bytes,
                                           const RestartOptions& options) {
  std::optional<int64_t> trigger = threshold_bytes;
  if (limit_bytes) {
    const int64_t margin =
        std::max(options.margin_min_bytes,
                 static_cast<int64_t>(options.margin_fraction * static_cast<double>(*limit_bytes)));
    const int64_t at = *limit_bytes - margin;
    if (at > 0) trigger = trigger ? std::min(*trigger, at) : at;
  }
  return trigger;
}

}  // namespace allocguard::guard
