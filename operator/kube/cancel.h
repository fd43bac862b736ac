#pragma once

// Cancellation shared by long-running client loops (watches, informers, leader
// election): Cancel() wakes sleepers and interrupts registered requests.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>

#include "operator/common/clock.h"

namespace allocguard::kube {

// Thread-safe.
class Canceller {
 public:
  void Cancel();
  bool cancelled() const;

  // Runs on_cancel on Cancel(), or at once if already cancelled. Returns an id
  // for Unregister(); after Unregister() returns, on_cancel is not running and
  // will not run. on_cancel must be quick and must not call this Canceller.
  int Register(std::function<void()> on_cancel);
  void Unregister(int id);

  // Sleeps d on clock; returns false (early) when cancelled. The clock is
  // polled in slices of at most 50 ms, so a FakeClock (whose SleepUntil
  // returns at once) makes this return at once too.
  bool SleepFor(Clock* clock, Clock::Duration d);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool cancelled_ = false;
  int next_id_ = 0;
  std::map<int, std::function<void()>> callbacks_;
};

}  // namespace allocguard::kube
