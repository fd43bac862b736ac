#pragma once

// Time only through this interface, so that logic which waits, samples or
// schedules can be tested with a FakeClock and no real sleeping.

#include <chrono>
#include <mutex>

namespace allocguard {

class Clock {
 public:
  using Duration = std::chrono::steady_clock::duration;
  using TimePoint = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;
  // Monotonic time; never goes backwards.
  virtual TimePoint Now() const = 0;
  // Wall-clock time, for timestamps people read.
  virtual std::chrono::system_clock::time_point WallNow() const = 0;
  // Blocks the calling thread until Now() >= deadline.
  virtual void SleepUntil(TimePoint deadline) = 0;
};

class RealClock final : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
  std::chrono::system_clock::time_point WallNow() const override {
    return std::chrono::system_clock::now();
  }
  void SleepUntil(TimePoint deadline) override;

  // The process-wide real clock. Thread-safe.
  static RealClock* Get();
};

// A clock that moves only when told to. SleepUntil advances it to the deadline
// at once, so code under test runs as fast as the CPU allows. Thread-safe.
class FakeClock final : public Clock {
 public:
  TimePoint Now() const override;
  std::chrono::system_clock::time_point WallNow() const override;
  void SleepUntil(TimePoint deadline) override;
  void Advance(Duration d);

 private:
  mutable std::mutex mu_;
  TimePoint now_{std::chrono::hours(1)};
};

}  // namespace allocguard
