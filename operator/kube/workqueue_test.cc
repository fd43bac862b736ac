#include "operator/kube/workqueue.h"

#include <gtest/gtest.h>

#include <thread>

namespace allocguard::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(WorkQueueTest, DeduplicatesKeysWaitingInTheQueue) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.Add("a");
  q.Add("b");
  q.Add("a");
  EXPECT_EQ(q.Len(), 2u);
  EXPECT_EQ(*q.TryGet(), "a");
  EXPECT_EQ(*q.TryGet(), "b");
  EXPECT_FALSE(q.TryGet().has_value());
}

TEST(WorkQueueTest, AKeyBeingProcessedIsNotHandedOutAgainUntilDone) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.Add("a");
  ASSERT_EQ(*q.TryGet(), "a");
  q.Add("a");  // changed while being reconciled
  q.Add("a");
  EXPECT_FALSE(q.TryGet().has_value());
  q.Done("a");
  EXPECT_EQ(*q.TryGet(), "a");  // once more, not twice
  q.Done("a");
  EXPECT_FALSE(q.TryGet().has_value());
}

TEST(WorkQueueTest, PerKeyBackoffDoublesFrom5msAndForgetResetsIt) {
  FakeClock clock;
  WorkQueue q(&clock);
  std::vector<Clock::Duration> delays;
  for (int i = 0; i < 4; ++i) {
    q.AddRateLimited("a");
    Clock::Duration waited{0};
    // Bounded: a backoff that never ends fails here instead of hanging.
    while (!q.TryGet().has_value() && waited < milliseconds(1000)) {
      clock.Advance(milliseconds(1));
      waited += milliseconds(1);
    }
    delays.push_back(waited);
    q.Done("a");
  }
  EXPECT_EQ(delays, (std::vector<Clock::Duration>{milliseconds(5), milliseconds(10),
                                                  milliseconds(20), milliseconds(40)}));
  EXPECT_EQ(q.NumRequeues("a"), 4);
  q.Forget("a");
  EXPECT_EQ(q.NumRequeues("a"), 0);
  q.AddRateLimited("a");
  clock.Advance(milliseconds(5));
  EXPECT_TRUE(q.TryGet().has_value());
}

TEST(WorkQueueTest, BackoffIsCappedAt1000Seconds) {
  FakeClock clock;
  RateLimiter limiter(&clock);
  Clock::Duration last{0};
  for (int i = 0; i < 40; ++i) last = limiter.When("a");
  EXPECT_EQ(last, seconds(1000));
}

TEST(WorkQueueTest, OverallTokenBucketLimitsBurstsAcrossKeys) {
  FakeClock clock;
  RateLimiter limiter(&clock);
  // 100 distinct keys fit in the burst; the 101st waits for a token (1/10 s),
  // though its own backoff would be 5 ms.
  for (int i = 0; i < 100; ++i) EXPECT_EQ(limiter.When("k" + std::to_string(i)), milliseconds(5));
  EXPECT_EQ(limiter.When("k100"), milliseconds(100));
  EXPECT_EQ(limiter.When("k101"), milliseconds(200));
  clock.Advance(seconds(10));  // refills
  EXPECT_EQ(limiter.When("k102"), milliseconds(5));
}

TEST(WorkQueueTest, AddAfterKeepsTheEarlierTime) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.AddAfter("a", seconds(10));
  q.AddAfter("a", seconds(3));
  q.AddAfter("a", seconds(20));
  EXPECT_EQ(q.Waiting(), 1u);
  clock.Advance(seconds(2));
  EXPECT_EQ(q.Len(), 0u);
  clock.Advance(seconds(1));
  EXPECT_EQ(q.Len(), 1u);
  EXPECT_EQ(q.Waiting(), 0u);
}

TEST(WorkQueueTest, ShutDownReleasesABlockedGet) {
  WorkQueue q(RealClock::Get());
  std::optional<std::string> got = "unset";
  std::thread t([&] { got = q.Get(); });
  q.ShutDown();
  t.join();
  EXPECT_FALSE(got.has_value());
  q.Add("late");
  EXPECT_FALSE(q.TryGet().has_value());
}

TEST(WorkQueueTest, BlockingGetReturnsAKeyAddedByAnotherThread) {
  WorkQueue q(RealClock::Get());
  std::thread t([&] { q.Add("x"); });
  auto got = q.Get();
  t.join();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, "x");
}

}  // namespace
}  // namespace allocguard::kube
