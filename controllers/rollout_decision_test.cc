#include "controllers/rollout_decision.h"

#include <gtest/gtest.h>

#include <functional>

#include "controllers/canary_decision.h"
#include "controllers/canary_fixture_for_test.h"
#include "operator/admission/deployment_gate.h"
#include "operator/api/canary_status.h"
#include "operator/api/names.h"
#include "operator/api/policy.h"

namespace allocguard::controllers {
namespace {

using nlohmann::json;

api::AllocatorPolicy Policy(api::RolloutMode mode) {
  api::AllocatorPolicy p;
  p.spec.canary.load.requests = {api::LoadRequestSpec{.name = "get", .path = "/"}};
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

// The key of Deployment()'s template, as the webhook records it.
std::string Hash() { return admission::TemplateHash(Deployment()["spec"]["template"]); }

// The canary the operator creates for Deployment()'s template under
// Policy(), with a status as the canary reconciler writes it: the candidate
// measured on this very spec.
json Canary(const std::string& phase, const std::string& verdict,
            const std::string& flat_variant = "") {
  return testing::TrustedCanary(Deployment(), Policy(api::RolloutMode::kEnforce), Hash(), phase,
                                verdict, flat_variant);
}

// The input as the rollout reconciler parses it from its caches.
RolloutInput In(const json& deployment, std::optional<api::AllocatorPolicy> policy,
                const std::optional<json>& canary, const std::string& template_hash) {
  RolloutInput in;
  in.deployment = api::ParseDeploymentSummary(deployment);
  in.policy = std::move(policy);
  if (canary.has_value()) in.canary = api::ParseReplayCanarySummary(*canary);
  in.template_hash = template_hash;
  in.measured = MeasuredTemplateOf(WorkloadKind::kDeployment, deployment);
  return in;
}

// Another Deployment of the shop, `name` with uid `uid`: the same template
// as Deployment()'s but for its own labels (app=web, instance=<name>), which
// no canary measures.
json Sibling(const std::string& name, const std::string& uid, json annotations = json::object(),
             bool paused = false) {
  json d = Deployment(std::move(annotations), paused);
  d["metadata"]["name"] = name;
  d["metadata"]["uid"] = uid;
  d["spec"]["template"]["metadata"]["labels"]["instance"] = name;
  return d;
}

// The canary `canary` after the operator recorded `owner` as an owner (the
// merge patch of rule 7a applied).
json Joined(json canary, const RolloutActions& join) {
  canary.merge_patch(*join.join_canary);
  return canary;
}

TEST(DecideRolloutTest, Table) {
  const json held = {{api::kHeldCandidateAnnotation, Hash()}};
  const json released = {{api::kReleasedCandidateAnnotation, Hash()}};
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
      {"held, then opted out: still held (an opt-out is no override)",
       Policy(api::RolloutMode::kEnforce),
       Deployment({{api::kInjectAnnotation, "false"}, {api::kHeldCandidateAnnotation, Hash()}},
                  true),
       std::nullopt, false, false, false, true, "RolloutHeld"},
      {"held, overridden and unpaused by the user: the hold is cleared",
       Policy(api::RolloutMode::kEnforce),
       Deployment({{api::kHeldCandidateAnnotation, Hash()},
                   {api::kOverrideHoldAnnotation, "hotfix for INC-42"}},
                  false),
       Canary("Completed", "Ratchet"), false, true, false, false, "HoldCleared"},
      {"held, override annotated but still paused: still held", Policy(api::RolloutMode::kEnforce),
       Deployment({{api::kHeldCandidateAnnotation, Hash()},
                   {api::kOverrideHoldAnnotation, "hotfix for INC-42"}},
                  true),
       Canary("Completed", "Ratchet"), false, false, false, true, "RolloutHeld"},
  };
  for (const Case& c : cases) {
    RolloutInput in = In(c.deployment, c.policy, c.canary, Hash());
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
        EXPECT_EQ(p["metadata"]["annotations"][api::kReleasedCandidateAnnotation], Hash())
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

// The gate-integrity cases: a Flat canary with the expected name releases
// the hold only when it proves the held template itself (CanaryDistrust).
TEST(DecideRolloutTest, AFlatCanaryReleasesOnlyWhenItProvesTheHeldTemplate) {
  struct Case {
    const char* name;
    std::function<void(json&)> tamper;
    const char* why;  // in the event's note
  };
  const std::vector<Case> cases = {
      {"pre-created with another template, templateHash copied",
       [](json& c) { c["spec"]["template"]["spec"]["containers"][0]["image"] = "web:flat"; },
       "its spec.template is not template"},
      {"a StatefulSet's canary", [](json& c) { c["spec"]["target"]["kind"] = "StatefulSet"; },
       "targets a StatefulSet"},
      {"another template under the measured key",
       [](json& c) { c["spec"]["templateHash"] = "0123456789abcdef"; }, "its spec.templateHash is"},
      {"a longer canary than the policy asks for",
       [](json& c) { c["spec"]["canary"]["duration"] = "20m"; }, "not those policy"},
      {"another allocator than the policy's",
       [](json& c) { c["spec"]["candidate"]["allocator"]["name"] = "mimalloc"; },
       "not those policy"},
      {"measured on a spec that was edited since",
       [](json& c) { c["status"]["variants"][0]["measurementKey"] = "0123456789abcdef"; },
       "measured on another spec"},
      {"a first run's measurement passed off as a rerun's",
       [](json& c) {
         c["status"]["variants"][0]["earlierRuns"] = {{{"verdict", "Inconclusive"}, {"seed", 1}}};
       },
       "measured on another spec"},
      {"no measurement of the candidate", [](json& c) { c["status"].erase("variants"); },
       "no measurement of the candidate"},
      {"a template of the wrong types",
       [](json& c) { c["spec"]["template"]["spec"]["containers"][0]["name"] = 5; },
       "does not parse"},
  };
  const json held = {{api::kHeldCandidateAnnotation, Hash()}};
  for (const Case& c : cases) {
    json canary = Canary("Completed", "Flat");
    c.tamper(canary);
    RolloutInput in =
        In(Deployment(held, true), Policy(api::RolloutMode::kEnforce), canary, Hash());
    RolloutActions a = DecideRollout(in);
    EXPECT_FALSE(a.deployment_patch.has_value()) << c.name << ": released by an untrusted canary";
    EXPECT_EQ(a.event_reason, "RolloutHeld") << c.name;
    EXPECT_TRUE(a.event_warning) << c.name;
    EXPECT_NE(a.event_note.find(c.why), std::string::npos) << c.name << ": " << a.event_note;
    // Audit records nothing from it either.
    in = In(Deployment(), Policy(api::RolloutMode::kAudit), canary, Hash());
    a = DecideRollout(in);
    EXPECT_FALSE(a.deployment_patch.has_value()) << c.name << " (audit)";
    EXPECT_EQ(a.event_reason, "CanaryNotTrusted") << c.name;
  }
  // The untouched canary does release: the checks above are what differs.
  RolloutInput in = In(Deployment(held, true), Policy(api::RolloutMode::kEnforce),
                       Canary("Completed", "Flat"), Hash());
  EXPECT_EQ(DecideRollout(in).event_reason, "RolloutReleased");
}

// Two Deployments whose templates differ only in their labels: one canary,
// started for whichever asked first, and its verdict reaches both, each
// with an event that names the canary.
TEST(DecideRolloutTest, TwoDeploymentsWithOneTemplateShareOneCanaryAndItsVerdict) {
  for (api::RolloutMode mode : {api::RolloutMode::kAudit, api::RolloutMode::kEnforce}) {
    const bool enforce = mode == api::RolloutMode::kEnforce;
    const json web = Deployment(
        enforce ? json{{api::kHeldCandidateAnnotation, Hash()}} : json::object(), enforce);
    json sibling = Sibling("web-b", "u-2", json::object(), enforce);
    const std::string sibling_hash = admission::TemplateHash(sibling["spec"]["template"]);
    ASSERT_NE(sibling_hash, Hash()) << "the labels differ, so the templates' own hashes do";
    if (enforce) sibling["metadata"]["annotations"][api::kHeldCandidateAnnotation] = sibling_hash;

    const RolloutActions first = DecideRollout(In(web, Policy(mode), std::nullopt, Hash()));
    const RolloutActions second =
        DecideRollout(In(sibling, Policy(mode), std::nullopt, sibling_hash));
    ASSERT_TRUE(first.create_canary.has_value());
    ASSERT_TRUE(second.create_canary.has_value());
    const std::string name = (*first.create_canary)["metadata"]["name"];
    EXPECT_EQ((*second.create_canary)["metadata"]["name"], name)
        << "whichever asks first, both look for one canary";

    // The canary exists (web's): the sibling joins it while it runs, or
    // once it finished.
    EXPECT_TRUE(DecideRollout(In(sibling, Policy(mode), Canary("Running", ""), sibling_hash))
                    .join_canary.has_value());
    const json canary = Canary("Completed", "Flat");
    ASSERT_EQ(canary["metadata"]["name"], name);
    const RolloutActions join = DecideRollout(In(sibling, Policy(mode), canary, sibling_hash));
    ASSERT_TRUE(join.join_canary.has_value()) << join.event_reason << ": " << join.event_note;
    EXPECT_FALSE(join.create_canary.has_value());
    EXPECT_EQ(join.event_reason, "CanaryShared");
    EXPECT_NE(join.event_note.find(name), std::string::npos) << join.event_note;
    const json joined = Joined(canary, join);
    ASSERT_EQ(joined["metadata"]["ownerReferences"].size(), 2u);
    EXPECT_EQ(joined["metadata"]["ownerReferences"][0]["uid"], "u-1") << "web stays an owner";
    EXPECT_EQ(joined["metadata"]["ownerReferences"][1]["uid"], "u-2");
    EXPECT_FALSE(
        DecideRollout(In(sibling, Policy(mode), joined, sibling_hash)).join_canary.has_value())
        << "joined once";

    // The verdict reaches both, each recorded under its own template hash.
    const std::string released = enforce ? "RolloutReleased" : "CanaryPassed";
    for (const auto& [workload, hash] :
         {std::pair{web, Hash()}, std::pair{json(sibling), sibling_hash}}) {
      const RolloutActions a = DecideRollout(In(workload, Policy(mode), joined, hash));
      EXPECT_EQ(a.event_reason, released) << workload["metadata"]["name"] << ": " << a.event_note;
      EXPECT_NE(a.event_note.find(name), std::string::npos) << a.event_note;
      ASSERT_TRUE(a.deployment_patch.has_value());
      EXPECT_EQ((*a.deployment_patch)["metadata"]["annotations"][api::kReleasedCandidateAnnotation],
                hash);
      if (enforce) {
        EXPECT_EQ((*a.deployment_patch)["spec"]["paused"], false);
      }
    }
  }
}

TEST(DecideRolloutTest, AnotherTemplateGetsACanaryOfItsOwn) {
  json other = Sibling("api", "u-2");
  other["spec"]["template"]["spec"]["containers"][0]["image"] = "api:1";
  const std::string other_hash = admission::TemplateHash(other["spec"]["template"]);
  const api::AllocatorPolicy audit = Policy(api::RolloutMode::kAudit);
  const RolloutActions web = DecideRollout(In(Deployment(), audit, std::nullopt, Hash()));
  const RolloutActions api = DecideRollout(In(other, audit, std::nullopt, other_hash));
  ASSERT_TRUE(web.create_canary.has_value());
  ASSERT_TRUE(api.create_canary.has_value());
  EXPECT_NE((*web.create_canary)["metadata"]["name"], (*api.create_canary)["metadata"]["name"]);
}

// A ReplayCanary someone created under the shared name with another template
// (a flat image), owned by nothing or naming the waiting Deployment as its
// owner: it is neither joined nor trusted, whatever its verdict.
TEST(DecideRolloutTest, AHostilePreCreatedCanaryWithTheSharedNameIsNotTrusted) {
  const json held_sibling = [] {
    json d = Sibling("web-b", "u-2", json::object(), true);
    d["metadata"]["annotations"][api::kHeldCandidateAnnotation] =
        admission::TemplateHash(d["spec"]["template"]);
    return d;
  }();
  const std::string hash = admission::TemplateHash(held_sibling["spec"]["template"]);
  for (bool forged_owner : {false, true}) {
    json hostile = Canary("Completed", "Flat");
    hostile["spec"]["template"]["spec"]["containers"][0]["image"] = "web:flat";
    hostile["metadata"]["ownerReferences"] = json::array();
    if (forged_owner) {
      hostile["metadata"]["ownerReferences"].push_back(
          {{"apiVersion", "apps/v1"}, {"kind", "Deployment"}, {"name", "web-b"}, {"uid", "u-2"}});
    }
    RolloutActions a =
        DecideRollout(In(held_sibling, Policy(api::RolloutMode::kEnforce), hostile, hash));
    EXPECT_FALSE(a.join_canary.has_value()) << forged_owner;
    EXPECT_FALSE(a.deployment_patch.has_value()) << forged_owner << ": released by it";
    EXPECT_EQ(a.event_reason, "RolloutHeld") << forged_owner;
    EXPECT_NE(a.event_note.find("is not template"), std::string::npos) << a.event_note;
    a = DecideRollout(In(Sibling("web-b", "u-2"), Policy(api::RolloutMode::kAudit), hostile, hash));
    EXPECT_FALSE(a.join_canary.has_value()) << forged_owner << " (audit)";
    EXPECT_FALSE(a.deployment_patch.has_value()) << forged_owner << " (audit): recorded";
    EXPECT_EQ(a.event_reason, "CanaryNotTrusted") << forged_owner;
  }
}

// A canary shared by many records at most kMaxCanaryOwners of them; the
// others still get its verdict.
TEST(DecideRolloutTest, ACanaryRecordsABoundedNumberOfOwners) {
  json canary = Canary("Completed", "Flat");
  json& owners = canary["metadata"]["ownerReferences"];
  while (owners.size() < kMaxCanaryOwners) {
    const std::string n = std::to_string(owners.size());
    owners.push_back(
        {{"apiVersion", "apps/v1"}, {"kind", "Deployment"}, {"name", "w" + n}, {"uid", "u" + n}});
  }
  const json sibling = Sibling("web-b", "u-b");
  const std::string hash = admission::TemplateHash(sibling["spec"]["template"]);
  const RolloutActions a =
      DecideRollout(In(sibling, Policy(api::RolloutMode::kAudit), canary, hash));
  EXPECT_FALSE(a.join_canary.has_value());
  EXPECT_EQ(a.event_reason, "CanaryPassed") << a.event_note;
}

// One workload's template moves on: it gets a canary of its new template; the
// shared canary, and the verdict it gives the others, stay as they were.
TEST(DecideRolloutTest, OneWorkloadMovingOnLeavesTheOthersTheirVerdict) {
  const api::AllocatorPolicy audit = Policy(api::RolloutMode::kAudit);
  const json sibling = Sibling("web-b", "u-2");
  const std::string sibling_hash = admission::TemplateHash(sibling["spec"]["template"]);
  json canary = Canary("Completed", "Flat");
  canary = Joined(canary, DecideRollout(In(sibling, audit, canary, sibling_hash)));

  json moved = Deployment({{api::kReleasedCandidateAnnotation, Hash()}});
  moved["spec"]["template"]["spec"]["containers"][0]["image"] = "web:3";
  const std::string moved_hash = admission::TemplateHash(moved["spec"]["template"]);
  const RolloutActions a = DecideRollout(In(moved, audit, std::nullopt, moved_hash));
  ASSERT_TRUE(a.create_canary.has_value());
  EXPECT_NE((*a.create_canary)["metadata"]["name"], canary["metadata"]["name"]);
  EXPECT_EQ(DecideRollout(In(sibling, audit, canary, sibling_hash)).event_reason, "CanaryPassed");
}

// A candidate measured on its rerun (after an Inconclusive first run) proves
// the template: its key is that of the rerun's seed.
TEST(DecideRolloutTest, AFlatRerunReleases) {
  json canary = Canary("Completed", "Flat");
  auto parsed = api::ParseReplayCanary(canary);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  json& candidate = canary["status"]["variants"][0];
  candidate["earlierRuns"] = {{{"verdict", "Inconclusive"}, {"seed", 1}}};
  candidate["seed"] = 2;
  candidate["measurementKey"] = MeasurementKey(*parsed, "candidate", {}, 1);
  const json held = {{api::kHeldCandidateAnnotation, Hash()}};
  RolloutInput in = In(Deployment(held, true), Policy(api::RolloutMode::kEnforce), canary, Hash());
  RolloutActions a = DecideRollout(in);
  EXPECT_EQ(a.event_reason, "RolloutReleased") << a.event_note;
  EXPECT_TRUE(a.deployment_patch.has_value());
}

TEST(DecideRolloutTest, AnAmbiguousHoldIsLeftAlone) {
  // Two policies match: which one's verdict counts cannot be told, so the
  // hold stays until the overlap is resolved.
  RolloutInput in = In(Deployment({{api::kHeldCandidateAnnotation, Hash()}}, true), std::nullopt,
                       std::nullopt, Hash());
  in.policy_ambiguous = true;
  RolloutActions a = DecideRollout(in);
  EXPECT_FALSE(a.deployment_patch.has_value());
  EXPECT_EQ(a.event_reason, "");
}

TEST(DecideRolloutTest, ReleasedOrphanHoldSaysWhyAndThatNothingWasProven) {
  RolloutInput in = In(Deployment({{api::kHeldCandidateAnnotation, Hash()}}, true),
                       Policy(api::RolloutMode::kOff), std::nullopt, Hash());
  RolloutActions a = DecideRollout(in);
  EXPECT_NE(a.event_note.find("rollout mode Off"), std::string::npos) << a.event_note;
  EXPECT_NE(a.event_note.find("not proven"), std::string::npos) << a.event_note;
  const json& annotations = (*a.deployment_patch)["metadata"]["annotations"];
  EXPECT_TRUE(annotations[api::kHeldCandidateAnnotation].is_null());
}

TEST(DecideRolloutTest, AnOverrideIsConsumedOnce) {
  RolloutInput in = In(Deployment({{api::kHeldCandidateAnnotation, Hash()},
                                   {api::kOverrideHoldAnnotation, "hotfix for INC-42"}},
                                  false),
                       Policy(api::RolloutMode::kEnforce), Canary("Completed", "Ratchet"), Hash());
  RolloutActions a = DecideRollout(in);
  ASSERT_TRUE(a.deployment_patch.has_value());
  const json& annotations = (*a.deployment_patch)["metadata"]["annotations"];
  EXPECT_TRUE(annotations[api::kOverrideHoldAnnotation].is_null())
      << "a leftover override would let the next hold be lifted without a new reason";
  EXPECT_TRUE(annotations[api::kHeldCandidateAnnotation].is_null());
  EXPECT_EQ(annotations[api::kOverriddenCandidateAnnotation], Hash() + " hotfix for INC-42")
      << "the record of the override stays";
  EXPECT_FALSE(a.deployment_patch->contains("spec")) << "the user already unpaused it";
  EXPECT_NE(a.event_note.find("hotfix for INC-42"), std::string::npos) << a.event_note;
}

// An override asked for (the annotation set) but not acted on (still
// paused) when the canary comes back Flat: the release removes it, or it
// would let the next hold be lifted by an unpause alone, which the
// validating webhook asks no permission for.
TEST(DecideRolloutTest, AFlatReleaseRemovesAnOverrideNotActedOn) {
  RolloutInput in = In(Deployment({{api::kHeldCandidateAnnotation, Hash()},
                                   {api::kOverrideHoldAnnotation, "hotfix for INC-42"}},
                                  true),
                       Policy(api::RolloutMode::kEnforce), Canary("Completed", "Flat"), Hash());
  RolloutActions a = DecideRollout(in);
  EXPECT_EQ(a.event_reason, "RolloutReleased");
  ASSERT_TRUE(a.deployment_patch.has_value());
  const json& annotations = (*a.deployment_patch)["metadata"]["annotations"];
  ASSERT_TRUE(annotations.contains(api::kOverrideHoldAnnotation)) << annotations;
  EXPECT_TRUE(annotations[api::kOverrideHoldAnnotation].is_null()) << annotations;
  EXPECT_FALSE(annotations.contains(api::kOverriddenCandidateAnnotation))
      << "nothing was overridden: the canary proved it";
  EXPECT_EQ((*a.deployment_patch)["spec"]["paused"], false);
}

// A held StatefulSet with the override annotation: rule 2 consumes it only
// once the user has lifted the pin. With the pin read in place, the hold
// goes on as without the annotation: a Flat canary releases it.
TEST(DecideRolloutTest, APinnedOverrideNotActedOnLetsTheHoldGoOn) {
  json set = Deployment({{api::kHeldCandidateAnnotation, Hash()},
                         {api::kOverrideHoldAnnotation, "hotfix for INC-42"}});
  set["kind"] = "StatefulSet";
  RolloutInput in = In(set, Policy(api::RolloutMode::kEnforce), std::nullopt, Hash());
  in.kind = WorkloadKind::kStatefulSet;
  in.measured = MeasuredTemplateOf(WorkloadKind::kStatefulSet, set);
  EXPECT_TRUE(DecideRollout(in).consume_pinned_override)
      << "from the cache, which keeps no update strategy, the pin is unknown";

  in.pin_in_place = true;
  RolloutActions started = DecideRollout(in);
  EXPECT_FALSE(started.consume_pinned_override);
  EXPECT_TRUE(started.create_canary.has_value()) << "the held template is canaried";
}

TEST(DecideRolloutTest, HeldWarningNamesTheFlatVariantAndTheOverride) {
  RolloutInput in = In(Deployment({{api::kHeldCandidateAnnotation, Hash()}}, true),
                       Policy(api::RolloutMode::kEnforce),
                       Canary("Completed", "AllocatorRetention", "jemalloc"), Hash());
  RolloutActions a = DecideRollout(in);
  EXPECT_NE(a.event_note.find("variant jemalloc stayed flat"), std::string::npos) << a.event_note;
  EXPECT_NE(a.event_note.find(api::kOverrideHoldAnnotation), std::string::npos) << a.event_note;
  EXPECT_NE(a.event_note.find("+2.40 GiB/h"), std::string::npos) << a.event_note;
}

TEST(BuildReplayCanaryTest, SnapshotsTemplateAndPolicy) {
  api::AllocatorPolicy p = Policy(api::RolloutMode::kEnforce);
  p.spec.canary.duration = std::chrono::seconds(600);
  const MeasuredTemplate measured = MeasuredTemplateOf(WorkloadKind::kDeployment, Deployment());
  json c = BuildReplayCanary(api::ParseDeploymentSummary(Deployment()), p, measured);
  EXPECT_EQ(c["kind"], "ReplayCanary");
  EXPECT_EQ(c["metadata"]["name"], CanaryName(CanaryKey(measured, p)));
  EXPECT_EQ(c["metadata"]["namespace"], "shop");
  EXPECT_EQ(c["metadata"]["labels"][kPolicyLabel], "web-policy");
  EXPECT_EQ(c["metadata"]["ownerReferences"][0]["uid"], "u-1");
  EXPECT_EQ(c["spec"]["templateHash"], api::MeasuredTemplateHash(Deployment()["spec"]["template"]));
  EXPECT_EQ(c["spec"]["target"]["name"], "web");
  EXPECT_EQ(c["spec"]["template"]["spec"]["containers"][0]["image"], "web:2");
  EXPECT_EQ(c["spec"]["candidate"]["allocator"]["name"], "jemalloc");
}

TEST(CanaryNameTest, StableDnsLabelFromTheKeyAlone) {
  const std::string key = api::Sha256Hex("anything");
  EXPECT_EQ(CanaryName(key), "replay-" + key.substr(0, 32));
  EXPECT_EQ(CanaryName(key), CanaryName(key));
  EXPECT_LE(CanaryName(key).size(), 63u);
  for (char c : CanaryName(key)) {
    EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-') << CanaryName(key);
  }
}

// What is measured keys the canary; who asked does not.
TEST(CanaryKeyTest, ChangesWithWhatIsMeasuredOnly) {
  const api::AllocatorPolicy policy = Policy(api::RolloutMode::kAudit);
  const std::string policy_key = CanaryPolicyKey(policy);
  auto key_of = [&](WorkloadKind kind, const json& workload) {
    return CanaryKey(MeasuredTemplateOf(kind, workload), policy_key);
  };
  const std::string web = key_of(WorkloadKind::kDeployment, Deployment());
  EXPECT_EQ(key_of(WorkloadKind::kDeployment, Sibling("web-b", "u-2")), web)
      << "another name, uid and labels measure alike";
  json restarted = Sibling("web-c", "u-3");
  restarted["spec"]["template"]["metadata"]["annotations"] = {
      {"kubectl.kubernetes.io/restartedAt", "2026-12-05T10:00:00Z"}};
  EXPECT_EQ(key_of(WorkloadKind::kDeployment, restarted), web);

  json image = Deployment();
  image["spec"]["template"]["spec"]["containers"][0]["image"] = "web:3";
  EXPECT_NE(key_of(WorkloadKind::kDeployment, image), web) << "another image";
  json libc = Deployment();
  libc["spec"]["template"]["metadata"]["annotations"] = {{api::kLibcAnnotation, "musl"}};
  EXPECT_NE(key_of(WorkloadKind::kDeployment, libc), web) << "allocguard's annotations count";
  EXPECT_NE(key_of(WorkloadKind::kDaemonSet, Deployment()), web) << "another kind";
  EXPECT_EQ(CanaryKey(MeasuredTemplateOf(WorkloadKind::kDeployment, Deployment()),
                      Policy(api::RolloutMode::kEnforce)),
            web)
      << "the rollout mode changes nothing that is measured";
  api::AllocatorPolicy mimalloc = policy;
  mimalloc.spec.allocator.name = api::Allocator::kMimalloc;
  EXPECT_NE(CanaryKey(MeasuredTemplateOf(WorkloadKind::kDeployment, Deployment()), mimalloc), web)
      << "another allocator";
  api::AllocatorPolicy app_only = policy;
  app_only.spec.containers = {"app"};
  EXPECT_NE(CanaryKey(MeasuredTemplateOf(WorkloadKind::kDeployment, Deployment()), app_only), web)
      << "the containers the policy measures";
  MeasuredTemplate claims = MeasuredTemplateOf(WorkloadKind::kStatefulSet, Deployment());
  const std::string no_claims = CanaryKey(claims, policy_key);
  claims.claims.push_back({"data", int64_t{1} << 30});
  EXPECT_NE(CanaryKey(claims, policy_key), no_claims) << "a StatefulSet's claims";
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
  RolloutInput in = In(Deployment({{api::kHeldCandidateAnnotation, Hash()}}, true), jemalloc,
                       std::nullopt, Hash());
  RolloutActions a = DecideRollout(in);
  ASSERT_TRUE(a.create_canary.has_value());
  EXPECT_EQ((*a.create_canary)["spec"]["candidate"]["allocator"]["name"], "jemalloc");
  EXPECT_EQ((*a.create_canary)["metadata"]["name"], CanaryName(CanaryKey(in.measured, jemalloc)));
  EXPECT_NE((*a.create_canary)["metadata"]["name"], CanaryName(CanaryKey(in.measured, glibc)));
}

// A canary status another writer gave fields of other types: the rollout
// reconciler neither throws (it runs on a worker thread) nor releases.
TEST(DecideRolloutTest, ACanaryStatusOfOtherTypesNeitherThrowsNorReleases) {
  const json held = {{api::kHeldCandidateAnnotation, Hash()}};
  for (const json& status :
       {json{{"phase", 5}, {"verdict", "Flat"}}, json{{"phase", {{"a", 1}}}, {"verdict", {1}}},
        json{{"phase", "Completed"}, {"verdict", 7}}, json("Completed")}) {
    json canary = Canary("Completed", "Flat");
    canary["status"] = status;
    RolloutInput in =
        In(Deployment(held, true), Policy(api::RolloutMode::kEnforce), canary, Hash());
    RolloutActions a;
    ASSERT_NO_THROW(a = DecideRollout(in)) << status.dump();
    EXPECT_NE(a.event_reason, "RolloutReleased") << status.dump();
  }
}

TEST(RecordedPhaseTest, NamesAllocguardWritesAndNothingElse) {
  // The phase a status records, as the typed status reads it.
  auto RecordedPhase = [](const json& status) {
    return api::ParseReplayCanaryStatus(status).phase;
  };
  EXPECT_EQ(RecordedPhase(json{{"phase", "Running"}}), api::CanaryPhase::kRunning);
  EXPECT_EQ(RecordedPhase(json{{"phase", "Failed"}}), api::CanaryPhase::kFailed);
  EXPECT_EQ(RecordedPhase(json{{"phase", "running"}}), std::nullopt);
  EXPECT_EQ(RecordedPhase(json{{"phase", 3}}), std::nullopt);
  EXPECT_EQ(RecordedPhase(json::object()), std::nullopt);
  EXPECT_TRUE(Ended(api::CanaryPhase::kCompleted));
  EXPECT_TRUE(Ended(api::CanaryPhase::kFailed));
  EXPECT_FALSE(Ended(api::CanaryPhase::kRunning));
  EXPECT_FALSE(Ended(std::nullopt));
}

}  // namespace
}  // namespace allocguard::controllers
