#pragma once

// Held-rollout metrics, read from the Deployment cache at scrape time on
// every replica (each has the cache; only the leader changes holds):
//
//   allocguard_rollout_held{workload_namespace, workload_kind, workload_name}
//       1 for each workload whose rollout the gate holds now (its
//       allocguard.io/held-candidate annotation is set). A series exists
//       only while the hold does, so Prometheus's `for:` measures how long
//       one workload has been held; the chart's AllocguardRolloutHeldTooLong
//       alert is built on that.
//
// The labels are not called `namespace`/`name`: a scrape adds the operator
// pod's own `namespace`, which would rename a `namespace` label of ours.

#include <string>
#include <vector>

#include "operator/kube/informer.h"
#include "operator/metrics/registry.h"

namespace allocguard::manager {

// The index of held workloads: every held object is under kHeldValue.
inline constexpr char kHeldIndex[] = "held";
inline constexpr char kHeldValue[] = "held";

// REQUIRES: called before objects are added to `workloads`.
void AddHeldIndex(kube::Store& workloads);

// The family for these held objects of one kind (say "Deployment"). An
// object without a name is left out. Pure.
metrics::CollectedFamily HeldRollouts(const std::string& kind,
                                      const std::vector<kube::Object>& held);

// Registers the collector over `workloads`, which must outlive `registry`'s
// scrapes and carry AddHeldIndex.
void AddHeldRolloutMetrics(metrics::Registry& registry, const std::string& kind,
                           const kube::Store& workloads);

}  // namespace allocguard::manager
