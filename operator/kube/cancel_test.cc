#include "operator/kube/cancel.h"

#include <gtest/gtest.h>

#include <thread>

namespace allocguard::kube {
namespace {

TEST(CancellerTest, CancelWakesASleeperLongBeforeItsTime) {
  Canceller c;
  bool slept_fully = true;
  std::thread t([&] { slept_fully = c.SleepFor(RealClock::Get(), std::chrono::hours(1)); });
  c.Cancel();
  t.join();  // would take an hour if Cancel did not wake it
  EXPECT_FALSE(slept_fully);
  EXPECT_FALSE(c.SleepFor(RealClock::Get(), std::chrono::seconds(1)));
}

TEST(CancellerTest, FakeClockSleepsAdvanceFakeTime) {
  Canceller c;
  FakeClock clock;
  auto start = clock.Now();
  EXPECT_TRUE(c.SleepFor(&clock, std::chrono::seconds(30)));
  EXPECT_EQ(clock.Now() - start, std::chrono::seconds(30));
}

TEST(CancellerTest, CallbacksRunOnCancelOrAtOnceWhenAlreadyCancelled) {
  Canceller c;
  int runs = 0;
  int kept = c.Register([&] { ++runs; });
  int removed = c.Register([&] { runs += 100; });
  c.Unregister(removed);
  (void)kept;
  c.Cancel();
  EXPECT_EQ(runs, 1);
  c.Cancel();  // idempotent
  EXPECT_EQ(runs, 1);
  c.Register([&] { ++runs; });
  EXPECT_EQ(runs, 2);
}

}  // namespace
}  // namespace allocguard::kube
