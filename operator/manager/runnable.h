#pragma once

// The parts of the operator process, as controller-runtime's manager sees
// them: each is a Runnable the Manager (runnable_manager.h) starts, and stops
// on shutdown.
//
// Unlike controller-runtime's Start(ctx), which blocks until the context
// ends, Start here returns once the work runs on the runnable's own threads,
// and Stop ends it: every part of this process (informers, servers, worker
// pools) already has that shape.

#include <functional>
#include <string>

#include "operator/common/status.h"
#include "operator/kube/cancel.h"

namespace allocguard::manager {

class Runnable {
 public:
  virtual ~Runnable() = default;

  // For logs: "informer pods", "webhook server", "reconciler canary".
  virtual std::string name() const = 0;

  // Starts the work and returns; an error ends the manager's start-up.
  // `cancel` is the manager's: it fires when the process shuts down, before
  // Stop() is called. REQUIRES: called at most once.
  virtual Status Start(kube::Canceller* cancel) = 0;

  // Ends the work and joins its threads. Called once after a successful
  // Start(), after `cancel` fired; never called when Start() was not.
  virtual void Stop() = 0;

  // True: started only on the replica that holds the leader lease (the
  // reconcilers); false: on every replica (caches, webhooks, probes).
  virtual bool NeedsLeaderElection() const { return false; }

  // Blocks until the runnable's first view of the cluster is complete (an
  // informer's first list) or it was stopped; returns whether it is. The
  // manager waits for every runnable's sync before it campaigns for the
  // lease, and reports not ready until then. Default: nothing to wait for.
  virtual bool WaitForSync() { return true; }
};

// How the manager takes part in leader election.
class LeaderElection {
 public:
  virtual ~LeaderElection() = default;
  // Campaigns, calls on_started_leading (on any thread, once, promptly
  // returning) when leading, and returns OK when cancel fired (the lease
  // released) or kUnavailable when leadership was lost.
  virtual Status Run(kube::Canceller* cancel, std::function<void()> on_started_leading) = 0;
};

// A Runnable made of two functions, for small parts (a file written once
// everything listens, a periodic tick).
class FunctionRunnable final : public Runnable {
 public:
  FunctionRunnable(std::string name, std::function<Status(kube::Canceller*)> start,
                   std::function<void()> stop = nullptr, bool needs_leader_election = false)
      : name_(std::move(name)),
        start_(std::move(start)),
        stop_(std::move(stop)),
        needs_leader_election_(needs_leader_election) {}

  std::string name() const override { return name_; }
  Status Start(kube::Canceller* cancel) override { return start_(cancel); }
  void Stop() override {
    if (stop_) stop_();
  }
  bool NeedsLeaderElection() const override { return needs_leader_election_; }

 private:
  std::string name_;
  std::function<Status(kube::Canceller*)> start_;
  std::function<void()> stop_;
  bool needs_leader_election_;
};

}  // namespace allocguard::manager
