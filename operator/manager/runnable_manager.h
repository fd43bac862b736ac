#pragma once

// A manager of runnables in the shape of controller-runtime's manager:
//
//   Manager m(std::make_unique<LeaseLeaderElection>(...));  // or nullptr
//   m.Add(informer); m.Add(webhook_server); m.Add(probe_server);
//   m.AddController(policy_controller);
//   m.Watches(&policies->store(), map_policy_to_requests);
//   Status s = m.Run(&cancel);
//
// Run, in this order:
//   1. installs the event handlers of every watched store (Watches, OnUpdate);
//   2. starts every runnable that needs no leadership, in the order added;
//   3. waits for each one's sync (WaitForSync), then runs OnSynced hooks and
//      reports ready (Readyz) from then on;
//   4. campaigns for the lease (no LeaderElection: leads at once); when
//      leading, runs OnStartedLeading hooks, starts the leader-only runnables
//      in the order added, and maps every object of each watched store
//      through its on_leading map, so everything cached is looked at once;
//   5. on cancel or lost leadership: cancels, stops the leader-only
//      runnables, then the others, each group in reverse order of start.
//
// A start-up error (a runnable that does not start, caches that never sync)
// stops what was started and is returned. Losing the lease returns
// kUnavailable: the process ends, and its Deployment restarts it as a
// follower, as controller-runtime's managers do.

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/common/status.h"
#include "operator/kube/cancel.h"
#include "operator/kube/informer.h"
#include "operator/manager/runnable.h"

namespace allocguard::manager {

// A leader-only runnable with a work queue of object keys: a reconciler.
class Controller : public Runnable {
 public:
  // Queues key ("namespace/name") for reconciliation; callable before Start
  // (the key waits) and from any thread.
  virtual void Enqueue(const std::string& key) = 0;
  bool NeedsLeaderElection() const override { return true; }
};

// "Reconcile key of controller": the controller is named by Runnable::name().
struct ReconcileRequest {
  std::string controller;
  std::string key;
  bool operator==(const ReconcileRequest&) const = default;
};

// The requests an object's change concerns (controller-runtime's MapFunc).
using MapFunc = std::function<std::vector<ReconcileRequest>(const nlohmann::json& object)>;

// Called with an object's old and new state on update, before the maps.
using UpdateObserver =
    std::function<void(const nlohmann::json& old_object, const nlohmann::json& object)>;

class Manager {
 public:
  // election: nullptr makes this replica lead from the start.
  explicit Manager(std::unique_ptr<LeaderElection> election);
  ~Manager();  // stops what still runs

  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  // REQUIRES for every method below but the probes: called before Run.

  // Takes ownership; returns the runnable.
  Runnable* Add(std::unique_ptr<Runnable> runnable);
  // A controller: leader-only, and the target of requests naming it.
  Controller* AddController(std::unique_ptr<Controller> controller);

  // Routes store's add, update (new state) and delete events through
  // on_event to the controllers it names. on_leading, when given, maps every
  // object of the store once each time this replica starts leading.
  // Watches on one store run in the order added.
  void Watches(kube::Store* store, MapFunc on_event, MapFunc on_leading = nullptr);
  void OnUpdate(kube::Store* store, UpdateObserver observer);

  // Hooks, run in the order added: once the caches synced; when leading,
  // before the leader-only runnables start.
  void OnSynced(std::function<void()> hook);
  void OnStartedLeading(std::function<void()> hook);

  // Probe checks; the first failing one's status is the probe's answer.
  void AddHealthzCheck(std::function<Status()> check);
  void AddReadyzCheck(std::function<Status()> check);

  // Thread-safe, callable while Run runs. Readyz is kUnavailable "informers
  // not synced" before step 3.
  Status Healthz() const;
  Status Readyz() const;
  bool leading() const { return leading_.load(); }
  bool synced() const { return synced_.load(); }

  // Runs as the header says until cancel fires (OK) or leadership is lost
  // (kUnavailable). REQUIRES: called once.
  Status Run(kube::Canceller* cancel);

  // The requests Watches would route for store's event on object (tests).
  std::vector<ReconcileRequest> MapForTest(kube::Store* store, const nlohmann::json& object) const;

 private:
  struct Watch {
    MapFunc on_event;
    MapFunc on_leading;
  };
  struct StoreRoutes {
    kube::Store* store = nullptr;
    std::vector<Watch> watches;
    std::vector<UpdateObserver> observers;
  };

  StoreRoutes& RoutesOf(kube::Store* store);
  void InstallHandlers();
  void Route(const std::vector<ReconcileRequest>& requests);
  void StartLeading(kube::Canceller* cancel);
  void StopAll();

  std::unique_ptr<LeaderElection> election_;
  std::vector<std::unique_ptr<Runnable>> runnables_;  // in the order added
  std::map<std::string, Controller*> controllers_;
  std::vector<StoreRoutes> routes_;  // in the order first named
  std::vector<std::function<void()>> on_synced_;
  std::vector<std::function<void()>> on_started_leading_;
  std::vector<std::function<Status()>> healthz_;
  std::vector<std::function<Status()>> readyz_;

  std::atomic<bool> synced_{false};
  std::atomic<bool> leading_{false};
  std::mutex mu_;                   // guards started_ and stopping_
  std::vector<Runnable*> started_;  // in the order started
  bool stopping_ = false;
  Status leader_start_error_ = Status::Ok();
};

// Blocks until cancel fires.
void WaitForCancel(kube::Canceller* cancel);

}  // namespace allocguard::manager
