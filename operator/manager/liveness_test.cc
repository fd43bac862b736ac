#include "operator/manager/liveness.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "operator/common/heartbeat.h"

namespace allocguard::manager {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(HeartbeatTest, StallsOnlyWhileWorkWaitsWithoutABeat) {
  FakeClock clock;
  Heartbeat h;
  EXPECT_EQ(h.StalledFor(clock.Now()), Clock::Duration::zero()) << "never started";
  h.Beat(clock.Now(), true);  // took an item
  clock.Advance(seconds(40));
  EXPECT_EQ(h.StalledFor(clock.Now()), seconds(40));
  h.Beat(clock.Now(), false);  // done, nothing waiting
  clock.Advance(std::chrono::hours(3));
  EXPECT_EQ(h.StalledFor(clock.Now()), Clock::Duration::zero()) << "an idle loop is not wedged";
}

TEST(CheckLivenessTest, FailsNamingEachLoopPastItsBound) {
  struct Case {
    const char* what;
    std::vector<LoopProgress> loops;
    bool alive;
  };
  const std::vector<Case> cases = {
      {"no loops", {}, true},
      {"all idle",
       {{"reconciler policy", seconds(0), seconds(300)},
        {"webhook server", seconds(0), seconds(30)}},
       true},
      {"busy within bound", {{"webhook server", seconds(30), seconds(30)}}, true},
      {"one past its bound",
       {{"reconciler policy", seconds(10), seconds(300)},
        {"webhook server", seconds(31), seconds(30)}},
       false},
  };
  for (const Case& c : cases) {
    Status s = CheckLiveness(c.loops);
    EXPECT_EQ(s.ok(), c.alive) << c.what << ": " << s.ToString();
  }
  Status two = CheckLiveness({{"reconciler canary", seconds(400), seconds(300)},
                              {"reconciler policy", seconds(1), seconds(300)},
                              {"webhook server", seconds(45), seconds(30)}});
  EXPECT_EQ(two.code(), StatusCode::kUnavailable);
  EXPECT_THAT(two.message(), HasSubstr("reconciler canary has made no progress for 400 s"));
  EXPECT_THAT(two.message(), HasSubstr("webhook server has made no progress for 45 s"));
  EXPECT_THAT(two.message(), Not(HasSubstr("reconciler policy")));
}

}  // namespace
}  // namespace allocguard::manager
