#include "operator/manager/rollout_metrics.h"

#include <algorithm>

#include "operator/api/deployment.h"
#include "operator/api/object_meta.h"
#include "operator/kube/object.h"

namespace allocguard::manager {
namespace {

bool Held(const kube::Object& object) { return api::HoldsRollout(api::ParseObjectMeta(object)); }

}  // namespace

void AddHeldIndex(kube::Store& workloads) {
  workloads.AddIndex(kHeldIndex, [](const kube::Object& object) {
    return Held(object) ? std::vector<std::string>{kHeldValue} : std::vector<std::string>{};
  });
}

metrics::CollectedFamily HeldRollouts(const std::string& kind,
                                      const std::vector<kube::Object>& held) {
  metrics::CollectedFamily family{
      "allocguard_rollout_held",
      "1 for each workload whose rollout allocguard holds now (a series lasts as long as "
      "the hold).",
      metrics::MetricType::kGauge,
      {}};
  for (const kube::Object& object : held) {
    if (!Held(object)) continue;
    const kube::Object& meta = kube::ObjectField(object, "metadata");
    const std::string name = kube::StringField(meta, "name");
    if (name.empty()) continue;
    family.samples.push_back({{{"workload_namespace", kube::StringField(meta, "namespace")},
                               {"workload_kind", kind},
                               {"workload_name", name}},
                              1});
  }
  std::sort(family.samples.begin(), family.samples.end(),
            [](const metrics::CollectedSample& a, const metrics::CollectedSample& b) {
              return a.labels < b.labels;
            });
  return family;
}

void AddHeldRolloutMetrics(metrics::Registry& registry, const std::string& kind,
                           const kube::Store& workloads) {
  registry.AddCollector([kind, &workloads] {
    return std::vector<metrics::CollectedFamily>{
        HeldRollouts(kind, workloads.ByIndex(kHeldIndex, kHeldValue).Copies())};
  });
}

}  // namespace allocguard::manager
