#include "controllers/rollout_decision.h"

#include <gtest/gtest.h>

#include "operator/api/names.h"

namespace allocguard::controllers {
namespace {

using nlohmann::json;

api::AllocatorPolicy Policy(api::RolloutMode mode) {
  api::AllocatorPolicy p;
  p.ns = "shop";
  p.name = "web-policy";
  p.generation = 3;
  p.spec.selector.match_labels = {{"app", "web"}};
  p.spec.allocator.name = api::Allocator::kJemalloc;
  p.spec.rollout.mode = mode;
  return p;
}

json Deployment(json annotations = json::object(), bool paused = false) {
  json containers = json::array({{{"name", "server"}, {"image", "web:2"}}});
  json tmpl = {{"metadata", {{"labels", {{"app", "web"}}}}},
               {"spec", {{"containers", containers}}}};
  json d = {{"apiVersion", "apps/v1"}, {"kind", "Deployment"}};
  d["metadata"] = {
      {"name", "web"}, {"namespace", "shop"}, {"uid", "u-1"}, {"annotations", annotations}};
  d["spec"] = {{"paused", paused}, {"template", tmpl}};
  return d;
}

json Canary(const std::string& phase, const std::string& verdict,
            const std::string& flat_variant = "") {
  json status = {{"phase", phase},
                 {"verdict", verdict},
                 {"explanation", "test explanation"},
                 {"floorSlope", "+2.40 GiB/h"}};
  if (!flat_variant.empty()) status["flatVariant"] = flat_variant;
  return {{"metadata", {{"name", CanaryName("web", "hash1", "key")}}}, {"status", status}};
}

TEST(DecideRolloutTest, Table) {
  const json held = {{api::kHeldCandidateAnnotation, "hash1"}};
  const json released = {{api::kReleasedCandidateAnnotation, "hash1"}};
  struct Case {
    const char* name;
    std::optional<api::AllocatorPolicy> policy;
    json deployment;
    std::optional<json> canary;
    bool creates_canary;
    bool patches;
    bool unpauses;
    bool warning;
    const char* event_reason;
  };
  const std::vector<Case> cases = {
      {"ungoverned", std::nullopt, Deployment(), std::nullopt, false, false, false, false, ""},
      {"held, then its policy was deleted: released", std::nullopt, Deployment(held, true),
       std::nullopt, false, true, true, false, "HoldReleased"},
      {"mode Off", Policy(api::RolloutMode::kOff), Deployment(), std::nullopt, false, false, false,
       false, ""},
      {"held, then the policy went to Off: released", Policy(api::RolloutMode::kOff),
       Deployment(held, true), std::nullopt, false, true, true, false, "HoldReleased"},
      {"held, then the policy went to Audit: released", Policy(api::RolloutMode::kAudit),
       Deployment(held, true), Canary("Completed", "Ratchet"), false, true, true, false,
       "HoldReleased"},
      {"held, no canary yet", Policy(api::RolloutMode::kEnforce), Deployment(held, true),
       std::nullopt, true, false, false, false, "CanaryStarted"},
      {"held, canary running", Policy(api::RolloutMode::kEnforce), Deployment(held, true),
       Canary("Running", ""), false, false, false, false, ""},
      {"held, Flat", Policy(api::RolloutMode::kEnforce), Deployment(held, true),
       Canary("Completed", "Flat"), false, true, true, false, "RolloutReleased"},
      {"held, Ratchet", Policy(api::RolloutMode::kEnforce), Deployment(held, true),
       Canary("Completed", "AllocatorRetention", "jemalloc"), false, false, false, true,
       "RolloutHeld"},
      {"held, canary Failed", Policy(api::RolloutMode::kEnforce), Deployment(held, true),
       Canary("Failed", "Failed"), false, false, false, true, "RolloutHeld"},
      {"audit, new template", Policy(api::RolloutMode::kAudit), Deployment(), std::nullopt, true,
       false, false, false, "CanaryStarted"},
      {"audit, Ratchet reported, recorded, not paused", Policy(api::RolloutMode::kAudit),
       Deployment(), Canary("Completed", "Ratchet"), false, true, false, true, "CanaryFailedAudit"},
      {"audit, already released", Policy(api::RolloutMode::kAudit), Deployment(released),
       std::nullopt, false, false, false, false, ""},
      {"enforce, released, not held (rollout restart)", Policy(api::RolloutMode::kEnforce),
       Deployment(released), std::nullopt, false, false, false, false, ""},
      {"enforce, running before the policy came: adopted as the baseline, no canary",
       Policy(api::RolloutMode::kEnforce), Deployment(), std::nullopt, false, true, false, false,
       "TemplateAdopted"},
      {"opted out", Policy(api::RolloutMode::kEnforce),
       Deployment({{api::kInjectAnnotation, "false"}}), std::nullopt, false, false, false, false,
       ""},
      {"held, then opted out: released", Policy(api::RolloutMode::kEnforce),
       Deployment({{api::kInjectAnnotation, "false"}, {api::kHeldCandidateAnnotation, "hash1"}},
                  true),
       std::nullopt, false, true, true, false, "HoldReleased"},
      {"held, overridden and unpaused by the user: the hold is cleared",
       Policy(api::RolloutMode::kEnforce),
       Deployment({{api::kHeldCandidateAnnotation, "hash1"},
                   {api::kOverrideHoldAnnotation, "hotfix for INC-42"}},
                  false),
       Canary("Completed", "Ratchet"), false, true, false, false, "HoldCleared"},
      {"held, override annotated but still paused: still held", Policy(api::RolloutMode::kEnforce),
       Deployment({{api::kHeldCandidateAnnotation, "hash1"},
                   {api::kOverrideHoldAnnotation, "hotfix for INC-42"}},
                  true),
       Canary("Completed", "Ratchet"), false, false, false, true, "RolloutHeld"},
  };
  for (const Case& c : cases) {
    RolloutInput in{c.deployment, c.policy, c.canary, "hash1"};
    RolloutActions a = DecideRollout(in);
    EXPECT_EQ(a.create_canary.has_value(), c.creates_canary) << c.name;
    EXPECT_EQ(a.deployment_patch.has_value(), c.patches) << c.name;
    EXPECT_EQ(a.event_warning, c.warning) << c.name;
    EXPECT_EQ(a.event_reason, c.event_reason) << c.name;
    if (a.deployment_patch.has_value()) {
      const json& p = *a.deployment_patch;
      if (a.event_reason == "HoldReleased") {
        EXPECT_FALSE(p["metadata"]["annotations"].contains(api::kReleasedCandidateAnnotation))
            << c.name << ": a template no canary proved is not recorded as released";
      } else {
        EXPECT_EQ(p["metadata"]["annotations"][api::kReleasedCandidateAnnotation], "hash1")
            << c.name;
      }
      EXPECT_EQ(p.contains("spec") && p["spec"]["paused"] == false, c.unpauses) << c.name;
      if (c.unpauses) {
        EXPECT_TRUE(p["metadata"]["annotations"][api::kHeldCandidateAnnotation].is_null())
            << c.name << ": the hold annotation goes with the pause";
      }
    }
  }
}

TEST(DecideRolloutTest, AnAmbiguousHoldIsLeftAlone) {
  // Two policies match: which one's verdict counts cannot be told, so the
  // hold stays until the overlap is resolved.
  RolloutInput in{Deployment({{api::kHeldCandidateAnnotation, "hash1"}}, true), std::nullopt,
                  std::nullopt, "hash1"};
  in.policy_ambiguous = true;
  RolloutActions a = DecideRollout(in);
  EXPECT_FALSE(a.deployment_patch.has_value());
  EXPECT_EQ(a.event_reason, "");
}

TEST(DecideRolloutTest, ReleasedOrphanHoldSaysWhyAndThatNothingWasProven) {
  RolloutInput in{Deployment({{api::kHeldCandidateAnnotation, "hash1"}}, true),
                  Policy(api::RolloutMode::kOff), std::nullopt, "hash1"};
  RolloutActions a = DecideRollout(in);
  EXPECT_NE(a.event_note.find("rollout mode Off"), std::string::npos) << a.event_note;
  EXPECT_NE(a.event_note.find("not proven"), std::string::npos) << a.event_note;
  const json& annotations = (*a.deployment_patch)["metadata"]["annotations"];
  EXPECT_TRUE(annotations[api::kHeldCandidateAnnotation].is_null());
}

TEST(DecideRolloutTest, AnOverrideIsConsumedOnce) {
  RolloutInput in{Deployment({{api::kHeldCandidateAnnotation, "hash1"},
                              {api::kOverrideHoldAnnotation, "hotfix for INC-42"}},
                             false),
                  Policy(api::RolloutMode::kEnforce), Canary("Completed", "Ratchet"), "hash1"};
  RolloutActions a = DecideRollout(in);
  ASSERT_TRUE(a.deployment_patch.has_value());
  const json& annotations = (*a.deployment_patch)["metadata"]["annotations"];
  EXPECT_TRUE(annotations[api::kOverrideHoldAnnotation].is_null())
      << "a leftover override would let the next hold be lifted without a new reason";
  EXPECT_TRUE(annotations[api::kHeldCandidateAnnotation].is_null());
  EXPECT_EQ(annotations[api::kOverriddenCandidateAnnotation], "hash1 hotfix for INC-42")
      << "the record of the override stays";
  EXPECT_FALSE(a.deployment_patch->contains("spec")) << "the user already unpaused it";
  EXPECT_NE(a.event_note.find("hotfix for INC-42"), std::string::npos) << a.event_note;
}

TEST(DecideRolloutTest, HeldWarningNamesTheFlatVariantAndTheOverride) {
  RolloutInput in{Deployment({{api::kHeldCandidateAnnotation, "hash1"}}, true),
                  Policy(api::RolloutMode::kEnforce),
                  Canary("Completed", "AllocatorRetention", "jemalloc"), "hash1"};
  RolloutActions a = DecideRollout(in);
  EXPECT_NE(a.event_note.find("variant jemalloc stayed flat"), std::string::npos) << a.event_note;
  EXPECT_NE(a.event_note.find(api::kOverrideHoldAnnotation), std::string::npos) << a.event_note;
  EXPECT_NE(a.event_note.find("+2.40 GiB/h"), std::string::npos) << a.event_note;
}

TEST(BuildReplayCanaryTest, SnapshotsTemplateAndPolicy) {
  api::AllocatorPolicy p = Policy(api::RolloutMode::kEnforce);
  p.spec.canary.duration = std::chrono::seconds(600);
  json c = BuildReplayCanary(Deployment(), p, "0123456789abcdef");
  EXPECT_EQ(c["kind"], "ReplayCanary");
  EXPECT_EQ(c["metadata"]["name"], "web-0123456789-" + CanaryPolicyKey(p).substr(0, 6));
  EXPECT_EQ(c["metadata"]["namespace"], "shop");
  EXPECT_EQ(c["metadata"]["labels"][kPolicyLabel], "web-policy");
  EXPECT_EQ(c["metadata"]["ownerReferences"][0]["uid"], "u-1");
  EXPECT_EQ(c["spec"]["templateHash"], "0123456789abcdef");
  EXPECT_EQ(c["spec"]["target"]["name"], "web");
  EXPECT_EQ(c["spec"]["template"]["spec"]["containers"][0]["image"], "web:2");
  EXPECT_EQ(c["spec"]["candidate"]["allocator"]["name"], "jemalloc");
}

TEST(CanaryNameTest, StableAndBounded) {
  EXPECT_EQ(CanaryName("web", "0123456789abcdef", "fedcba9876543210"), "web-0123456789-fedcba");
  EXPECT_LE(CanaryName(std::string(253, 'a'), "0123456789abcdef", "fedcba9876543210").size(), 253u);
}

TEST(CanaryPolicyKeyTest, ChangesWithWhatTheCanaryProvesOnly) {
  api::AllocatorPolicy glibc = Policy(api::RolloutMode::kEnforce);
  glibc.spec.allocator.name = api::Allocator::kGlibc;
  EXPECT_EQ(CanaryPolicyKey(glibc), CanaryPolicyKey(glibc));
  EXPECT_EQ(CanaryPolicyKey(glibc).size(), 16u);

  api::AllocatorPolicy mimalloc = glibc;
  mimalloc.spec.allocator.name = api::Allocator::kMimalloc;
  EXPECT_NE(CanaryPolicyKey(mimalloc), CanaryPolicyKey(glibc)) << "a switched allocator";

  api::AllocatorPolicy longer = glibc;
  longer.spec.canary.duration = std::chrono::seconds(1800);
  EXPECT_NE(CanaryPolicyKey(longer), CanaryPolicyKey(glibc)) << "a longer canary";

  api::AllocatorPolicy guarded = glibc;
  guarded.spec.guard.enabled = true;
  guarded.spec.selector.match_labels["tier"] = "web";
  guarded.generation = glibc.generation + 1;
  EXPECT_EQ(CanaryPolicyKey(guarded), CanaryPolicyKey(glibc))
      << "the guard and the selector do not change what a canary proves";
}

TEST(DecideRolloutTest, APolicySwitchOfAHeldTemplateStartsANewCanary) {
  // The glibc canary of the held template found a ratchet; the user switches
  // the policy to jemalloc. The old canary is keyed by the old policy, so the
  // reconciler looks up (template, new key), finds nothing and starts one.
  api::AllocatorPolicy glibc = Policy(api::RolloutMode::kEnforce);
  glibc.spec.allocator.name = api::Allocator::kGlibc;
  const api::AllocatorPolicy jemalloc = Policy(api::RolloutMode::kEnforce);
  RolloutInput in{Deployment({{api::kHeldCandidateAnnotation, "hash1"}}, true), jemalloc,
                  std::nullopt, "hash1"};
  RolloutActions a = DecideRollout(in);
  ASSERT_TRUE(a.create_canary.has_value());
  EXPECT_EQ((*a.create_canary)["spec"]["candidate"]["allocator"]["name"], "jemalloc");
  EXPECT_EQ((*a.create_canary)["metadata"]["name"],
            CanaryName("web", "hash1", CanaryPolicyKey(jemalloc)));
  EXPECT_NE((*a.create_canary)["metadata"]["name"],
            CanaryName("web", "hash1", CanaryPolicyKey(glibc)));
}

}  // namespace
}  // namespace allocguard::controllers
