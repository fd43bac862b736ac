#include "operator/common/clock.h"

#include <thread>

namespace allocguard {

void RealClock::SleepUntil(TimePoint deadline) { std::this_thread::sleep_until(deadline); }

RealClock* RealClock::Get() {
  static RealClock clock;
  return &clock;
}

Clock::TimePoint FakeClock::Now() const {
  std::lock_guard<std::mutex> lock(mu_);
  return now_;
}

std::chrono::system_clock::time_point FakeClock::WallNow() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(now_.time_since_epoch()));
}

void FakeClock::SleepUntil(TimePoint deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  if (deadline > now_) now_ = deadline;
}

void FakeClock::Advance(Duration d) {
  std::lock_guard<std::mutex> lock(mu_);
  now_ += d;
}

}  // namespace allocguard
