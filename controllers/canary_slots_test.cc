#include <gtest/gtest.h>

#include "controllers/reconcilers.h"

namespace allocguard::controllers {
namespace {

using nlohmann::json;

class CanarySlotsTest : public ::testing::Test {
 protected:
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

  kube::Store canaries_;
  CanarySlots slots_;
  int version_ = 0;
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

TEST_F(CanarySlotsTest, NoLimitStartsEverything) {
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(Ask("ns/c" + std::to_string(i), 0, 0).start);
}

}  // namespace
}  // namespace allocguard::controllers
