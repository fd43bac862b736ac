// The allocguard.io custom resources: api::ParseAllocatorPolicy,
// ParseReplayCanary, ReplayCanarySpecToJson, the ReplayCanary status reader
// and writer (canary_status.h), the pod template checks, and the canary Job
// of every variant (canary::BuildCanaryJob), as the canary controller builds
// them. The input is one object (JSON).
//
// Invariants: nothing throws, whatever the JSON (policy.h and canary_status.h
// promise it); a status read and written back reads the same, and what is
// written parses as JSON again (no NaN, no invalid UTF-8 kept); a
// parsed canary's spec round-trips through ReplayCanarySpecToJson; for each
// variant, the candidate included, the Job builds or is refused with a
// message; a built Job is a batch/v1 Job named CanaryJobName(...) (at most
// 63 characters) in the canary's namespace, whose pod template passes
// CheckPodTemplate, asks for no host access the candidate's template did not,
// and has the driver container.

#include <algorithm>

#include "fuzz/fuzz_check.h"
#include "operator/api/canary_status.h"
#include "operator/api/names.h"
#include "operator/api/pod_template.h"
#include "operator/api/policy.h"
#include "operator/canary/job_builder.h"

namespace {

using allocguard::fuzz::NoThrow;
using allocguard::fuzz::Show;
using nlohmann::json;
namespace api = allocguard::api;
namespace canary = allocguard::canary;

// "spec.containers[1].securityContext.privileged" without its indices: the
// Job may add or drop containers around the template's own.
std::vector<std::string> HostAccessKinds(const json& pod_template) {
  std::vector<std::string> kinds;
  for (const std::string& field : api::HostAccessFields(pod_template)) {
    std::string kind;
    bool in_index = false;
    for (char ch : field) {
      if (ch == '[') in_index = true;
      if (!in_index) kind += ch;
      if (ch == ']') in_index = false;
    }
    kinds.push_back(kind);
  }
  return kinds;
}

void CheckRoundTrip(const json& object, const api::ReplayCanary& parsed) {
  json again_object = object;
  again_object["spec"] =
      NoThrow("ReplayCanarySpecToJson", [&] { return api::ReplayCanarySpecToJson(parsed.spec); });
  auto again = NoThrow("ParseReplayCanary", [&] { return api::ParseReplayCanary(again_object); });
  AG_FUZZ_CHECK(again.ok(), "the spec written back is refused: " + again.status().message() +
                                "\n  " + Show(again_object["spec"]));
  api::ReplayCanarySpec a = parsed.spec;
  api::ReplayCanarySpec b = again->spec;
  const json template_a = json::parse(a.pod_template_json, nullptr, false);
  const json template_b = json::parse(b.pod_template_json, nullptr, false);
  AG_FUZZ_CHECK(template_a == template_b, "the template changed in the round trip");
  a.pod_template_json.clear();
  b.pod_template_json.clear();
  AG_FUZZ_CHECK(a == b, "the spec changed in the round trip: " + Show(again_object["spec"]));
}

void CheckStatus(const json& object) {
  std::vector<std::string> problems;
  const api::ReplayCanaryStatus status =
      NoThrow("CanaryStatusOf", [&] { return api::CanaryStatusOf(object, &problems); });
  for (const std::string& p : problems) AG_FUZZ_CHECK(p.rfind("status", 0) == 0, p);
  const json written =
      NoThrow("ReplayCanaryStatusToJson", [&] { return api::ReplayCanaryStatusToJson(status); });
  std::vector<std::string> again_problems;
  const api::ReplayCanaryStatus again = NoThrow("ParseReplayCanaryStatus", [&] {
    return api::ParseReplayCanaryStatus(written, &again_problems);
  });
  // An unknown verdict is reported again (it is kept); nothing else is.
  for (const std::string& p : again_problems) {
    AG_FUZZ_CHECK(p.find("is not a verdict allocguard writes") != std::string::npos,
                  p + "\n  " + Show(written));
  }
  AG_FUZZ_CHECK(again == status, "the status changed in the round trip: " + Show(written));
  const std::string text = written.dump(-1, ' ', false, json::error_handler_t::replace);
  AG_FUZZ_CHECK(!json::parse(text, nullptr, false).is_discarded(), text);
}

void CheckJob(const api::ReplayCanary& c, const api::VariantSpec& variant) {
  canary::CanaryJobOptions options;
  options.image = "registry.example/allocguard:fuzz";
  canary::CanaryJobInfo info;
  auto job =
      NoThrow("BuildCanaryJob", [&] { return canary::BuildCanaryJob(c, variant, options, &info); });
  if (!job.ok()) {
    AG_FUZZ_CHECK(!job.status().message().empty(), "variant " + variant.name);
    return;
  }
  const std::string name = canary::CanaryJobName(c.name, variant.name);
  AG_FUZZ_CHECK(name.size() <= 63, name);
  AG_FUZZ_CHECK(job->is_object() && job->value("kind", json()) == "Job" &&
                    job->value("apiVersion", json()) == "batch/v1",
                Show(*job));
  const json& meta = (*job)["metadata"];
  AG_FUZZ_CHECK(meta.value("name", json()) == name && info.name == name, Show(meta));
  AG_FUZZ_CHECK(meta.value("namespace", json()) == c.ns, Show(meta));
  const json pod_template = job->value("/spec/template"_json_pointer, json());
  allocguard::Status checked = NoThrow(
      "CheckPodTemplate", [&] { return api::CheckPodTemplate(pod_template, "spec.template"); });
  AG_FUZZ_CHECK(checked.ok(), checked.message() + "\n  " + Show(pod_template));
  // The Job asks for no more of the node than the candidate's template did.
  const json candidate = json::parse(c.spec.pod_template_json, nullptr, false);
  std::vector<std::string> before = HostAccessKinds(candidate);
  for (const std::string& field : HostAccessKinds(pod_template)) {
    AG_FUZZ_CHECK(std::find(before.begin(), before.end(), field) != before.end(),
                  "the Job adds host access: " + field);
  }
  bool driver = false;
  for (const json& container : pod_template["spec"]["containers"]) {
    driver = driver || container.value("name", json()) == api::kDriverContainerName;
  }
  AG_FUZZ_CHECK(driver, "no driver container: " + Show(pod_template));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const json object = allocguard::fuzz::ParseInput(data, size);
  if (object.is_discarded()) return 0;
  (void)NoThrow("ParseAllocatorPolicy", [&] { return api::ParseAllocatorPolicy(object); });
  CheckStatus(object);
  auto parsed = NoThrow("ParseReplayCanary", [&] { return api::ParseReplayCanary(object); });
  if (!parsed.ok()) {
    AG_FUZZ_CHECK(!parsed.status().message().empty(), Show(object));
    return 0;
  }
  CheckRoundTrip(object, *parsed);
  const json candidate = json::parse(parsed->spec.pod_template_json, nullptr, false);
  allocguard::Status template_ok = NoThrow(
      "CheckPodTemplate", [&] { return api::CheckPodTemplate(candidate, "spec.template"); });
  AG_FUZZ_CHECK(
      template_ok.ok(),
      "ParseReplayCanary accepted a template CheckPodTemplate refuses: " + template_ok.message());
  CheckJob(*parsed, api::VariantSpec{"candidate", parsed->spec.candidate_allocator});
  for (const api::VariantSpec& variant : parsed->spec.canary.variants) CheckJob(*parsed, variant);
  return 0;
}
