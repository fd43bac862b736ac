#include "operator/kube/cancel.h"

#include <algorithm>
#include <vector>

namespace allocguard::kube {

void Canceller::Cancel() {
  // Callbacks run under the lock, so that once Unregister() has returned its
  // callback is neither running nor about to run: the object it points to may
  // be destroyed right after.
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_) return;
  cancelled_ = true;
  for (auto& [id, fn] : callbacks_) fn();
  cv_.notify_all();
}

bool Canceller::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

int Canceller::Register(std::function<void()> on_cancel) {
  std::unique_lock<std::mutex> lock(mu_);
  if (cancelled_) {
    lock.unlock();
    on_cancel();
    return -1;
  }
  int id = next_id_++;
  callbacks_.emplace(id, std::move(on_cancel));
  return id;
}

void Canceller::Unregister(int id) {
  std::lock_guard<std::mutex> lock(mu_);
  callbacks_.erase(id);
}

bool Canceller::SleepFor(Clock* clock, Clock::Duration d) {
  const Clock::TimePoint deadline = clock->Now() + d;
  constexpr Clock::Duration kSlice = std::chrono::milliseconds(50);
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cancelled_) return false;
    }
    Clock::TimePoint now = clock->Now();
    if (now >= deadline) return true;
    Clock::TimePoint until = std::min(deadline, now + kSlice);
    if (dynamic_cast<RealClock*>(clock) != nullptr) {
      // Wake early on Cancel() instead of finishing the slice.
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_until(lock, until, [this] { return cancelled_; });
    } else {
      clock->SleepUntil(until);
    }
  }
}

}  // namespace allocguard::kube
