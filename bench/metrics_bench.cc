// Metrics benchmark: what an update through a handle costs (one thread and
// several contending for the same cell), what With() costs, and the CPU time
// and size of one scrape of a registry shaped like the operator's.
//
// Usage: metrics_bench [--label-sets N] [--threads N]
// --label-sets: label sets per family in the scraped registry (default 100,
// e.g. one per policy).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "operator/metrics/process_metrics.h"
#include "operator/metrics/registry.h"

using allocguard::metrics::AddProcessMetrics;
using allocguard::metrics::Counter;
using allocguard::metrics::CounterHandle;
using allocguard::metrics::DefaultBuckets;
using allocguard::metrics::Gauge;
using allocguard::metrics::Histogram;
using allocguard::metrics::HistogramHandle;
using allocguard::metrics::Registry;

namespace {

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  int label_sets = 100;
  int threads = 4;
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--label-sets")) label_sets = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[++i]);
  }

  Registry registry;
  Counter& reconciles =
      registry.AddCounter("allocguard_reconcile_total", "Reconciles.", {"controller", "result"});
  Gauge& ready = registry.AddGauge("allocguard_policy_ready", "Policy ready.", {"policy"});
  Histogram& latency =
      registry.AddHistogram("allocguard_reconcile_duration_seconds", "Reconcile latency.",
                            {"controller"}, DefaultBuckets());
  AddProcessMetrics(registry);

  // One thread, one handle.
  constexpr int kUpdates = 10'000'000;
  CounterHandle handle = reconciles.With({"policy", "success"});
  double t0 = ThreadCpuSeconds();
  for (int i = 0; i < kUpdates; ++i) handle.Inc();
  double inc_ns = (ThreadCpuSeconds() - t0) / kUpdates * 1e9;

  HistogramHandle observe = latency.With({"policy"});
  t0 = ThreadCpuSeconds();
  for (int i = 0; i < kUpdates; ++i) observe.Observe((i % 1000) * 0.001);
  double observe_ns = (ThreadCpuSeconds() - t0) / kUpdates * 1e9;

  constexpr int kWiths = 1'000'000;
  t0 = ThreadCpuSeconds();
  for (int i = 0; i < kWiths; ++i) reconciles.With({"policy", "success"}).Inc();
  double with_ns = (ThreadCpuSeconds() - t0) / kWiths * 1e9;

  // Several threads on the same cell: the worst case for the CAS loop.
  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(std::max(threads, 0)));
  double w0 = WallSeconds();
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      for (int i = 0; i < kUpdates / threads; ++i) handle.Inc();
    });
  }
  for (auto& w : workers) w.join();
  double contended_ns = (WallSeconds() - w0) / kUpdates * 1e9;

  std::printf("update costs (CPU per call):\n");
  std::printf("  CounterHandle::Inc            %6.1f ns\n", inc_ns);
  std::printf("  HistogramHandle::Observe      %6.1f ns (11 buckets)\n", observe_ns);
  std::printf("  Counter::With(2 labels).Inc   %6.1f ns\n", with_ns);
  std::printf("  Inc, %d threads on one cell    %6.1f ns wall per call\n", threads, contended_ns);

  // A scrape: label_sets policies, 5 controllers x 3 results, 5 histograms.
  for (int p = 0; p < label_sets; ++p) ready.With({"policy-" + std::to_string(p)}).Set(1);
  for (const char* c : {"policy", "canary", "rollout", "drift", "webhook-config"}) {
    for (const char* r : {"success", "error", "requeue"}) reconciles.With({c, r}).Inc();
    latency.With({c}).Observe(0.01);
  }
  constexpr int kScrapes = 2000;
  size_t bytes = 0;
  t0 = ThreadCpuSeconds();
  for (int i = 0; i < kScrapes; ++i) bytes = registry.Render().size();
  double scrape_us = (ThreadCpuSeconds() - t0) / kScrapes * 1e6;
  std::printf(
      "one scrape (%d policy label sets, process metrics from /proc): %.0f us CPU, %zu "
      "bytes\n",
      label_sets, scrape_us, bytes);
  return 0;
}
