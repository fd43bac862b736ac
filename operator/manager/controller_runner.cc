#include "operator/manager/controller_runner.h"

#include <spdlog/spdlog.h>

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
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { Work(); });
}

void ControllerRunner::Stop() {
  if (stopped_.exchange(true)) return;
  queue_->ShutDown();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

void ControllerRunner::Work() {
  while (auto key = queue_->Get()) {
    const auto start = clock_->Now();
    Result<controllers::ReconcileResult> result = reconciler_->Reconcile(*key);
    const double seconds = std::chrono::duration<double>(clock_->Now() - start).count();
    std::string outcome;
    if (!result.ok()) {
      outcome = "error";
      spdlog::warn("{} {}: {} (retry {})", reconciler_->name(), *key, result.status().message(),
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
  }
}

}  // namespace allocguard::manager
