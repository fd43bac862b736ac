#include "operator/admission/deployment_gate.h"

#include <ostream>
#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "operator/api/names.h"

namespace allocguard::admission {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

json Deployment() {
  return json::parse(R"({
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
    "spec": {
      "replicas": 3,
      "selector": {"matchLabels": {"app": "web"}},
      "template": {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": "web:1",
                                 "resources": {"limits": {"memory": "2Gi"}}}]}
      }
    }
  })");
}

api::AllocatorPolicy Policy(api::RolloutMode mode) {
  api::AllocatorPolicy policy;
  policy.ns = "shop";
  policy.name = "web-jemalloc";
  policy.spec.rollout.mode = mode;
  return policy;
}

std::string HashOf(const json& deployment) { return TemplateHash(deployment["spec"]["template"]); }

json Held(json deployment) {
  deployment["spec"]["paused"] = true;
  deployment["metadata"]["annotations"][api::kHeldCandidateAnnotation] = HashOf(deployment);
  return deployment;
}

json WithImage(json deployment, const std::string& image) {
  deployment["spec"]["template"]["spec"]["containers"][0]["image"] = image;
  return deployment;
}

enum class Expect { kUntouched, kHeld, kReleased, kFlatRecorded };

struct GateCase {
  std::string label;
  AdmissionOperation operation;
  std::function<json()> old_deployment;
  std::function<json()> new_deployment;
  std::optional<api::RolloutMode> mode;  // nullopt: no policy
  std::set<std::string> flat;            // hashes with a Flat verdict (by image)
  GateAction action;
  Expect expect;
  bool needs_canary;
  std::string reason_part;
};

void PrintTo(const GateCase& c, std::ostream* os) { *os << c.label; }

class DeploymentGateTest : public ::testing::TestWithParam<GateCase> {};

TEST_P(DeploymentGateTest, Decides) {
  const GateCase& c = GetParam();
  GateInput input;
  input.operation = c.operation;
  input.old_deployment = c.old_deployment ? c.old_deployment() : json();
  input.new_deployment = c.new_deployment();
  if (c.mode) input.policy = Policy(*c.mode);
  std::set<std::string> flat_hashes;
  for (const std::string& image : c.flat)
    flat_hashes.insert(HashOf(WithImage(Deployment(), image)));
  input.has_flat_verdict = [&](const std::string& h) { return flat_hashes.contains(h); };
  input.operator_namespace = "allocguard-system";

  GateDecision decision = DecideDeploymentGate(input);
  EXPECT_EQ(decision.action, c.action) << decision.reason;
  EXPECT_EQ(decision.needs_canary, c.needs_canary) << decision.reason;
  EXPECT_THAT(decision.reason, HasSubstr(c.reason_part));
  const json patched = input.new_deployment.patch(decision.patch);
  const std::string hash = HashOf(input.new_deployment);
  switch (c.expect) {
    case Expect::kUntouched:
      EXPECT_EQ(decision.patch, json::array()) << decision.patch.dump();
      break;
    case Expect::kHeld:
      EXPECT_EQ(decision.template_hash, hash);
      EXPECT_EQ(patched["spec"]["paused"], true);
      EXPECT_EQ(patched["metadata"]["annotations"][api::kHeldCandidateAnnotation], hash);
      // Nothing but the pause and the annotation changes.
      {
        json expected = input.new_deployment;
        expected["spec"]["paused"] = true;
        expected["metadata"]["annotations"][api::kHeldCandidateAnnotation] = hash;
        EXPECT_EQ(patched, expected);
      }
      break;
    case Expect::kReleased:
      EXPECT_EQ(patched["spec"]["paused"], false);
      EXPECT_FALSE(patched["metadata"]["annotations"].contains(api::kHeldCandidateAnnotation));
      EXPECT_FALSE(patched["metadata"]["annotations"].contains(api::kOverrideHoldAnnotation));
      EXPECT_EQ(patched["metadata"]["annotations"][api::kReleasedCandidateAnnotation], hash);
      break;
    case Expect::kFlatRecorded:
      EXPECT_NE(patched["spec"].value("paused", false), true);
      EXPECT_EQ(patched["metadata"]["annotations"][api::kReleasedCandidateAnnotation], hash);
      break;
  }
  // Reinvocation: the patched object admitted again needs no further patch.
  GateInput again = input;
  again.new_deployment = patched;
  EXPECT_EQ(DecideDeploymentGate(again).patch, json::array());
}

json RolloutRestart() {
  json d = Deployment();
  d["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"] =
      "2026-11-29T22:00:00Z";
  return d;
}

json OptedOut(json d, bool on_template) {
  (on_template ? d["spec"]["template"] : d)["metadata"]["annotations"][api::kInjectAnnotation] =
      "false";
  return d;
}

json InNamespace(json d, const std::string& ns) {
  d["metadata"]["namespace"] = ns;
  return d;
}

json Released(json d) {
  d["spec"]["paused"] = false;
  d["metadata"]["annotations"] = json::object();
  d["metadata"]["annotations"].erase(api::kHeldCandidateAnnotation);
  d["metadata"]["annotations"][api::kReleasedCandidateAnnotation] = HashOf(d);
  return d;
}

constexpr auto kCreate = AdmissionOperation::kCreate;
constexpr auto kUpdate = AdmissionOperation::kUpdate;
constexpr auto kEnforce = api::RolloutMode::kEnforce;
constexpr auto kAudit = api::RolloutMode::kAudit;

INSTANTIATE_TEST_SUITE_P(
    Cases, DeploymentGateTest,
    ::testing::Values(
        GateCase{"no_policy",
                 kUpdate,
                 Deployment,
                 [] { return WithImage(Deployment(), "web:2"); },
                 std::nullopt,
                 {},
                 GateAction::kAllow,
                 Expect::kUntouched,
                 false,
                 "no AllocatorPolicy"},
        GateCase{"mode_off",
                 kUpdate,
                 Deployment,
                 [] { return WithImage(Deployment(), "web:2"); },
                 api::RolloutMode::kOff,
                 {},
                 GateAction::kAllow,
                 Expect::kUntouched,
                 false,
                 "Off"},
        GateCase{"opt_out_on_deployment",
                 kUpdate,
                 Deployment,
                 [] { return OptedOut(WithImage(Deployment(), "web:2"), false); },
                 kEnforce,
                 {},
                 GateAction::kAllow,
                 Expect::kUntouched,
                 false,
                 "opted out"},
        GateCase{"opt_out_on_template",
                 kUpdate,
                 Deployment,
                 [] { return OptedOut(WithImage(Deployment(), "web:2"), true); },
                 kEnforce,
                 {},
                 GateAction::kAllow,
                 Expect::kUntouched,
                 false,
                 "opted out"},
        GateCase{"kube_system",
                 kCreate,
                 nullptr,
                 [] { return InNamespace(Deployment(), "kube-system"); },
                 kEnforce,
                 {},
                 GateAction::kAllow,
                 Expect::kUntouched,
                 false,
                 "never gated"},
        GateCase{"operator_namespace",
                 kCreate,
                 nullptr,
                 [] { return InNamespace(Deployment(), "allocguard-system"); },
                 kEnforce,
                 {},
                 GateAction::kAllow,
                 Expect::kUntouched,
                 false,
                 "never gated"},
        GateCase{"create_enforce_holds",
                 kCreate,
                 nullptr,
                 Deployment,
                 kEnforce,
                 {},
                 GateAction::kHold,
                 Expect::kHeld,
                 true,
                 "Enforce"},
        GateCase{"create_enforce_flat_runs",
                 kCreate,
                 nullptr,
                 Deployment,
                 kEnforce,
                 {"web:1"},
                 GateAction::kAllow,
                 Expect::kFlatRecorded,
                 false,
                 "Flat"},
        GateCase{"image_change_enforce_holds",
                 kUpdate,
                 Deployment,
                 [] { return WithImage(Deployment(), "web:2"); },
                 kEnforce,
                 {},
                 GateAction::kHold,
                 Expect::kHeld,
                 true,
                 "held until"},
        GateCase{"image_change_enforce_flat",
                 kUpdate,
                 Deployment,
                 [] { return WithImage(Deployment(), "web:2"); },
                 kEnforce,
                 {"web:2"},
                 GateAction::kAllow,
                 Expect::kFlatRecorded,
                 false,
                 "Flat"},
        GateCase{"image_change_audit",
                 kUpdate,
                 Deployment,
                 [] { return WithImage(Deployment(), "web:2"); },
                 kAudit,
                 {},
                 GateAction::kAllow,
                 Expect::kUntouched,
                 true,
                 "Audit"},
        GateCase{"rollout_restart",
                 kUpdate,
                 Deployment,
                 RolloutRestart,
                 kEnforce,
                 {},
                 GateAction::kAllow,
                 Expect::kUntouched,
                 false,
                 "did not change"},
        GateCase{"scale",
                 kUpdate,
                 Deployment,
                 [] {
                   json d = Deployment();
                   d["spec"]["replicas"] = 10;
                   return d;
                 },
                 kEnforce,
                 {},
                 GateAction::kAllow,
                 Expect::kUntouched,
                 false,
                 "did not change"},
        GateCase{"env_change",
                 kUpdate,
                 Deployment,
                 [] {
                   json d = Deployment();
                   d["spec"]["template"]["spec"]["containers"][0]["env"] = {
                       {{"name", "CACHE_MB"}, {"value", "512"}}};
                   return d;
                 },
                 kEnforce,
                 {},
                 GateAction::kHold,
                 Expect::kHeld,
                 true,
                 "Enforce"},
        GateCase{"resources_change",
                 kUpdate,
                 Deployment,
                 [] {
                   json d = Deployment();
                   d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"] =
                       "4Gi";
                   return d;
                 },
                 kEnforce,
                 {},
                 GateAction::kHold,
                 Expect::kHeld,
                 true,
                 "Enforce"},
        GateCase{"already_held_same_hash",
                 kUpdate,
                 Deployment,
                 [] { return Held(WithImage(Deployment(), "web:2")); },
                 kEnforce,
                 {},
                 GateAction::kHold,
                 Expect::kUntouched,
                 true,
                 "Enforce"},
        GateCase{"held_then_unchanged_template",
                 kUpdate,
                 [] { return Held(Deployment()); },
                 [] { return Held(Deployment()); },
                 kEnforce,
                 {},
                 GateAction::kAllow,
                 Expect::kUntouched,
                 false,
                 "did not change"},
        GateCase{"operator_releases_hold",
                 kUpdate,
                 [] { return Held(Deployment()); },
                 [] { return Released(Deployment()); },
                 kEnforce,
                 {},
                 GateAction::kAllow,
                 Expect::kUntouched,
                 false,
                 "did not change"},
        GateCase{"held_new_candidate_rehold",
                 kUpdate,
                 [] { return Held(Deployment()); },
                 [] {
                   json d = WithImage(Deployment(), "web:3");
                   d["spec"]["paused"] = true;
                   d["metadata"]["annotations"][api::kHeldCandidateAnnotation] =
                       HashOf(Deployment());
                   return d;
                 },
                 kEnforce,
                 {},
                 GateAction::kHold,
                 Expect::kHeld,
                 true,
                 "Enforce"},
        GateCase{"held_new_candidate_flat_releases",
                 kUpdate,
                 [] { return Held(Deployment()); },
                 [] {
                   json d = WithImage(Deployment(), "web:3");
                   d["spec"]["paused"] = true;
                   d["metadata"]["annotations"][api::kHeldCandidateAnnotation] =
                       HashOf(Deployment());
                   return d;
                 },
                 kEnforce,
                 {"web:3"},
                 GateAction::kRelease,
                 Expect::kReleased,
                 false,
                 "released"},
        // An override set but not acted on (still paused) goes with the hold.
        GateCase{"held_overridden_new_candidate_flat_releases",
                 kUpdate,
                 [] {
                   json d = Held(Deployment());
                   d["metadata"]["annotations"][api::kOverrideHoldAnnotation] = "INC-7";
                   return d;
                 },
                 [] {
                   json d = WithImage(Deployment(), "web:3");
                   d["spec"]["paused"] = true;
                   d["metadata"]["annotations"][api::kHeldCandidateAnnotation] =
                       HashOf(Deployment());
                   d["metadata"]["annotations"][api::kOverrideHoldAnnotation] = "INC-7";
                   return d;
                 },
                 kEnforce,
                 {"web:3"},
                 GateAction::kRelease,
                 Expect::kReleased,
                 false,
                 "released"}),
    [](const auto& test_case) { return test_case.param.label; });

TEST(TemplateHashTest, StableAndSixteenHexDigits) {
  const std::string hash = HashOf(Deployment());
  EXPECT_EQ(hash.size(), 16u);
  EXPECT_EQ(hash.find_first_not_of("0123456789abcdef"), std::string::npos);
  // Key order in the source JSON does not matter.
  const json reordered = json::parse(R"({
    "spec": {"containers": [{"resources": {"limits": {"memory": "2Gi"}},
                             "image": "web:1", "name": "app"}]},
    "metadata": {"labels": {"app": "web"}}
  })");
  EXPECT_EQ(TemplateHash(reordered), hash);
  // Fixed expectation: a change to the canonical form is a change of every stored key.
  EXPECT_EQ(TemplateHash(json::object()),
            TemplateHash(json::parse(R"({"metadata": {"labels": {}}})")));
}

struct HashCase {
  std::string label;
  std::function<void(json&)> edit;  // applied to the template
  bool changes;
};

void PrintTo(const HashCase& c, std::ostream* os) { *os << c.label; }

class TemplateHashChangeTest : public ::testing::TestWithParam<HashCase> {};

TEST_P(TemplateHashChangeTest, OnlyRolloutRelevantPartsCount) {
  const HashCase& c = GetParam();
  json pod_template = Deployment()["spec"]["template"];
  const std::string before = TemplateHash(pod_template);
  c.edit(pod_template);
  EXPECT_EQ(TemplateHash(pod_template) != before, c.changes);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TemplateHashChangeTest,
    ::testing::Values(
        HashCase{"restarted_at",
                 [](json& tmpl) {
                   tmpl["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"] = "now";
                 },
                 false},
        HashCase{
            "other_annotation",
            [](json& tmpl) { tmpl["metadata"]["annotations"]["prometheus.io/scrape"] = "true"; },
            false},
        HashCase{
            "allocguard_annotation",
            [](json& tmpl) { tmpl["metadata"]["annotations"][api::kInjectAnnotation] = "true"; },
            true},
        HashCase{"label", [](json& tmpl) { tmpl["metadata"]["labels"]["version"] = "2"; }, true},
        HashCase{"image", [](json& tmpl) { tmpl["spec"]["containers"][0]["image"] = "web:2"; },
                 true},
        HashCase{"command",
                 [](json& tmpl) {
                   tmpl["spec"]["containers"][0]["command"] = {"/bin/web", "-v"};
                 },
                 true},
        HashCase{"args", [](json& tmpl) { tmpl["spec"]["containers"][0]["args"] = {"--fast"}; },
                 true},
        HashCase{"volume",
                 [](json& tmpl) {
                   tmpl["spec"]["volumes"] = {{{"name", "v"}, {"emptyDir", json::object()}}};
                 },
                 true},
        HashCase{"labels_removed", [](json& tmpl) { tmpl["metadata"].erase("labels"); }, true}),
    [](const auto& test_case) { return test_case.param.label; });

}  // namespace
}  // namespace allocguard::admission
