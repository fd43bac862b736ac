#include "operator/manager/controller_runner.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "operator/common/log.h"

namespace allocguard::manager {

ControllerRunner::ControllerRunner(std::unique_ptr<controllers::Reconciler> reconciler,
                                   Clock* clock, metrics::Registry* metrics)
    : reconciler_(std::move(reconciler)),
      clock_(clock),
      queue_(std::make_shared<kube::WorkQueue>(clock)) {
  if (metrics == nullptr) return;
  const std::string name = reconciler_->name();
  reconciles_ = &metrics->AddCounter("allocguard_reconcile_total",
                                     "Reconciles by controller and result (success, error, "
                                     "requeue).",
                                     {"controller", "result"});
  for (const char* result : {"success", "error", "requeue"}) reconciles_->With({name, result});
  unexpected_ = &metrics->AddCounter("allocguard_reconcile_panics_total",
                                     "Reconciles that ended in an exception, by controller "
                                     "(each is also counted as an error and retried).",
                                     {"controller"});
  unexpected_->With({name});
  durations_ = &metrics->AddHistogram("allocguard_reconcile_duration_seconds",
                                      "Time one reconcile took, by controller.", {"controller"},
                                      metrics::DefaultBuckets());
  durations_->With({name});
  metrics->AddCollector([name, queue = std::weak_ptr<kube::WorkQueue>(queue_)] {
    std::vector<metrics::CollectedFamily> out;
    if (auto q = queue.lock()) {
      out.push_back({"allocguard_workqueue_depth",
                     "Keys waiting to be reconciled, by controller.",
                     metrics::MetricType::kGauge,
                     {{{{"controller", name}}, static_cast<double>(q->Len())}}});
    }
    return out;
  });
}

ControllerRunner::~ControllerRunner() { Stop(); }

void ControllerRunner::Start(int workers) {
  {
    std::lock_guard<std::mutex> lock(heartbeats_mu_);
    for (int i = 0; i < workers; ++i) heartbeats_.push_back(std::make_unique<Heartbeat>());
  }
  for (int i = 0; i < workers; ++i) {
    workers_.emplace_back([this, h = heartbeats_[static_cast<size_t>(i)].get()] { Work(h); });
  }
}

Clock::Duration ControllerRunner::StalledFor(Clock::TimePoint now) const {
  std::lock_guard<std::mutex> lock(heartbeats_mu_);
  Clock::Duration longest = Clock::Duration::zero();
  for (const auto& h : heartbeats_) longest = std::max(longest, h->StalledFor(now));
  return longest;
}

void ControllerRunner::Stop() {
  if (stopped_.exchange(true)) return;
  queue_->ShutDown();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

// The readers parse every object at the edge and return errors; this is the
// net under them. An exception that still escapes a reconcile (a reader that
// missed a type, bad_alloc) fails that key like any other error, retried with
// backoff, instead of unwinding the worker thread and aborting the process:
// one malformed object must not take every replica down in turn.
Result<controllers::ReconcileResult> ControllerRunner::ReconcileSafely(const std::string& key) {
  try {
    return reconciler_->Reconcile(key);
  } catch (const std::exception& e) {
    if (unexpected_ != nullptr) unexpected_->With({reconciler_->name()}).Inc();
    return Internal(std::string("unexpected exception while reconciling: ") + e.what());
  } catch (...) {
    if (unexpected_ != nullptr) unexpected_->With({reconciler_->name()}).Inc();
    return Internal("unexpected exception while reconciling");
  }
}

void ControllerRunner::Work(Heartbeat* heartbeat) {
  while (auto key = queue_->Get()) {
    const auto start = clock_->Now();
    heartbeat->Beat(start, true);  // busy until this key is done
    // What is logged while this key is reconciled names the controller, the
    // object and this reconcile (log.h).
    const log::ReconcileScope scope(reconciler_->name(), *key);
    Result<controllers::ReconcileResult> result = ReconcileSafely(*key);
    const double seconds = std::chrono::duration<double>(clock_->Now() - start).count();
    std::string outcome;
    if (!result.ok()) {
      outcome = "error";
      spdlog::warn("reconcile failed: {} (retry {})", result.status().message(),
                   queue_->NumRequeues(*key) + 1);
      queue_->AddRateLimited(*key);
    } else {
      queue_->Forget(*key);
      if (result.value().requeue_after.has_value()) {
        outcome = "requeue";
        queue_->AddAfter(*key, *result.value().requeue_after);
      } else {
        outcome = "success";
      }
    }
    if (reconciles_ != nullptr) reconciles_->With({reconciler_->name(), outcome}).Inc();
    if (durations_ != nullptr) durations_->With({reconciler_->name()}).Observe(seconds);
    queue_->Done(*key);
    heartbeat->Beat(clock_->Now(), false);
  }
}

}  // namespace allocguard::manager
