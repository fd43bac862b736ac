#include "controllers/gate_decision.h"

#include <gtest/gtest.h>

#include "controllers/canary_fixture_for_test.h"
#include "controllers/rollout_decision.h"
#include "operator/admission/deployment_gate.h"
#include "operator/api/names.h"

namespace allocguard::controllers {
namespace {

using nlohmann::json;

api::AllocatorPolicy Policy(api::RolloutMode mode, const std::string& name = "web-policy") {
  api::AllocatorPolicy p;
  p.spec.canary.load.requests = {api::LoadRequestSpec{.name = "get", .path = "/"}};
  p.ns = "shop";
  p.name = name;
  p.spec.selector.match_labels = {{"app", "web"}};
  p.spec.allocator.name = api::Allocator::kJemalloc;
  p.spec.rollout.mode = mode;
  return p;
}

json Template() {
  return {{"metadata", {{"labels", {{"app", "web"}}}}},
          {"spec", {{"containers", json::array({{{"name", "server"}, {"image", "web:2"}}})}}}};
}

const std::string& Hash() {
  static const std::string hash = admission::TemplateHash(Template());
  return hash;
}

json Deployment(json annotations = json::object(), bool paused = false) {
  json d = {{"apiVersion", "apps/v1"}, {"kind", "Deployment"}};
  d["metadata"] = {
      {"name", "web"}, {"namespace", "shop"}, {"uid", "u-1"}, {"annotations", annotations}};
  d["spec"] = {{"paused", paused}, {"template", Template()}};
  return d;
}

// The canary the operator would create for Deployment()'s template, with
// a status as the canary reconciler writes it.
json Canary(const std::string& phase, const std::string& verdict,
            const std::string& flat_variant = "") {
  return testing::TrustedCanary(Deployment(), Policy(api::RolloutMode::kEnforce), Hash(), phase,
                                verdict, flat_variant);
}

TEST(ParseGateTargetTest, KindsAndErrors) {
  struct Case {
    const char* text;
    bool ok;
    GateKind kind;
    const char* name;
  };
  const Case cases[] = {
      {"web", true, GateKind::kDeployment, "web"},
      {"deployment/web", true, GateKind::kDeployment, "web"},
      {"deploy/web", true, GateKind::kDeployment, "web"},
      {"Deployment.apps/web", true, GateKind::kDeployment, "web"},
      {"replaycanary/web-1", true, GateKind::kReplayCanary, "web-1"},
      {"replaycanaries.allocguard.io/web-1", true, GateKind::kReplayCanary, "web-1"},
      {"pod/web", false, GateKind::kDeployment, ""},
      {"deployment/", false, GateKind::kDeployment, ""},
      {"", false, GateKind::kDeployment, ""},
      {"deployment/a/b", false, GateKind::kDeployment, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    auto t = ParseGateTarget(c.text);
    ASSERT_EQ(t.ok(), c.ok);
    if (!c.ok) continue;
    EXPECT_EQ(t->kind, c.kind);
    EXPECT_EQ(t->name, c.name);
  }
}

TEST(ParseGateTargetTest, StatefulSetsAndDaemonSets) {
  for (const char* text : {"statefulset/db", "sts/db", "StatefulSets.apps/db"}) {
    auto t = ParseGateTarget(text);
    ASSERT_TRUE(t.ok()) << text;
    EXPECT_EQ(t->kind, GateKind::kStatefulSet);
    EXPECT_EQ(t->Workload(), WorkloadKind::kStatefulSet);
    EXPECT_EQ(t->Display(), "statefulset/db");
  }
  for (const char* text : {"daemonset/db", "ds/db", "daemonsets.apps/db"}) {
    auto t = ParseGateTarget(text);
    ASSERT_TRUE(t.ok()) << text;
    EXPECT_EQ(t->kind, GateKind::kDaemonSet);
    EXPECT_EQ(t->Display(), "daemonset/db");
  }
  EXPECT_EQ(ParseGateTarget("web")->Workload(), WorkloadKind::kDeployment);
}

// A StatefulSet as AnswerDeploymentGate reads it with kind StatefulSet: the
// same rules, its own canary, no override by annotation.
TEST(AnswerDeploymentGateTest, StatefulSet) {
  auto set = [](json annotations) {
    json s = Deployment(std::move(annotations));
    s["kind"] = "StatefulSet";
    s["spec"].erase("paused");
    return s;
  };
  const json held = {{api::kHeldCandidateAnnotation, Hash()}};
  const std::vector<api::AllocatorPolicy> enforce = {Policy(api::RolloutMode::kEnforce)};
  auto answer = [&](const json& object, std::optional<json> canary) {
    return AnswerDeploymentGate(
        object, enforce, [&](const std::string&) { return canary; }, WorkloadKind::kStatefulSet);
  };
  auto canary_of = [&](WorkloadKind kind, const std::string& verdict) {
    return testing::TrustedCanaryOf(kind, set(json::object()), enforce[0], Hash(), "Completed",
                                    verdict, verdict == "Flat" ? "" : "jemalloc");
  };

  GateAnswer a = answer(set(held), canary_of(WorkloadKind::kStatefulSet, "AllocatorRetention"));
  EXPECT_EQ(a.state, GateState::kHeld);
  EXPECT_EQ(a.reason, "CanaryNotFlat");
  EXPECT_NE(a.message.find("variant jemalloc stayed flat"), std::string::npos) << a.message;
  EXPECT_NE(a.message.find("rollout mode to Audit or Off"), std::string::npos) << a.message;
  EXPECT_NE(a.message.find("override-hold=<reason> and set the pinned field"), std::string::npos)
      << a.message;

  a = answer(set(held), canary_of(WorkloadKind::kStatefulSet, "Flat"));
  EXPECT_EQ(a.reason, "Releasing") << a.message;
  a = answer(set(held), canary_of(WorkloadKind::kDeployment, "Flat"));
  EXPECT_EQ(a.reason, "CanaryNotTrusted") << a.message;
  EXPECT_NE(a.message.find("not a StatefulSet"), std::string::npos) << a.message;

  a = answer(set({{api::kReleasedCandidateAnnotation, Hash()}}), std::nullopt);
  EXPECT_EQ(a.state, GateState::kProceed);
  EXPECT_EQ(a.reason, "Released");

  json overridden = held;
  overridden[api::kOverrideHoldAnnotation] = "hotfix";
  a = answer(set(overridden), std::nullopt);
  EXPECT_EQ(a.state, GateState::kWaiting) << "an override annotation releases no StatefulSet";
  EXPECT_EQ(a.reason, "CanaryPending");
}

TEST(GateExitCodeTest, DistinctPerOutcome) {
  EXPECT_EQ(GateExitCode(GateState::kProceed), 0);
  EXPECT_EQ(GateExitCode(GateState::kHeld), 2);
  EXPECT_EQ(GateExitCode(GateState::kFailed), 3);
  EXPECT_EQ(GateExitCode(GateState::kTimedOut), 4);
  EXPECT_EQ(GateExitCode(GateState::kNotFound), 5);
}

TEST(AnswerDeploymentGateTest, Table) {
  const json held = {{api::kHeldCandidateAnnotation, Hash()}};
  const json released = {{api::kReleasedCandidateAnnotation, Hash()}};
  const json held_other = {{api::kHeldCandidateAnnotation, "0123456789abcdef"}};
  const json overridden = {{api::kHeldCandidateAnnotation, Hash()},
                           {api::kOverrideHoldAnnotation, "hotfix"}};
  const json opted_out = {{api::kInjectAnnotation, "false"}};
  const json released_old = {{api::kReleasedCandidateAnnotation, "0123456789abcdef"}};
  using Policies = std::vector<api::AllocatorPolicy>;
  const Policies enforce = {Policy(api::RolloutMode::kEnforce)};
  const Policies audit = {Policy(api::RolloutMode::kAudit)};
  struct Case {
    const char* name;
    Policies policies;
    json deployment;
    std::optional<json> canary;
    GateState state;
    const char* reason;
    const char* in_message;
  };
  const std::vector<Case> cases = {
      {"no policy",
       {},
       Deployment(held, true),
       std::nullopt,
       GateState::kProceed,
       "Ungoverned",
       "no AllocatorPolicy"},
      {"two policies select it",
       {Policy(api::RolloutMode::kEnforce, "a"), Policy(api::RolloutMode::kEnforce, "b")},
       Deployment(held, true),
       std::nullopt,
       GateState::kProceed,
       "Ungoverned",
       "2 Allocator"},
      {"mode Off",
       {Policy(api::RolloutMode::kOff)},
       Deployment(held, true),
       std::nullopt,
       GateState::kProceed,
       "RolloutModeOff",
       "Off"},
      {"opted out while held: the hold stays", enforce,
       Deployment({{api::kInjectAnnotation, "false"}, {api::kHeldCandidateAnnotation, Hash()}},
                  true),
       Canary("Completed", "Flat"), GateState::kHeld, "OptedOutWhileHeld",
       "an opt-out does not lift a hold"},
      {"opted out", enforce, Deployment(opted_out), std::nullopt, GateState::kProceed, "OptedOut",
       "inject=false"},
      {"held, no canary yet", enforce, Deployment(held, true), std::nullopt, GateState::kWaiting,
       "CanaryPending", "has not started"},
      {"held, canary running", enforce, Deployment(held, true), Canary("Running", ""),
       GateState::kWaiting, "CanaryRunning", "is Running"},
      {"held, Ratchet", enforce, Deployment(held, true),
       Canary("Completed", "AllocatorRetention", "jemalloc"), GateState::kHeld, "CanaryNotFlat",
       "variant jemalloc stayed flat"},
      {"held, variant failed", enforce, Deployment(held, true), Canary("Completed", "Failed"),
       GateState::kFailed, "CanaryFailed", "could not judge"},
      {"held, canary invalid", enforce, Deployment(held, true), Canary("Failed", "Failed"),
       GateState::kFailed, "CanaryFailed", "test explanation"},
      {"held, Flat, not yet released", enforce, Deployment(held, true), Canary("Completed", "Flat"),
       GateState::kWaiting, "Releasing", "waiting for the operator"},
      {"held, Flat, but not a canary the operator trusts", enforce, Deployment(held, true),
       [] {
         json c = Canary("Completed", "Flat");
         c["spec"]["template"]["spec"]["containers"][0]["image"] = "web:flat";
         return c;
       }(),
       GateState::kHeld, "CanaryNotTrusted", "is not template"},
      {"released after Flat", enforce, Deployment(released), Canary("Completed", "Flat"),
       GateState::kProceed, "Released", "found Flat (floor slope +2.40 GiB/h)"},
      {"released baseline, no canary", enforce, Deployment(released), std::nullopt,
       GateState::kProceed, "Released", "adopted as the baseline"},
      {"override", enforce, Deployment(overridden, false), Canary("Completed", "Ratchet"),
       GateState::kProceed, "Overridden", "hotfix"},
      {"override, hold cleared by the operator", enforce,
       Deployment({{api::kReleasedCandidateAnnotation, Hash()},
                   {api::kOverriddenCandidateAnnotation, Hash() + " hotfix"}}),
       Canary("Completed", "Ratchet"), GateState::kProceed, "Overridden", "by hand: hotfix"},
      {"an override of an older template does not cover this one", enforce,
       Deployment({{api::kReleasedCandidateAnnotation, Hash()},
                   {api::kOverriddenCandidateAnnotation, "0123456789abcdef hotfix"}}),
       Canary("Completed", "Flat"), GateState::kProceed, "Released", "found Flat"},
      {"held candidate is an older template", enforce, Deployment(held_other, true), std::nullopt,
       GateState::kWaiting, "TemplateChanged", "0123456789abcdef"},
      {"enforce, not adopted yet", enforce, Deployment(), std::nullopt, GateState::kWaiting,
       "AwaitingAdoption", "not adopted"},
      {"audit, canary running", audit, Deployment(released_old), Canary("Running", ""),
       GateState::kWaiting, "CanaryRunning", "not held"},
      {"audit, Ratchet reported, not held", audit, Deployment(released_old),
       Canary("Completed", "Ratchet"), GateState::kProceed, "NotHeld", "found Ratchet"},
      {"audit, released after Ratchet", audit, Deployment(released), Canary("Completed", "Ratchet"),
       GateState::kProceed, "NotHeld", "found Ratchet"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::string asked;
    GateAnswer a = AnswerDeploymentGate(c.deployment, c.policies, [&](const std::string& name) {
      asked = name;
      return c.canary;
    });
    EXPECT_EQ(GateStateName(a.state), std::string(GateStateName(c.state)));
    EXPECT_EQ(a.reason, c.reason);
    EXPECT_NE(a.message.find(c.in_message), std::string::npos) << a.message;
    if (c.policies.size() == 1 && c.policies[0].spec.rollout.mode != api::RolloutMode::kOff &&
        a.reason != "OptedOut" && a.reason != "OptedOutWhileHeld") {
      // The canary looked up is the one the rollout reconciler creates.
      EXPECT_EQ(asked,
                CanaryName(CanaryKey(MeasuredTemplateOf(WorkloadKind::kDeployment, c.deployment),
                                     c.policies[0])));
      EXPECT_EQ(a.template_hash, Hash());
      EXPECT_EQ(a.policy, c.policies[0].name);
    } else {
      // Rules 1 to 3 answer before the template's canary is looked up.
      EXPECT_EQ(asked, "");
      EXPECT_EQ(a.template_hash, "");
    }
  }
}

TEST(DecideCanaryGateTest, Table) {
  struct Case {
    const char* name;
    json canary;
    GateState state;
    const char* reason;
  };
  json no_status = Canary("Running", "");
  no_status.erase("status");
  const std::vector<Case> cases = {
      {"no status yet", no_status, GateState::kWaiting, "CanaryPending"},
      {"pending", Canary("Pending", ""), GateState::kWaiting, "CanaryPending"},
      {"running", Canary("Running", ""), GateState::kWaiting, "CanaryRunning"},
      {"flat", Canary("Completed", "Flat"), GateState::kProceed, "CanaryFlat"},
      {"ratchet", Canary("Completed", "Ratchet"), GateState::kHeld, "CanaryNotFlat"},
      {"leak", Canary("Completed", "Leak"), GateState::kHeld, "CanaryNotFlat"},
      {"inconclusive", Canary("Completed", "Inconclusive"), GateState::kHeld, "CanaryNotFlat"},
      {"variant failed", Canary("Completed", "Failed"), GateState::kFailed, "CanaryFailed"},
      {"invalid canary", Canary("Failed", "Failed"), GateState::kFailed, "CanaryFailed"},
      // An edited status: a verdict allocguard does not write is Failed.
      {"unknown verdict", Canary("Completed", "Great"), GateState::kFailed, "CanaryFailed"},
      {"verdict in lower case", Canary("Completed", "flat"), GateState::kFailed, "CanaryFailed"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    GateAnswer a = AnswerCanaryGate(c.canary);
    EXPECT_EQ(GateStateName(a.state), std::string(GateStateName(c.state)));
    EXPECT_EQ(a.reason, c.reason);
  }
}

TEST(GateAnswerTest, LineAndJson) {
  json canary = Canary("Completed", "Ratchet");
  canary["metadata"]["name"] = "c";
  GateAnswer a = AnswerCanaryGate(canary);
  GateTarget t{GateKind::kReplayCanary, "c"};
  EXPECT_EQ(
      FormatGateLine(t, a).rfind("replaycanary/c Held CanaryNotFlat: canary c found Ratchet", 0),
      0u)
      << FormatGateLine(t, a);
  json j = a.ToJson();
  EXPECT_EQ(j["state"], "Held");
  EXPECT_EQ(j["exitCode"], 2);
  EXPECT_EQ(j["verdict"], "Ratchet");
  EXPECT_EQ(j["floorSlope"], "+2.40 GiB/h");
  EXPECT_EQ(j["policy"], "web-policy");
  EXPECT_FALSE(j.contains("flatVariant"));  // empty fields are left out
}

TEST(GateAnswerTest, AnUnknownVerdictIsNamedInTheExplanation) {
  GateAnswer a = AnswerCanaryGate(Canary("Completed", "Great"));
  EXPECT_EQ(a.verdict, Verdict::kFailed);
  EXPECT_NE(a.explanation.find("verdict \"Great\", which allocguard does not write"),
            std::string::npos)
      << a.explanation;
}

}  // namespace
}  // namespace allocguard::controllers
