#include <utility>

#include <gtest/gtest.h>

#include "controllers/reconcilers.h"

namespace allocguard::controllers {
namespace {

using nlohmann::json;

class CanarySlotsTest : public ::testing::Test {
 protected:
  CanarySlotsTest() {
    AddCanaryIndexes(canaries_);
    slots_.SetWake([this](const std::string& key) { woken_.push_back(key); });
  }
  void Set(const std::string& ns, const std::string& name, const std::string& phase) {
    canaries_.Upsert(
        {{"metadata",
          {{"namespace", ns}, {"name", name}, {"resourceVersion", std::to_string(++version_)}}},
         {"status", {{"phase", phase}}}});
  }
  CanarySlotAnswer Ask(const std::string& key, int limit, int namespace_limit) {
    auto slash = key.find('/');
    if (canaries_.Get(key) == nullptr) Set(key.substr(0, slash), key.substr(slash + 1), "Pending");
    CanarySlotAnswer d = slots_.TryAcquire(key, canaries_, limit, namespace_limit);
    if (d.start) Set(key.substr(0, slash), key.substr(slash + 1), "Running");
    return d;
  }

  std::vector<std::string> TakeWoken() { return std::exchange(woken_, {}); }

  kube::Store canaries_;
  CanarySlots slots_;
  int version_ = 0;
  std::vector<std::string> woken_;
};

// One namespace with many held rollouts does not keep another's waiting: the
// next free slot goes to the other namespace's first canary.
TEST_F(CanarySlotsTest, WaitingCanariesAreServedRoundRobinOverNamespaces) {
  EXPECT_TRUE(Ask("team-a/a1", 2, 0).start);
  EXPECT_TRUE(Ask("team-a/a2", 2, 0).start);
  CanarySlotAnswer a3 = Ask("team-a/a3", 2, 0);
  EXPECT_FALSE(a3.start);
  EXPECT_EQ(a3.running, 2);
  EXPECT_EQ(a3.position, 1);
  CanarySlotAnswer b1 = Ask("team-b/b1", 2, 0);
  EXPECT_FALSE(b1.start);
  // team-a was served last, so team-b's first canary is next although a3
  // asked earlier.
  EXPECT_EQ(b1.position, 1);
  EXPECT_EQ(Ask("team-a/a3", 2, 0).position, 2);
  EXPECT_EQ(Ask("team-a/a3", 2, 0).waiting, 2);

  Set("team-a", "a1", "Completed");  // a slot frees
  EXPECT_FALSE(Ask("team-a/a3", 2, 0).start) << "team-b's turn";
  EXPECT_TRUE(Ask("team-b/b1", 2, 0).start);
  Set("team-a", "a2", "Completed");
  EXPECT_TRUE(Ask("team-a/a3", 2, 0).start) << "the only one waiting";
}

TEST_F(CanarySlotsTest, ANamespaceAtItsOwnLimitIsPassedOver) {
  EXPECT_TRUE(Ask("team-a/a1", 4, 1).start);
  CanarySlotAnswer a2 = Ask("team-a/a2", 4, 1);
  EXPECT_FALSE(a2.start) << "team-a runs its one canary";
  EXPECT_EQ(a2.running_in_namespace, 1);
  EXPECT_TRUE(Ask("team-b/b1", 4, 1).start) << "the cluster has room and team-b none running";
  Set("team-a", "a1", "Failed");
  EXPECT_TRUE(Ask("team-a/a2", 4, 1).start);
}

TEST_F(CanarySlotsTest, CanariesThatWentAwayLeaveTheQueue) {
  EXPECT_TRUE(Ask("team-a/a1", 1, 0).start);
  EXPECT_FALSE(Ask("team-b/b1", 1, 0).start);
  EXPECT_FALSE(Ask("team-c/c1", 1, 0).start);
  canaries_.Remove({{"metadata", {{"namespace", "team-b"}, {"name", "b1"}}}});
  Set("team-a", "a1", "Completed");
  CanarySlotAnswer c1 = Ask("team-c/c1", 1, 0);
  EXPECT_TRUE(c1.start) << "b1 was deleted while it waited";
  EXPECT_EQ(c1.waiting, 0);
}

// The queue is not polled: a canary that ends wakes the one next in line,
// and only as many as there are free slots.
TEST_F(CanarySlotsTest, ACanaryThatEndsWakesTheNextInLine) {
  EXPECT_TRUE(Ask("team-a/a1", 2, 0).start);
  EXPECT_TRUE(Ask("team-a/a2", 2, 0).start);
  EXPECT_FALSE(Ask("team-a/a3", 2, 0).start);
  EXPECT_FALSE(Ask("team-b/b1", 2, 0).start);
  EXPECT_FALSE(Ask("team-a/a4", 2, 0).start);
  EXPECT_TRUE(TakeWoken().empty()) << "no slot is free";

  Set("team-a", "a1", "Completed");
  slots_.Release("team-a/a1", canaries_, 2, 0);
  EXPECT_EQ(TakeWoken(), (std::vector<std::string>{"team-b/b1"})) << "one slot, team-b's turn";
  EXPECT_TRUE(Ask("team-b/b1", 2, 0).start);
  EXPECT_TRUE(TakeWoken().empty());

  // Two slots free at once: the next two in line are woken.
  Set("team-a", "a2", "Failed");
  canaries_.Remove({{"metadata", {{"namespace", "team-b"}, {"name", "b1"}}}});
  slots_.Release("team-b/b1", canaries_, 2, 0);
  EXPECT_EQ(TakeWoken(), (std::vector<std::string>{"team-a/a3", "team-a/a4"}));
}

// Woken canaries may ask in any order (several workers): one that asks out
// of turn when a slot is free wakes the one whose turn it is, and a slot
// does not stay free until the next look.
TEST_F(CanarySlotsTest, ACanaryAskingOutOfTurnWakesTheOneWhoseTurnItIs) {
  EXPECT_TRUE(Ask("team-a/a1", 1, 0).start);
  EXPECT_FALSE(Ask("team-a/a2", 1, 0).start);
  EXPECT_FALSE(Ask("team-a/a3", 1, 0).start);
  Set("team-a", "a1", "Completed");  // no Release: the cache shows it first
  CanarySlotAnswer a3 = Ask("team-a/a3", 1, 0);
  EXPECT_FALSE(a3.start);
  EXPECT_EQ(a3.position, 2);
  EXPECT_EQ(TakeWoken(), (std::vector<std::string>{"team-a/a2"}));
  EXPECT_TRUE(Ask("team-a/a2", 1, 0).start);
}

// A canary whose slot was granted but whose Job could not be created yet
// asks again on its retry: it keeps its slot instead of queueing behind
// others for it.
TEST_F(CanarySlotsTest, ACanaryThatHoldsASlotKeepsItWhenItAsksAgain) {
  ASSERT_TRUE(slots_.TryAcquire("team-a/a1", canaries_, 1, 0).start);
  Set("team-a", "a1", "Pending");  // the cache has not shown it running
  EXPECT_FALSE(Ask("team-a/a2", 1, 0).start);
  EXPECT_TRUE(slots_.TryAcquire("team-a/a1", canaries_, 1, 0).start);
  EXPECT_FALSE(Ask("team-a/a2", 1, 0).start) << "a1 still holds the only slot";
}

TEST(WaitingCanaryLookAgainTest, LongQueuesLookAgainLessOften) {
  using std::chrono::seconds;
  EXPECT_EQ(WaitingCanaryLookAgain(1), seconds(15));
  EXPECT_EQ(WaitingCanaryLookAgain(150), seconds(15));
  EXPECT_EQ(WaitingCanaryLookAgain(1000), seconds(100));   // the queue: 10 looks a second
  EXPECT_EQ(WaitingCanaryLookAgain(10000), seconds(300));  // at most 5 minutes
}

TEST_F(CanarySlotsTest, NoLimitStartsEverything) {
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(Ask("ns/c" + std::to_string(i), 0, 0).start);
}

}  // namespace
}  // namespace allocguard::controllers
