#include "operator/admission/validation.h"

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "operator/api/deployment.h"
#include "operator/api/names.h"

namespace allocguard::admission {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

json Deployment(bool paused, const char* held, const char* override_reason = nullptr) {
  json d = json::parse(R"({"metadata": {"name": "web", "annotations": {}},
                           "spec": {"replicas": 2}})");
  if (paused) d["spec"]["paused"] = true;
  if (held != nullptr) d["metadata"]["annotations"][api::kHeldCandidateAnnotation] = held;
  if (override_reason != nullptr) {
    d["metadata"]["annotations"][api::kOverrideHoldAnnotation] = override_reason;
  }
  return d;
}

struct UnpauseCase {
  std::string label;
  json old_deployment;
  json new_deployment;
  Requester requester;
  bool allowed;
  std::string message_part;  // in the refusal
  std::string event_part;    // in event_reason; empty: no event
  // In needs_override (the update lifts the hold: only for requesters with
  // the override permission); empty: it needs none.
  std::string needs_part;
};

void PrintTo(const UnpauseCase& c, std::ostream* os) { *os << c.label; }

class ValidateDeploymentUpdateTest : public ::testing::TestWithParam<UnpauseCase> {};

TEST_P(ValidateDeploymentUpdateTest, Decides) {
  const UnpauseCase& c = GetParam();
  ValidationDecision decision =
      ValidateDeploymentUpdate(c.old_deployment, c.new_deployment, c.requester);
  EXPECT_EQ(decision.allowed, c.allowed) << decision.message;
  if (c.allowed) {
    EXPECT_THAT(decision.message, IsEmpty());
  } else {
    EXPECT_THAT(decision.message, HasSubstr(c.message_part));
    EXPECT_THAT(decision.message, HasSubstr(api::kOverrideHoldAnnotation));
  }
  if (c.event_part.empty()) {
    EXPECT_THAT(decision.event_reason, IsEmpty());
  } else {
    EXPECT_THAT(decision.event_reason, HasSubstr(c.event_part));
  }
  if (c.needs_part.empty()) {
    EXPECT_THAT(decision.needs_override, IsEmpty());
  } else {
    EXPECT_THAT(decision.needs_override, HasSubstr(c.needs_part));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ValidateDeploymentUpdateTest,
    ::testing::Values(
        UnpauseCase{"manual_unpause_refused", Deployment(true, "abc"), Deployment(false, "abc"),
                    Requester::kOther, false, "spec.paused", ""},
        UnpauseCase{"manual_unpause_refused_unknown_requester", Deployment(true, "abc"),
                    Deployment(false, "abc"), Requester::kUnknown, false, "abc", ""},
        UnpauseCase{"paused_field_removed_refused", Deployment(true, "abc"),
                    [] {
                      json d = Deployment(false, "abc");
                      d["spec"].erase("paused");
                      return d;
                    }(),
                    Requester::kOther, false, "spec.paused", ""},
        UnpauseCase{"override_needs_the_permission_and_is_recorded", Deployment(true, "abc"),
                    Deployment(false, "abc", "incident 42: need the fix now"), Requester::kOther,
                    true, "", "incident 42: need the fix now",
                    "sets allocguard.io/override-hold=\"incident 42: need the fix now\""},
        UnpauseCase{"override_annotated_while_paused_needs_the_permission", Deployment(true, "abc"),
                    Deployment(true, "abc", "INC-7"), Requester::kOther, true, "", "",
                    "override-hold=\"INC-7\""},
        UnpauseCase{"opt_out_of_a_held_deployment_needs_the_permission", Deployment(true, "abc"),
                    [] {
                      json d = Deployment(true, "abc");
                      d["metadata"]["annotations"][api::kInjectAnnotation] = "false";
                      return d;
                    }(),
                    Requester::kOther, true, "", "", "opts out with allocguard.io/inject=false"},
        UnpauseCase{"empty_override_is_no_override", Deployment(true, "abc"),
                    Deployment(false, "abc", ""), Requester::kOther, false, "spec.paused", ""},
        UnpauseCase{"operator_release", Deployment(true, "abc"), Deployment(false, nullptr),
                    Requester::kOperator, true, "", ""},
        UnpauseCase{"release_unknown_requester_needs_the_permission", Deployment(true, "abc"),
                    Deployment(false, nullptr), Requester::kUnknown, true, "", "",
                    "removes allocguard.io/held-candidate"},
        UnpauseCase{"annotation_removed_by_hand_needs_the_permission", Deployment(true, "abc"),
                    Deployment(false, nullptr), Requester::kOther, true, "", "",
                    "removes allocguard.io/held-candidate"},
        UnpauseCase{"still_held_other_edit", Deployment(true, "abc"), Deployment(true, "abc"),
                    Requester::kOther, true, "", ""},
        UnpauseCase{"new_candidate_while_held", Deployment(true, "abc"), Deployment(true, "def"),
                    Requester::kOther, true, "", ""},
        UnpauseCase{"not_held_user_pause", Deployment(true, nullptr), Deployment(false, nullptr),
                    Requester::kOther, true, "", ""},
        UnpauseCase{"annotation_without_pause_is_not_held", Deployment(false, "abc"),
                    Deployment(false, "abc"), Requester::kOther, true, "", ""}),
    [](const auto& test_case) { return test_case.param.label; });

// A Deployment with a pod template whose image is `image`.
json DeploymentWithImage(bool paused, const char* held, const std::string& image) {
  json d = Deployment(paused, held);
  d["spec"]["template"] = {{"spec", {{"containers", {{{"name", "app"}, {"image", image}}}}}}};
  return d;
}

// The mutating webhook released the hold itself: the new template has a
// Flat verdict (rule 3 of deployment_gate.h, rule 4 of workload_hold.h).
TEST(ValidateDeploymentUpdateTest, AReleaseByTheGateOnAFlatTemplateLiftsNothing) {
  const json before = DeploymentWithImage(true, "abc", "web:1");
  json after = DeploymentWithImage(false, nullptr, "web:2");
  after["metadata"]["annotations"][api::kReleasedCandidateAnnotation] =
      api::PodTemplateHash(after["spec"]["template"]);
  ValidationDecision d = ValidateDeploymentUpdate(before, after, Requester::kOther);
  EXPECT_TRUE(d.allowed);
  EXPECT_THAT(d.needs_override, IsEmpty());
  // The same update with the template unchanged is a user removing the mark.
  json same = DeploymentWithImage(false, nullptr, "web:1");
  same["metadata"]["annotations"][api::kReleasedCandidateAnnotation] =
      api::PodTemplateHash(same["spec"]["template"]);
  EXPECT_THAT(ValidateDeploymentUpdate(before, same, Requester::kOther).needs_override,
              HasSubstr("removes allocguard.io/held-candidate"));
}

// A StatefulSet held with its partition pinned (rule S1 of workload_hold.h),
// or, with `pin` empty, recorded only (OnDelete, rule S3).
json HeldStatefulSet(std::optional<int64_t> partition, const char* held = "abc",
                     const char* override_reason = nullptr) {
  json s = json::parse(R"({"metadata": {"name": "db", "annotations": {}},
                           "spec": {"replicas": 2, "updateStrategy": {"type": "RollingUpdate"},
                                    "template": {"spec": {"containers": [{"name": "db"}]}}}})");
  if (held != nullptr) s["metadata"]["annotations"][api::kHeldCandidateAnnotation] = held;
  if (override_reason != nullptr) {
    s["metadata"]["annotations"][api::kOverrideHoldAnnotation] = override_reason;
  }
  if (partition) {
    s["metadata"]["annotations"][api::kUserPartitionAnnotation] = "1";
    s["spec"]["updateStrategy"]["rollingUpdate"] = {{"partition", *partition}};
  } else {
    s["spec"]["updateStrategy"] = {{"type", "OnDelete"}};
  }
  return s;
}

json HeldDaemonSet(bool pinned, const char* held = "abc", const char* override_reason = nullptr) {
  json s = json::parse(R"({"metadata": {"name": "agent", "annotations": {}},
                           "spec": {"updateStrategy": {"type": "OnDelete"},
                                    "template": {"spec": {"containers": [{"name": "a"}]}}}})");
  if (held != nullptr) s["metadata"]["annotations"][api::kHeldCandidateAnnotation] = held;
  if (override_reason != nullptr) {
    s["metadata"]["annotations"][api::kOverrideHoldAnnotation] = override_reason;
  }
  if (pinned) {
    s["metadata"]["annotations"][api::kUserUpdateStrategyAnnotation] =
        R"({"type":"RollingUpdate"})";
  }
  return s;
}

json Unpinned(json daemonset) {
  daemonset["spec"]["updateStrategy"] = {{"type", "RollingUpdate"}};
  return daemonset;
}

struct WorkloadLiftCase {
  std::string label;
  bool statefulset;  // else a DaemonSet
  json old_object;
  json new_object;
  Requester requester;
  bool allowed;
  std::string message_part;  // in the refusal
  std::string needs_part;    // in needs_override; empty: needs none
  std::string event_part;    // in event_reason; empty: no event
};

void PrintTo(const WorkloadLiftCase& c, std::ostream* os) { *os << c.label; }

class ValidateHeldWorkloadUpdateTest : public ::testing::TestWithParam<WorkloadLiftCase> {};

TEST_P(ValidateHeldWorkloadUpdateTest, Decides) {
  const WorkloadLiftCase& c = GetParam();
  ValidationDecision d = c.statefulset
                             ? ValidateStatefulSetUpdate(c.old_object, c.new_object, c.requester)
                             : ValidateDaemonSetUpdate(c.old_object, c.new_object, c.requester);
  EXPECT_EQ(d.allowed, c.allowed) << d.message;
  if (c.allowed) {
    EXPECT_THAT(d.message, IsEmpty());
  } else {
    EXPECT_THAT(d.message, HasSubstr(c.message_part));
    EXPECT_THAT(d.message, HasSubstr(api::kOverrideHoldAnnotation));
  }
  if (c.needs_part.empty()) {
    EXPECT_THAT(d.needs_override, IsEmpty());
  } else {
    EXPECT_THAT(d.needs_override, HasSubstr(c.needs_part));
  }
  if (c.event_part.empty()) {
    EXPECT_THAT(d.event_reason, IsEmpty());
  } else {
    EXPECT_THAT(d.event_reason, HasSubstr(c.event_part));
  }
}

constexpr int64_t kPin = 2147483647;

INSTANTIATE_TEST_SUITE_P(
    Cases, ValidateHeldWorkloadUpdateTest,
    ::testing::Values(
        WorkloadLiftCase{"sts_partition_lowered_by_hand_refused", true, HeldStatefulSet(kPin),
                         HeldStatefulSet(0), Requester::kOther, false,
                         "spec.updateStrategy: this StatefulSet is held by allocguard until its "
                         "pod template abc has a Flat replay canary and its partition cannot be "
                         "lowered",
                         ""},
        WorkloadLiftCase{"sts_switched_to_on_delete_refused", true, HeldStatefulSet(kPin),
                         [] {
                           json s = HeldStatefulSet(kPin);
                           s["spec"]["updateStrategy"] = {{"type", "OnDelete"}};
                           return s;
                         }(),
                         Requester::kOther, false, "switched to OnDelete", ""},
        WorkloadLiftCase{"sts_pin_raised_from_an_earlier_version", true, HeldStatefulSet(2),
                         HeldStatefulSet(kPin), Requester::kOther, true, "", ""},
        WorkloadLiftCase{"sts_scaled_while_held", true, HeldStatefulSet(kPin),
                         [] {
                           json s = HeldStatefulSet(kPin);
                           s["spec"]["replicas"] = 5;
                           return s;
                         }(),
                         Requester::kOther, true, "", ""},
        WorkloadLiftCase{"sts_override_needs_the_permission_and_is_recorded", true,
                         HeldStatefulSet(kPin), HeldStatefulSet(0, "abc", "INC-9"),
                         Requester::kOther, true, "", "sets allocguard.io/override-hold=\"INC-9\"",
                         "overridden by hand: INC-9"},
        WorkloadLiftCase{"sts_mark_removed_needs_the_permission", true, HeldStatefulSet(kPin),
                         HeldStatefulSet(kPin, nullptr), Requester::kUnknown, true, "",
                         "removes allocguard.io/held-candidate"},
        WorkloadLiftCase{"sts_opt_out_needs_the_permission", true, HeldStatefulSet(kPin),
                         [] {
                           json s = HeldStatefulSet(kPin);
                           s["metadata"]["annotations"][api::kInjectAnnotation] = "false";
                           return s;
                         }(),
                         Requester::kOther, true, "", "opts out"},
        WorkloadLiftCase{"sts_recorded_hold_mark_removed_needs_the_permission", true,
                         HeldStatefulSet(std::nullopt), HeldStatefulSet(std::nullopt, nullptr),
                         Requester::kOther, true, "", "removes allocguard.io/held-candidate"},
        WorkloadLiftCase{"sts_operator_release", true, HeldStatefulSet(kPin),
                         [] {
                           json s = HeldStatefulSet(1, nullptr);
                           s["metadata"]["annotations"].erase(api::kUserPartitionAnnotation);
                           return s;
                         }(),
                         Requester::kOperator, true, "", ""},
        WorkloadLiftCase{"sts_not_held", true, HeldStatefulSet(kPin, nullptr),
                         HeldStatefulSet(0, nullptr), Requester::kOther, true, "", ""},
        WorkloadLiftCase{"ds_switched_back_to_rolling_update_refused", false, HeldDaemonSet(true),
                         Unpinned(HeldDaemonSet(true)), Requester::kOther, false,
                         "its update strategy cannot be switched back from OnDelete", ""},
        WorkloadLiftCase{"ds_override_needs_the_permission_and_is_recorded", false,
                         HeldDaemonSet(true), Unpinned(HeldDaemonSet(true, "abc", "INC-9")),
                         Requester::kOther, true, "", "override-hold=\"INC-9\"", "INC-9"},
        WorkloadLiftCase{"ds_mark_removed_needs_the_permission", false, HeldDaemonSet(true),
                         Unpinned(HeldDaemonSet(true, nullptr)), Requester::kOther, true, "",
                         "removes allocguard.io/held-candidate"},
        WorkloadLiftCase{"ds_recorded_hold_strategy_change_asks_nothing", false,
                         HeldDaemonSet(false), Unpinned(HeldDaemonSet(false)), Requester::kOther,
                         true, "", ""},
        WorkloadLiftCase{"ds_operator_release", false, HeldDaemonSet(true),
                         Unpinned(HeldDaemonSet(false, nullptr)), Requester::kOperator, true, "",
                         ""}),
    [](const auto& test_case) { return test_case.param.label; });

api::AllocatorPolicy Policy(std::string name, std::map<std::string, std::string> labels,
                            std::vector<api::LabelSelectorRequirement> expressions = {}) {
  api::AllocatorPolicy policy;
  policy.ns = "shop";
  policy.name = std::move(name);
  policy.spec.selector.match_labels = std::move(labels);
  policy.spec.selector.match_expressions = std::move(expressions);
  return policy;
}

struct OverlapCase {
  std::string label;
  api::AllocatorPolicy candidate;
  api::AllocatorPolicy other;
  bool overlap;
  std::string example;  // labels satisfying both, when they overlap
};

void PrintTo(const OverlapCase& c, std::ostream* os) { *os << c.label; }

class PolicyOverlapTest : public ::testing::TestWithParam<OverlapCase> {};

TEST_P(PolicyOverlapTest, RefusesOverlappingSelectors) {
  const OverlapCase& c = GetParam();
  ValidationDecision decision = ValidatePolicy(c.candidate, {c.other});
  EXPECT_EQ(decision.allowed, !c.overlap) << decision.message;
  std::string example;
  EXPECT_EQ(SelectorsOverlap(c.candidate.spec.selector, c.other.spec.selector, &example),
            c.overlap);
  // Symmetric.
  EXPECT_EQ(SelectorsOverlap(c.other.spec.selector, c.candidate.spec.selector, nullptr), c.overlap);
  if (c.overlap) {
    EXPECT_EQ(example, c.example);
    EXPECT_THAT(decision.message, HasSubstr("spec.selector"));
    EXPECT_THAT(decision.message, HasSubstr("\"" + c.other.name + "\""));
  }
}

using R = api::LabelSelectorRequirement;

INSTANTIATE_TEST_SUITE_P(
    Cases, PolicyOverlapTest,
    ::testing::Values(
        OverlapCase{"same_labels", Policy("a", {{"app", "web"}}), Policy("b", {{"app", "web"}}),
                    true, "app=web"},
        OverlapCase{"different_values", Policy("a", {{"app", "web"}}), Policy("b", {{"app", "db"}}),
                    false, ""},
        OverlapCase{"disjoint_keys_overlap", Policy("a", {{"app", "web"}}),
                    Policy("b", {{"tier", "front"}}), true, "app=web,tier=front"},
        OverlapCase{"empty_selector_overlaps_all", Policy("a", {{"app", "web"}}), Policy("b", {}),
                    true, "app=web"},
        OverlapCase{"in_sets_intersect", Policy("a", {}, {R{"app", "In", {"web", "api"}}}),
                    Policy("b", {}, {R{"app", "In", {"api", "db"}}}), true, "app=api"},
        OverlapCase{"in_sets_disjoint", Policy("a", {}, {R{"app", "In", {"web"}}}),
                    Policy("b", {}, {R{"app", "In", {"db"}}}), false, ""},
        OverlapCase{"label_vs_notin_same", Policy("a", {{"app", "web"}}),
                    Policy("b", {}, {R{"app", "NotIn", {"web"}}}), false, ""},
        OverlapCase{"label_vs_notin_other", Policy("a", {{"app", "web"}}),
                    Policy("b", {}, {R{"app", "NotIn", {"db"}}}), true, "app=web"},
        OverlapCase{"exists_vs_does_not_exist", Policy("a", {}, {R{"canary", "Exists", {}}}),
                    Policy("b", {}, {R{"canary", "DoesNotExist", {}}}), false, ""},
        OverlapCase{"label_vs_does_not_exist", Policy("a", {{"app", "web"}}),
                    Policy("b", {}, {R{"app", "DoesNotExist", {}}}), false, ""},
        OverlapCase{"notin_vs_does_not_exist", Policy("a", {}, {R{"app", "NotIn", {"web"}}}),
                    Policy("b", {}, {R{"app", "DoesNotExist", {}}}), true, ""},
        OverlapCase{"exists_vs_notin", Policy("a", {}, {R{"app", "Exists", {}}}),
                    Policy("b", {}, {R{"app", "NotIn", {"x"}}}), true, "app=x1"},
        OverlapCase{"exclusive_by_second_key", Policy("a", {{"app", "web"}, {"track", "stable"}}),
                    Policy("b", {{"app", "web"}}, {R{"track", "NotIn", {"stable"}}}), false, ""}),
    [](const auto& test_case) { return test_case.param.label; });

TEST(ValidatePolicyTest, IgnoresItsOwnStoredVersionAndNamesTheFirstOverlap) {
  api::AllocatorPolicy candidate = Policy("web", {{"app", "web"}});
  EXPECT_TRUE(ValidatePolicy(candidate, {Policy("web", {{"app", "web"}})}).allowed);
  ValidationDecision decision =
      ValidatePolicy(candidate, {Policy("web", {{"app", "web"}}), Policy("z-all", {}),
                                 Policy("db", {{"app", "db"}}), Policy("m-web", {{"app", "web"}})});
  EXPECT_FALSE(decision.allowed);
  EXPECT_THAT(decision.message, HasSubstr("\"m-web\""));
  EXPECT_THAT(decision.message, HasSubstr("{app=web}"));
}

TEST(ValidatePolicyTest, RefusesASelectorThatMatchesNothing) {
  ValidationDecision decision =
      ValidatePolicy(Policy("p", {{"app", "web"}}, {R{"app", "NotIn", {"web"}}}), {});
  EXPECT_FALSE(decision.allowed);
  EXPECT_THAT(decision.message, HasSubstr("spec.selector"));
  EXPECT_THAT(decision.message, HasSubstr("no pod"));
}

TEST(ValidatePolicyTest, NoOthersIsAllowed) {
  EXPECT_TRUE(ValidatePolicy(Policy("p", {{"app", "web"}}), {}).allowed);
}

TEST(ValidatePolicyChangeTest, LiftingHoldsByDeletingOrRelaxingAPolicyNeedsTheOverride) {
  api::AllocatorPolicy enforce = Policy("web-policy", {{"app", "web"}});
  enforce.spec.rollout.mode = api::RolloutMode::kEnforce;
  api::AllocatorPolicy audit = enforce;
  audit.spec.rollout.mode = api::RolloutMode::kAudit;
  api::AllocatorPolicy jemalloc = enforce;
  jemalloc.spec.allocator.name = api::Allocator::kJemalloc;
  EXPECT_THAT(ValidatePolicyChange(enforce, nullptr, {"web"}).needs_override,
              HasSubstr("lifts the hold of web: it deletes policy web-policy"));
  EXPECT_THAT(ValidatePolicyChange(enforce, &audit, {"web", "api"}).needs_override,
              HasSubstr("web, api: it sets spec.rollout.mode of policy web-policy to Audit"));
  EXPECT_THAT(ValidatePolicyChange(enforce, &jemalloc, {"web"}).needs_override, IsEmpty())
      << "switching the allocator keeps the hold (a new canary decides)";
  EXPECT_THAT(ValidatePolicyChange(enforce, nullptr, {}).needs_override, IsEmpty())
      << "nothing held";
  EXPECT_THAT(ValidatePolicyChange(audit, nullptr, {"web"}).needs_override, IsEmpty())
      << "an Audit policy holds nothing";
}

}  // namespace
}  // namespace allocguard::admission
