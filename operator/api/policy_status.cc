#include "operator/api/policy_status.h"

#include "operator/api/json_fields.h"
#include "operator/api/json_reader.h"
#include "operator/common/rfc3339.h"

namespace allocguard::api {

using json_fields::Reader;
using nlohmann::json;

namespace {

bool IsDateTime(const std::string& text) { return !text.empty() && ParseRfc3339(text).ok(); }

PolicyVerdict ReadVerdict(const json& item, const std::string& path,
                          std::vector<std::string>* problems) {
  PolicyVerdict v;
  Reader r(item, path, problems);
  r.String("workload", &v.workload);
  r.String("templateHash", &v.template_hash);
  r.String("canary", &v.canary);
  std::string verdict;
  r.String("verdict", &verdict);
  if (!verdict.empty()) {
    v.verdict = VerdictFromName(verdict);
    if (!v.verdict.has_value()) {
      v.verdict = Verdict::kFailed;
      v.unknown_verdict = verdict;
    }
  }
  r.String("floorSlope", &v.floor_slope);
  r.String("flatVariant", &v.flat_variant);
  r.String("explanation", &v.explanation);
  r.String("time", &v.time);
  return v;
}

}  // namespace

std::vector<InjectionSuspendedStatus> ParseInjectionSuspended(const json& list,
                                                              const std::string& path,
                                                              std::vector<std::string>* problems) {
  std::vector<InjectionSuspendedStatus> out;
  if (list.is_null()) return out;
  if (!list.is_array()) {
    if (problems != nullptr) {
      problems->push_back(path + ": must be a list, got " + json_fields::Dump(list));
    }
    return out;
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const json& item = list[i];
    const std::string item_path = json_fields::Item(path, i);
    if (!item.is_object()) {
      if (problems != nullptr) {
        problems->push_back(item_path + ": must be an object, got " + json_fields::Dump(item));
      }
      continue;
    }
    InjectionSuspendedStatus e;
    Reader r(item, item_path, problems);
    r.String("workload", &e.workload);
    r.String("podTemplateHash", &e.pod_template_hash);
    r.String("templateHash", &e.template_hash);
    r.Int("policyGeneration", &e.policy_generation);
    r.String("pod", &e.pod);
    r.String("container", &e.container);
    r.String("reason", &e.reason);
    r.String("message", &e.message);
    r.String("since", &e.since);
    out.push_back(std::move(e));
  }
  return out;
}

AllocatorPolicyStatus ParseAllocatorPolicyStatus(const json& status,
                                                 std::vector<std::string>* problems) {
  AllocatorPolicyStatus out;
  if (status.is_null()) return out;
  if (!status.is_object()) {
    if (problems != nullptr) {
      problems->push_back("status: must be an object, got " + json_fields::Dump(status));
    }
    return out;
  }
  Reader r(status, "status", problems);
  r.Int("observedGeneration", &out.observed_generation);
  if (const json* conditions = r.Array("conditions")) {
    out.conditions = ParseConditions(*conditions, "status.conditions", problems);
  }
  r.Int("governedCount", &out.governed_count);
  r.Objects("governed", [&](const json& item, const std::string& path) {
    GovernedWorkload g;
    Reader w(item, path, problems);
    std::string kind;
    w.String("kind", &kind);
    w.String("name", &g.name);
    w.String("namespace", &g.namespace_name);
    const std::optional<WorkloadKind> parsed = WorkloadKindFromName(kind);
    if (!parsed.has_value() || g.name.empty()) {
      if (problems != nullptr) {
        problems->push_back(path +
                            (parsed.has_value()
                                 ? std::string(".name: must not be empty")
                                 : ".kind: must be Deployment, StatefulSet or DaemonSet, got " +
                                       json(kind).dump()));
      }
      return;
    }
    g.kind = *parsed;
    out.governed.push_back(std::move(g));
  });
  if (const json* last = r.Object("lastVerdict")) {
    out.last_verdict = ReadVerdict(*last, "status.lastVerdict", problems);
  }
  r.Objects("verdicts", [&](const json& item, const std::string& path) {
    out.verdicts.push_back(ReadVerdict(item, path, problems));
  });
  r.Objects("injectionDrift", [&](const json& item, const std::string& path) {
    DriftedPodStatus d;
    Reader p(item, path, problems);
    p.String("pod", &d.pod);
    p.String("reason", &d.reason);
    out.injection_drift.push_back(std::move(d));
  });
  if (const json* suspended = r.Array("injectionSuspended")) {
    out.injection_suspended =
        ParseInjectionSuspended(*suspended, "status.injectionSuspended", problems);
  }
  return out;
}

AllocatorPolicyStatus PolicyStatusOf(const json& policy, std::vector<std::string>* problems) {
  const json* status = json_fields::Member(policy, "status");
  return ParseAllocatorPolicyStatus(status == nullptr ? json() : *status, problems);
}

json PolicyVerdictToJson(const PolicyVerdict& v) {
  json out = {{"workload", v.workload},      {"templateHash", v.template_hash},
              {"canary", v.canary},          {"verdict", v.VerdictName()},
              {"floorSlope", v.floor_slope}, {"flatVariant", v.flat_variant},
              {"explanation", v.explanation}};
  if (IsDateTime(v.time)) out["time"] = v.time;
  return out;
}

json InjectionSuspendedToJson(const InjectionSuspendedStatus& e) {
  json out = {{"workload", e.workload},
              {"podTemplateHash", e.pod_template_hash},
              {"templateHash", e.template_hash},
              {"pod", e.pod},
              {"container", e.container},
              {"reason", e.reason},
              {"message", e.message}};
  if (e.policy_generation.has_value()) out["policyGeneration"] = *e.policy_generation;
  if (IsDateTime(e.since)) out["since"] = e.since;
  return out;
}

json AllocatorPolicyStatusToJson(const AllocatorPolicyStatus& status) {
  json out = json::object();
  if (status.observed_generation.has_value()) {
    out["observedGeneration"] = *status.observed_generation;
  }
  out["conditions"] = ConditionsToJson(status.conditions);
  if (status.governed_count.has_value()) out["governedCount"] = *status.governed_count;
  json governed = json::array();
  for (const GovernedWorkload& g : status.governed) {
    governed.push_back(
        {{"kind", WorkloadKindName(g.kind)}, {"name", g.name}, {"namespace", g.namespace_name}});
  }
  out["governed"] = std::move(governed);
  if (status.last_verdict.has_value())
    out["lastVerdict"] = PolicyVerdictToJson(*status.last_verdict);
  json verdicts = json::array();
  for (const PolicyVerdict& v : status.verdicts) verdicts.push_back(PolicyVerdictToJson(v));
  out["verdicts"] = std::move(verdicts);
  json drift = json::array();
  for (const DriftedPodStatus& d : status.injection_drift) {
    drift.push_back({{"pod", d.pod}, {"reason", d.reason}});
  }
  out["injectionDrift"] = std::move(drift);
  json suspended = json::array();
  for (const InjectionSuspendedStatus& e : status.injection_suspended) {
    suspended.push_back(InjectionSuspendedToJson(e));
  }
  out["injectionSuspended"] = std::move(suspended);
  return out;
}

}  // namespace allocguard::api
