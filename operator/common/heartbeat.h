#pragma once

// A liveness signal from a loop that must keep making progress (a controller
// worker, the webhook server's event loop). The loop calls Beat() whenever it
// makes progress and says whether work is still waiting for it. The loop is
// wedged when work has been waiting and no beat came for longer than a bound;
// a loop that is idle by its own account is never wedged, however long it
// sleeps. Thread-safe and lock-free: Beat() costs two atomic stores.

#include <atomic>
#include <chrono>
#include <cstdint>

#include "operator/common/clock.h"

namespace allocguard {

class Heartbeat {
 public:
  // busy: work is waiting for the loop after this beat (an item it is about to
  // process, a queue that is not empty, a loop that must turn again soon).
  void Beat(Clock::TimePoint now, bool busy) {
    last_ns_.store(now.time_since_epoch().count(), std::memory_order_relaxed);
    busy_.store(busy, std::memory_order_relaxed);
  }

  // How long work has waited with no beat: zero when idle or never started,
  // else the time since the last beat.
  Clock::Duration StalledFor(Clock::TimePoint now) const {
    if (!busy_.load(std::memory_order_relaxed)) return Clock::Duration::zero();
    Clock::TimePoint last{Clock::Duration(last_ns_.load(std::memory_order_relaxed))};
    return now > last ? now - last : Clock::Duration::zero();
  }

 private:
  std::atomic<int64_t> last_ns_{0};
  std::atomic<bool> busy_{false};
};

}  // namespace allocguard
