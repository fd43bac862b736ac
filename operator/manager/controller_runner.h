#pragma once

// Runs one reconciler: a work queue of object keys and worker threads that
// take a key, reconcile it, and requeue it on error (with the queue's
// per-key exponential backoff) or after the delay the reconciler asked for.
// A key is never reconciled by two workers at once (the queue guarantees it).

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "controllers/reconcilers.h"
#include "operator/common/heartbeat.h"
#include "operator/kube/workqueue.h"
#include "operator/manager/runnable_manager.h"
#include "operator/metrics/registry.h"

namespace allocguard::manager {

// Metrics (when a registry is given), labelled controller=<name()>:
//   allocguard_reconcile_total{controller,result}  success, error, requeue;
//       every result starts at 0, so an error rate is defined before the
//       first error
//   allocguard_reconcile_panics_total{controller}  reconciles that threw (a
//       defect: the readers return errors); the key is failed and retried,
//       and the worker goes on
//   allocguard_reconcile_duration_seconds{controller}  histogram
//   allocguard_workqueue_depth{controller}  keys ready to be reconciled,
//       read at scrape time
class ControllerRunner {
 public:
  // metrics may be null; when given, it must outlive this object or never
  // render after it is gone.
  ControllerRunner(std::unique_ptr<controllers::Reconciler> reconciler, Clock* clock,
                   metrics::Registry* metrics);
  ~ControllerRunner();  // stops

  void Enqueue(const std::string& key) { queue_->Add(key); }
  // Starts `workers` threads. REQUIRES: called once.
  void Start(int workers);
  // Shuts the queue down and joins the workers (a reconcile in flight ends
  // first).
  void Stop();

  const char* name() const { return reconciler_->name(); }
  size_t queue_length() { return queue_->Len(); }
  // The longest any worker has been inside one reconcile (zero while every
  // worker waits for a key), for liveness. Thread-safe.
  Clock::Duration StalledFor(Clock::TimePoint now) const;

 private:
  void Work(Heartbeat* heartbeat);
  Result<controllers::ReconcileResult> ReconcileSafely(const std::string& key);

  std::unique_ptr<controllers::Reconciler> reconciler_;
  Clock* clock_;
  // Shared with the registry's depth collector, which may outlive a scrape
  // in flight.
  std::shared_ptr<kube::WorkQueue> queue_;
  std::vector<std::thread> workers_;
  mutable std::mutex heartbeats_mu_;
  std::vector<std::unique_ptr<Heartbeat>> heartbeats_;  // one a worker, made by Start()
  std::atomic<bool> stopped_{false};
  metrics::Counter* reconciles_ = nullptr;
  metrics::Counter* unexpected_ = nullptr;
  metrics::Histogram* durations_ = nullptr;
};

// A ControllerRunner as the Manager's leader-only Controller: Start starts
// `workers` workers, Stop stops them; requests naming name() are enqueued.
class ControllerRunnable final : public Controller {
 public:
  ControllerRunnable(std::unique_ptr<ControllerRunner> runner, int workers)
      : runner_(std::move(runner)), workers_(workers) {}

  std::string name() const override { return runner_->name(); }
  Status Start(kube::Canceller* /*cancel*/) override {
    runner_->Start(workers_);
    return Status::Ok();
  }
  void Stop() override { runner_->Stop(); }
  void Enqueue(const std::string& key) override { runner_->Enqueue(key); }

  ControllerRunner& runner() { return *runner_; }

 private:
  std::unique_ptr<ControllerRunner> runner_;
  int workers_;
};

}  // namespace allocguard::manager
