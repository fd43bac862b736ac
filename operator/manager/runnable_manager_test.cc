#include "operator/manager/runnable_manager.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "operator/kube/client.h"

namespace allocguard::manager {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// What the fakes did, in order: "start NAME", "stop NAME", "sync NAME",
// "enqueue NAME KEY", hooks' own words.
class Journal {
 public:
  void Add(const std::string& entry) {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.push_back(entry);
    cv_.notify_all();
  }
  std::vector<std::string> entries() const {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_;
  }
  // Waits (up to 10 s) until entry was added.
  bool WaitFor(const std::string& entry) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] {
      return std::find(entries_.begin(), entries_.end(), entry) != entries_.end();
    });
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> entries_;
};

class FakeRunnable : public Runnable {
 public:
  FakeRunnable(std::string name, Journal* journal, bool leader = false)
      : name_(std::move(name)), journal_(journal), leader_(leader) {}
  std::string name() const override { return name_; }
  Status Start(kube::Canceller*) override {
    journal_->Add("start " + name_);
    return start_status;
  }
  void Stop() override { journal_->Add("stop " + name_); }
  bool NeedsLeaderElection() const override { return leader_; }
  bool WaitForSync() override {
    journal_->Add("sync " + name_);
    return syncs;
  }

  Status start_status = Status::Ok();
  bool syncs = true;

 private:
  std::string name_;
  Journal* journal_;
  bool leader_;
};

class FakeController : public Controller {
 public:
  FakeController(std::string name, Journal* journal) : name_(std::move(name)), journal_(journal) {}
  std::string name() const override { return name_; }
  Status Start(kube::Canceller*) override {
    journal_->Add("start " + name_);
    return Status::Ok();
  }
  void Stop() override { journal_->Add("stop " + name_); }
  void Enqueue(const std::string& key) override { journal_->Add("enqueue " + name_ + " " + key); }

 private:
  std::string name_;
  Journal* journal_;
};

// Leads when Lead() is called; Lose() ends the run as a lost lease does.
class FakeLeaderElection : public LeaderElection {
 public:
  Status Run(kube::Canceller* cancel, std::function<void()> on_started_leading) override {
    // Registered before mu_ is held: an already cancelled canceller runs
    // the callback at once.
    const int id = cancel->Register([this] {
      std::lock_guard<std::mutex> l(mu_);
      cancelled_ = true;
      cv_.notify_all();
    });
    std::unique_lock<std::mutex> lock(mu_);
    running_ = true;
    cv_.notify_all();
    for (;;) {
      cv_.wait(lock, [&] { return cancelled_ || lead_ || lose_; });
      if (lead_) {
        lead_ = false;
        lock.unlock();
        on_started_leading();
        lock.lock();
        continue;
      }
      break;
    }
    const bool lost = lose_;
    lock.unlock();
    cancel->Unregister(id);
    return lost ? Unavailable("leadership lost") : Status::Ok();
  }
  void WaitUntilRunning() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return running_; });
  }
  void Lead() {
    std::lock_guard<std::mutex> lock(mu_);
    lead_ = true;
    cv_.notify_all();
  }
  void Lose() {
    std::lock_guard<std::mutex> lock(mu_);
    lose_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool running_ = false;
  bool lead_ = false;
  bool lose_ = false;
  bool cancelled_ = false;
};

json Object(const std::string& ns, const std::string& name) {
  return {{"metadata", {{"namespace", ns}, {"name", name}, {"resourceVersion", "1"}}}};
}

TEST(RunnableManagerTest, StartsInOrderLeadsThenStopsLeaderRunnablesFirstInReverse) {
  Journal journal;
  Manager manager(nullptr);  // leads at once
  manager.Add(std::make_unique<FakeRunnable>("cache", &journal));
  manager.AddController(std::make_unique<FakeController>("ctrl-a", &journal));
  manager.Add(std::make_unique<FakeRunnable>("server", &journal));
  manager.AddController(std::make_unique<FakeController>("ctrl-b", &journal));
  manager.OnSynced([&] { journal.Add("synced"); });
  manager.OnStartedLeading([&] { journal.Add("leading"); });
  kube::Canceller cancel;
  Status result;
  std::thread run([&] { result = manager.Run(&cancel); });
  ASSERT_TRUE(journal.WaitFor("start ctrl-b"));
  EXPECT_TRUE(manager.leading());
  cancel.Cancel();
  run.join();
  EXPECT_TRUE(result.ok()) << result.message();
  EXPECT_THAT(journal.entries(),
              ElementsAre("start cache", "start server", "sync cache", "sync server", "synced",
                          "leading", "start ctrl-a", "start ctrl-b", "stop ctrl-b", "stop ctrl-a",
                          "stop server", "stop cache"));
}

TEST(RunnableManagerTest, LeaderOnlyRunnablesStartOnlyWhenLeading) {
  Journal journal;
  auto election = std::make_unique<FakeLeaderElection>();
  FakeLeaderElection* elector = election.get();
  Manager manager(std::move(election));
  manager.Add(std::make_unique<FakeRunnable>("webhooks", &journal));
  manager.AddController(std::make_unique<FakeController>("ctrl", &journal));
  manager.Add(std::make_unique<FakeRunnable>("leader-job", &journal, /*leader=*/true));
  kube::Canceller cancel;
  Status result;
  std::thread run([&] { result = manager.Run(&cancel); });
  elector->WaitUntilRunning();
  // Campaigning: every replica serves, only the leader reconciles.
  EXPECT_THAT(journal.entries(), ElementsAre("start webhooks", "sync webhooks"));
  EXPECT_FALSE(manager.leading());
  EXPECT_TRUE(manager.Readyz().ok()) << "a follower is ready: it serves the webhooks";

  elector->Lead();
  ASSERT_TRUE(journal.WaitFor("start leader-job"));
  EXPECT_TRUE(manager.leading());
  cancel.Cancel();
  run.join();
  EXPECT_TRUE(result.ok()) << result.message();
  EXPECT_THAT(journal.entries(),
              ElementsAre("start webhooks", "sync webhooks", "start ctrl", "start leader-job",
                          "stop leader-job", "stop ctrl", "stop webhooks"));
}

TEST(RunnableManagerTest, AFollowerThatIsCancelledNeverStartsLeaderRunnables) {
  Journal journal;
  auto election = std::make_unique<FakeLeaderElection>();
  FakeLeaderElection* elector = election.get();
  Manager manager(std::move(election));
  manager.Add(std::make_unique<FakeRunnable>("webhooks", &journal));
  manager.AddController(std::make_unique<FakeController>("ctrl", &journal));
  kube::Canceller cancel;
  Status result;
  std::thread run([&] { result = manager.Run(&cancel); });
  elector->WaitUntilRunning();
  cancel.Cancel();
  run.join();
  EXPECT_TRUE(result.ok());
  EXPECT_THAT(journal.entries(), ElementsAre("start webhooks", "sync webhooks", "stop webhooks"));
}

TEST(RunnableManagerTest, LostLeadershipStopsEverythingAndIsUnavailable) {
  Journal journal;
  auto election = std::make_unique<FakeLeaderElection>();
  FakeLeaderElection* elector = election.get();
  Manager manager(std::move(election));
  manager.Add(std::make_unique<FakeRunnable>("cache", &journal));
  manager.AddController(std::make_unique<FakeController>("ctrl", &journal));
  kube::Canceller cancel;
  Status result;
  std::thread run([&] { result = manager.Run(&cancel); });
  elector->WaitUntilRunning();
  elector->Lead();
  ASSERT_TRUE(journal.WaitFor("start ctrl"));
  elector->Lose();
  run.join();
  EXPECT_EQ(result.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(cancel.cancelled()) << "the rest of the process is told to stop";
  EXPECT_THAT(journal.entries(),
              ElementsAre("start cache", "sync cache", "start ctrl", "stop ctrl", "stop cache"));
}

TEST(RunnableManagerTest, AStartErrorStopsWhatStartedAndIsReturned) {
  Journal journal;
  Manager manager(nullptr);
  manager.Add(std::make_unique<FakeRunnable>("cache", &journal));
  auto broken = std::make_unique<FakeRunnable>("webhooks", &journal);
  broken->start_status = InvalidArgument("bind address \"x\" must be host:port");
  manager.Add(std::move(broken));
  manager.Add(std::make_unique<FakeRunnable>("metrics", &journal));
  manager.AddController(std::make_unique<FakeController>("ctrl", &journal));
  kube::Canceller cancel;
  Status result = manager.Run(&cancel);
  EXPECT_EQ(result.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(result.message(), "bind address \"x\" must be host:port");
  EXPECT_TRUE(cancel.cancelled());
  EXPECT_THAT(journal.entries(), ElementsAre("start cache", "start webhooks", "stop cache"));
}

TEST(RunnableManagerTest, CachesThatNeverSyncEndTheStartUp) {
  Journal journal;
  Manager manager(nullptr);
  auto cache = std::make_unique<FakeRunnable>("cache", &journal);
  cache->syncs = false;
  manager.Add(std::move(cache));
  manager.AddController(std::make_unique<FakeController>("ctrl", &journal));
  EXPECT_EQ(manager.Readyz().message(), "informers not synced");
  kube::Canceller cancel;
  Status result = manager.Run(&cancel);
  EXPECT_EQ(result.code(), StatusCode::kUnavailable);
  EXPECT_EQ(result.message(), "stopped before the caches synced");
  EXPECT_THAT(journal.entries(), ElementsAre("start cache", "sync cache", "stop cache"));
}

TEST(RunnableManagerTest, WatchesRouteEventsToTheNamedControllersAndResyncOnLeading) {
  Journal journal;
  Manager manager(nullptr);
  manager.AddController(std::make_unique<FakeController>("a", &journal));
  manager.AddController(std::make_unique<FakeController>("b", &journal));
  kube::Store store;
  store.Upsert(Object("ns", "existing"));  // before Run: no handlers yet
  manager.Watches(&store, [](const json& o) {
    std::string key = kube::ObjectKey(o);
    return std::vector<ReconcileRequest>{{"a", key}, {"b", key + "-b"}};
  });
  manager.Watches(
      &store, [](const json&) { return std::vector<ReconcileRequest>{}; },
      [](const json& o) {
        return std::vector<ReconcileRequest>{{"b", "resync " + kube::ObjectKey(o)}};
      });
  manager.OnUpdate(&store, [&](const json& before, const json& after) {
    journal.Add("update " + before["metadata"]["resourceVersion"].get<std::string>() + "->" +
                after["metadata"]["resourceVersion"].get<std::string>());
  });
  EXPECT_THAT(manager.MapForTest(&store, Object("x", "y")),
              ElementsAre(ReconcileRequest{"a", "x/y"}, ReconcileRequest{"b", "x/y-b"}));

  kube::Canceller cancel;
  std::thread run([&] { EXPECT_TRUE(manager.Run(&cancel).ok()); });
  ASSERT_TRUE(journal.WaitFor("enqueue b resync ns/existing"));
  json changed = Object("ns", "existing");
  changed["metadata"]["resourceVersion"] = "2";
  store.Upsert(changed);
  store.Remove(changed);
  cancel.Cancel();
  run.join();
  EXPECT_THAT(journal.entries(),
              ElementsAre("start a", "start b", "enqueue b resync ns/existing", "update 1->2",
                          "enqueue a ns/existing", "enqueue b ns/existing-b",
                          "enqueue a ns/existing", "enqueue b ns/existing-b", "stop b", "stop a"));
}

TEST(RunnableManagerTest, ProbesAnswerWithTheFirstFailingCheck) {
  Manager manager(nullptr);
  bool alive = true;
  manager.AddHealthzCheck([&] { return alive ? Status::Ok() : Unavailable("reconciler wedged"); });
  manager.AddHealthzCheck([] { return Unavailable("second"); });
  EXPECT_EQ(manager.Healthz().message(), "second");
  alive = false;
  EXPECT_EQ(manager.Healthz().message(), "reconciler wedged");
  manager.AddReadyzCheck([] { return Unavailable("webhooks not ready: no certificate"); });
  EXPECT_EQ(manager.Readyz().message(), "informers not synced");
}

TEST(RunnableManagerTest, WaitForCancelReturnsOnceCancelled) {
  kube::Canceller cancel;
  std::thread canceller([&] { cancel.Cancel(); });
  WaitForCancel(&cancel);
  canceller.join();
  WaitForCancel(&cancel);  // already cancelled: returns at once
  SUCCEED();
}

}  // namespace
}  // namespace allocguard::manager
