#include "operator/admission/workload_hold.h"

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

constexpr auto kCreate = AdmissionOperation::kCreate;
constexpr auto kUpdate = AdmissionOperation::kUpdate;
constexpr auto kEnforce = api::RolloutMode::kEnforce;
constexpr auto kAudit = api::RolloutMode::kAudit;

// As the API server stores it: the update strategy defaulted.
json StatefulSet() {
  return json::parse(R"({
    "apiVersion": "apps/v1", "kind": "StatefulSet",
    "metadata": {"name": "db", "namespace": "data"},
    "spec": {
      "replicas": 3,
      "serviceName": "db",
      "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
      "template": {
        "metadata": {"labels": {"app": "db"}},
        "spec": {"containers": [{"name": "db", "image": "pg:16"}]}
      }
    }
  })");
}

json DaemonSet() {
  return json::parse(R"({
    "apiVersion": "apps/v1", "kind": "DaemonSet",
    "metadata": {"name": "shipper", "namespace": "data"},
    "spec": {
      "updateStrategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
      "template": {
        "metadata": {"labels": {"app": "shipper"}},
        "spec": {"containers": [{"name": "shipper", "image": "vector:1"}]}
      }
    }
  })");
}

api::AllocatorPolicy Policy(api::RolloutMode mode) {
  api::AllocatorPolicy policy;
  policy.ns = "data";
  policy.name = "db-jemalloc";
  policy.spec.rollout.mode = mode;
  return policy;
}

std::string HashOf(const json& object) { return TemplateHash(object["spec"]["template"]); }

json WithImage(json object, const std::string& image) {
  object["spec"]["template"]["spec"]["containers"][0]["image"] = image;
  return object;
}

json WithReplicas(json object, int replicas) {
  object["spec"]["replicas"] = replicas;
  return object;
}

json WithPartition(json object, std::optional<int64_t> partition) {
  json& strategy = object["spec"]["updateStrategy"];
  if (partition) {
    strategy["rollingUpdate"]["partition"] = *partition;
  } else {
    strategy.erase("rollingUpdate");
  }
  return object;
}

json WithStrategy(json object, const json& strategy) {
  if (strategy.is_null()) {
    object["spec"].erase("updateStrategy");
  } else {
    object["spec"]["updateStrategy"] = strategy;
  }
  return object;
}

json Annotated(json object, const std::string& key, const std::string& value) {
  object["metadata"]["annotations"][key] = value;
  return object;
}

json Partition(const json& object) {
  return object["spec"]["updateStrategy"]["rollingUpdate"].value("partition", json());
}

json Annotations(const json& object) {
  return object["metadata"].value("annotations", json::object());
}

// A StatefulSet held by the gate for its current template: pinned to
// `pin`, its own partition `user` ("" for none) remembered.
json HeldSet(json set, int64_t pin, const std::string& user) {
  set = WithPartition(set, pin);
  set = Annotated(set, api::kHeldCandidateAnnotation, HashOf(set));
  return Annotated(set, api::kUserPartitionAnnotation, user);
}

json HeldDaemonSet(json ds, const json& user_strategy) {
  ds = Annotated(ds, api::kUserUpdateStrategyAnnotation, user_strategy.dump());
  ds = Annotated(ds, api::kHeldCandidateAnnotation, HashOf(ds));
  return WithStrategy(ds, {{"type", "OnDelete"}});
}

struct HoldCase {
  std::string label;
  AdmissionOperation operation;
  std::function<json()> old_object;  // empty on CREATE
  std::function<json()> new_object;
  std::optional<api::RolloutMode> mode;  // nullopt: no policy
  std::set<std::string> flat_images;     // templates with a Flat verdict
  GateAction action;
  bool needs_canary;
  std::string reason_part;
  // The object after the patch, as the API server would store it; nullptr
  // means untouched.
  std::function<json(const json& admitted)> expected;
};

void PrintTo(const HoldCase& c, std::ostream* os) { *os << c.label; }

void CheckCase(const HoldCase& c, json (*fixture)(),
               GateDecision (*decide)(const WorkloadGateInput&)) {
  WorkloadGateInput input;
  input.operation = c.operation;
  input.old_object = c.old_object ? c.old_object() : json();
  input.new_object = c.new_object();
  if (c.mode) input.policy = Policy(*c.mode);
  std::set<std::string> flat;
  for (const std::string& image : c.flat_images) flat.insert(HashOf(WithImage(fixture(), image)));
  input.has_flat_verdict = [&](const std::string& h) { return flat.contains(h); };
  input.operator_namespace = "allocguard-system";

  const GateDecision decision = decide(input);
  EXPECT_EQ(decision.action, c.action) << decision.reason;
  EXPECT_EQ(decision.needs_canary, c.needs_canary) << decision.reason;
  EXPECT_THAT(decision.reason, HasSubstr(c.reason_part));
  const json patched = input.new_object.patch(decision.patch);
  const json expected = c.expected ? c.expected(input.new_object) : input.new_object;
  EXPECT_EQ(patched, expected) << "patch: " << decision.patch.dump();

  // The webhook invoked again on its own patch changes nothing more.
  WorkloadGateInput again = input;
  again.new_object = patched;
  EXPECT_EQ(decide(again).patch, json::array()) << decide(again).reason;
}

// --- StatefulSet gate ----------------------------------------------------------

class StatefulSetGateTest : public ::testing::TestWithParam<HoldCase> {};

TEST_P(StatefulSetGateTest, Decides) { CheckCase(GetParam(), StatefulSet, DecideStatefulSetGate); }

json NewImage() { return WithImage(StatefulSet(), "pg:17"); }

// What the gate's hold of `admitted` leaves: pinned to `pin`, `user` remembered.
std::function<json(const json&)> PinnedTo(int64_t pin, const std::string& user) {
  return [=](const json& admitted) {
    json held = WithPartition(admitted, pin);
    held = Annotated(held, api::kUserPartitionAnnotation, user);
    return Annotated(held, api::kHeldCandidateAnnotation, HashOf(admitted));
  };
}

constexpr int64_t kPin = kHeldPartition;

json HeldOld() { return HeldSet(StatefulSet(), kPin, "1"); }

INSTANTIATE_TEST_SUITE_P(
    Cases, StatefulSetGateTest,
    ::testing::Values(
        HoldCase{"no_policy",
                 kUpdate,
                 StatefulSet,
                 NewImage,
                 std::nullopt,
                 {},
                 GateAction::kAllow,
                 false,
                 "no AllocatorPolicy governs this StatefulSet",
                 nullptr},
        HoldCase{"mode_off",
                 kUpdate,
                 StatefulSet,
                 NewImage,
                 api::RolloutMode::kOff,
                 {},
                 GateAction::kAllow,
                 false,
                 "rollout mode Off",
                 nullptr},
        HoldCase{"opted_out_on_template",
                 kUpdate,
                 StatefulSet,
                 [] {
                   json s = NewImage();
                   s["spec"]["template"]["metadata"]["annotations"][api::kInjectAnnotation] =
                       "false";
                   return s;
                 },
                 kEnforce,
                 {},
                 GateAction::kAllow,
                 false,
                 "opted out",
                 nullptr},
        HoldCase{"kube_system",
                 kUpdate,
                 StatefulSet,
                 [] {
                   json s = NewImage();
                   s["metadata"]["namespace"] = "kube-system";
                   return s;
                 },
                 kEnforce,
                 {},
                 GateAction::kAllow,
                 false,
                 "never gated",
                 nullptr},
        HoldCase{"create_is_canaried_not_held",
                 kCreate,
                 nullptr,
                 StatefulSet,
                 kEnforce,
                 {},
                 GateAction::kAllow,
                 true,
                 "cannot be held",
                 nullptr},
        HoldCase{"create_flat_is_recorded",
                 kCreate,
                 nullptr,
                 StatefulSet,
                 kEnforce,
                 {"pg:16"},
                 GateAction::kAllow,
                 false,
                 "Flat",
                 [](const json& s) {
                   return Annotated(s, api::kReleasedCandidateAnnotation, HashOf(s));
                 }},
        HoldCase{"audit_rolls_and_canaries",
                 kUpdate,
                 StatefulSet,
                 NewImage,
                 kAudit,
                 {},
                 GateAction::kAllow,
                 true,
                 "Audit",
                 nullptr},
        HoldCase{"unchanged_template_not_held",
                 kUpdate,
                 StatefulSet,
                 [] { return WithReplicas(StatefulSet(), 5); },
                 kEnforce,
                 {},
                 GateAction::kAllow,
                 false,
                 "did not change",
                 nullptr},
        // S1: the partition arithmetic and the user's own partition.
        HoldCase{"enforce_pins_partition_above_any_replica_count",
                 kUpdate,
                 StatefulSet,
                 NewImage,
                 kEnforce,
                 {},
                 GateAction::kHold,
                 true,
                 "partition is 2147483647, above any replica count (replicas 3)",
                 PinnedTo(kPin, "0")},
        HoldCase{"enforce_remembers_users_partition",
                 kUpdate,
                 [] { return WithPartition(StatefulSet(), 1); },
                 [] { return WithPartition(NewImage(), 1); },
                 kEnforce,
                 {},
                 GateAction::kHold,
                 true,
                 "own partition (1) is restored",
                 PinnedTo(kPin, "1")},
        HoldCase{"enforce_without_partition_remembers_none",
                 kUpdate,
                 [] { return WithPartition(StatefulSet(), std::nullopt); },
                 [] { return WithPartition(NewImage(), std::nullopt); },
                 kEnforce,
                 {},
                 GateAction::kHold,
                 true,
                 "own partition (none)",
                 PinnedTo(kPin, "")},
        HoldCase{"enforce_replicas_absent_pins_one",
                 kUpdate,
                 StatefulSet,
                 [] {
                   json s = NewImage();
                   s["spec"].erase("replicas");
                   return s;
                 },
                 kEnforce,
                 {},
                 GateAction::kHold,
                 true,
                 "(replicas 1)",
                 PinnedTo(kPin, "0")},
        HoldCase{"enforce_users_partition_above_replicas_kept",
                 kUpdate,
                 [] { return WithPartition(StatefulSet(), 5); },
                 [] { return WithPartition(NewImage(), 5); },
                 kEnforce,
                 {},
                 GateAction::kHold,
                 true,
                 "own partition (5)",
                 PinnedTo(kPin, "5")},
        HoldCase{"enforce_zero_replicas",
                 kUpdate,
                 [] { return WithReplicas(StatefulSet(), 0); },
                 [] { return WithReplicas(NewImage(), 0); },
                 kEnforce,
                 {},
                 GateAction::kHold,
                 true,
                 "(replicas 0)",
                 PinnedTo(kPin, "0")},
        // S2: scale while held; the user's edits while held.
        HoldCase{"scale_up_while_held_keeps_the_pin",
                 kUpdate,
                 HeldOld,
                 [] { return WithReplicas(HeldOld(), 5); },
                 kEnforce,
                 {},
                 GateAction::kHold,
                 false,
                 "stays held",
                 nullptr},
        HoldCase{"scale_down_while_held_keeps_the_pin",
                 kUpdate,
                 HeldOld,
                 [] { return WithReplicas(HeldOld(), 2); },
                 kEnforce,
                 {},
                 GateAction::kHold,
                 false,
                 "(replicas 2)",
                 nullptr},
        HoldCase{"pin_at_replicas_from_an_earlier_version_is_raised",
                 kUpdate,
                 [] { return HeldSet(StatefulSet(), 3, "1"); },
                 [] { return WithReplicas(HeldSet(StatefulSet(), 3, "1"), 5); },
                 kEnforce,
                 {},
                 GateAction::kHold,
                 false,
                 "own partition (1)",
                 [](const json& s) { return WithPartition(s, kPin); }},
        HoldCase{"users_partition_while_held_is_remembered",
                 kUpdate,
                 HeldOld,
                 [] { return WithPartition(HeldOld(), 0); },
                 kEnforce,
                 {},
                 GateAction::kHold,
                 false,
                 "own partition (0)",
                 [](const json& s) {
                   return Annotated(WithPartition(s, kPin), api::kUserPartitionAnnotation, "0");
                 }},
        HoldCase{"scale_past_users_own_partition",
                 kUpdate,
                 [] { return HeldSet(StatefulSet(), kPin, "5"); },
                 [] { return WithReplicas(HeldSet(StatefulSet(), kPin, "5"), 7); },
                 kEnforce,
                 {},
                 GateAction::kHold,
                 false,
                 "stays held",
                 nullptr},
        HoldCase{"users_partition_while_held_replaces_garbled_memory",
                 kUpdate,
                 [] { return HeldSet(StatefulSet(), kPin, "x"); },
                 [] { return HeldSet(StatefulSet(), 2, "x"); },
                 kEnforce,
                 {},
                 GateAction::kHold,
                 false,
                 "own partition (2)",
                 [](const json& s) {
                   return Annotated(WithPartition(s, kPin), api::kUserPartitionAnnotation, "2");
                 }},
        HoldCase{"remembered_partition_beyond_int32_keeps_the_hold",
                 kUpdate,
                 HeldOld,
                 [] {
                   return Annotated(WithImage(HeldOld(), "pg:17"), api::kUserPartitionAnnotation,
                                    "2147483648");
                 },
                 kEnforce,
                 {"pg:17"},
                 GateAction::kHold,
                 false,
                 "at most 2147483647",
                 nullptr},
        HoldCase{"override_while_held_untouched",
                 kUpdate,
                 HeldOld,
                 [] {
                   return Annotated(WithPartition(HeldOld(), 0), api::kOverrideHoldAnnotation,
                                    "incident 42");
                 },
                 kEnforce,
                 {},
                 GateAction::kAllow,
                 false,
                 "overridden",
                 nullptr},
        HoldCase{"new_candidate_while_held_keeps_users_partition",
                 kUpdate,
                 HeldOld,
                 [] { return WithImage(HeldOld(), "pg:18"); },
                 kEnforce,
                 {},
                 GateAction::kHold,
                 true,
                 "own partition (1)",
                 PinnedTo(kPin, "1")},
        // Rule 4: Flat.
        HoldCase{"flat_not_held_records_released",
                 kUpdate,
                 StatefulSet,
                 NewImage,
                 kEnforce,
                 {"pg:17"},
                 GateAction::kAllow,
                 false,
                 "Flat",
                 [](const json& s) {
                   return Annotated(s, api::kReleasedCandidateAnnotation, HashOf(s));
                 }},
        HoldCase{"flat_candidate_releases_earlier_hold",
                 kUpdate,
                 HeldOld,
                 [] { return WithImage(HeldOld(), "pg:17"); },
                 kEnforce,
                 {"pg:17"},
                 GateAction::kRelease,
                 false,
                 "restored to 1",
                 [](const json& s) {
                   json released = WithPartition(s, 1);
                   released["metadata"]["annotations"] = {
                       {api::kReleasedCandidateAnnotation, HashOf(s)}};
                   return released;
                 }},
        HoldCase{"flat_candidate_releases_and_drops_an_override_not_acted_on",
                 kUpdate,
                 [] { return Annotated(HeldOld(), api::kOverrideHoldAnnotation, "INC-7"); },
                 [] {
                   return Annotated(WithImage(HeldOld(), "pg:17"), api::kOverrideHoldAnnotation,
                                    "INC-7");
                 },
                 kEnforce,
                 {"pg:17"},
                 GateAction::kRelease,
                 false,
                 "restored to 1",
                 [](const json& s) {
                   json released = WithPartition(s, 1);
                   released["metadata"]["annotations"] = {
                       {api::kReleasedCandidateAnnotation, HashOf(s)}};
                   return released;
                 }},
        HoldCase{"flat_with_garbled_memory_stays_held",
                 kUpdate,
                 HeldOld,
                 [] {
                   return Annotated(WithImage(HeldOld(), "pg:17"), api::kUserPartitionAnnotation,
                                    "one");
                 },
                 kEnforce,
                 {"pg:17"},
                 GateAction::kHold,
                 false,
                 "allocguard.io/user-partition must be a non-negative integer",
                 nullptr},
        // S3: OnDelete.
        HoldCase{
            "on_delete_hold_is_recorded_only",
            kUpdate,
            [] {
              return WithStrategy(StatefulSet(), {{"type", "OnDelete"}});
            },
            [] {
              return WithStrategy(NewImage(), {{"type", "OnDelete"}});
            },
            kEnforce,
            {},
            GateAction::kHold,
            true,
            "a pod deleted while held comes back with the candidate",
            [](const json& s) { return Annotated(s, api::kHeldCandidateAnnotation, HashOf(s)); }},
        HoldCase{"on_delete_scale_while_held_untouched",
                 kUpdate,
                 [] {
                   json s = WithStrategy(StatefulSet(), {{"type", "OnDelete"}});
                   return Annotated(s, api::kHeldCandidateAnnotation, HashOf(s));
                 },
                 [] {
                   json s = WithStrategy(WithReplicas(StatefulSet(), 5), {{"type", "OnDelete"}});
                   return Annotated(s, api::kHeldCandidateAnnotation, HashOf(s));
                 },
                 kEnforce,
                 {},
                 GateAction::kHold,
                 false,
                 "stays recorded",
                 nullptr}));

// --- StatefulSet release -------------------------------------------------------

TEST(StatefulSetReleaseTest, RestoresTheUsersPartition) {
  const json held = HeldSet(StatefulSet(), 3, "1");
  const GateDecision d = ReleaseStatefulSetHold(held);
  ASSERT_EQ(d.action, GateAction::kRelease) << d.reason;
  const json released = held.patch(d.patch);
  EXPECT_EQ(Partition(released), 1);
  EXPECT_EQ(Annotations(released),
            json({{api::kReleasedCandidateAnnotation, HashOf(StatefulSet())}}));
  EXPECT_THAT(d.reason, HasSubstr("restored to 1"));
}

TEST(StatefulSetReleaseTest, RemovesAPartitionTheUserNeverHad) {
  const json original = WithPartition(StatefulSet(), std::nullopt);
  const json held = HeldSet(original, 3, "");
  const GateDecision d = ReleaseStatefulSetHold(held);
  ASSERT_EQ(d.action, GateAction::kRelease) << d.reason;
  const json released = held.patch(d.patch);
  EXPECT_EQ(released["spec"], original["spec"]);
  EXPECT_THAT(d.reason, HasSubstr("had none"));
}

TEST(StatefulSetReleaseTest, HoldThenReleaseGivesBackTheUsersStrategy) {
  for (const std::optional<int>& partition : {std::optional<int>(), std::optional<int>(0),
                                              std::optional<int>(2), std::optional<int>(7)}) {
    const json before = WithPartition(StatefulSet(), partition);
    WorkloadGateInput input;
    input.old_object = before;
    input.new_object = WithImage(before, "pg:17");
    input.policy = Policy(kEnforce);
    const GateDecision hold = DecideStatefulSetGate(input);
    ASSERT_EQ(hold.action, GateAction::kHold) << hold.reason;
    const json held = input.new_object.patch(hold.patch);
    EXPECT_GE(Partition(held).get<int>(), 3) << "no pod may take the candidate while held";
    const json released = held.patch(ReleaseStatefulSetHold(held).patch);
    EXPECT_EQ(released["spec"]["updateStrategy"], before["spec"]["updateStrategy"])
        << "partition " << (partition ? std::to_string(*partition) : "none");
    EXPECT_EQ(Annotations(released),
              json({{api::kReleasedCandidateAnnotation, HashOf(input.new_object)}}));
  }
}

TEST(StatefulSetReleaseTest, NotHeldIsLeftAlone) {
  const GateDecision d = ReleaseStatefulSetHold(StatefulSet());
  EXPECT_EQ(d.action, GateAction::kAllow);
  EXPECT_EQ(d.patch, json::array());
  EXPECT_THAT(d.reason, HasSubstr("not held"));
}

TEST(StatefulSetReleaseTest, OnDeleteReleasesTheRecordOnly) {
  json held = WithStrategy(StatefulSet(), {{"type", "OnDelete"}});
  held = Annotated(held, api::kHeldCandidateAnnotation, HashOf(held));
  const GateDecision d = ReleaseStatefulSetHold(held);
  ASSERT_EQ(d.action, GateAction::kRelease);
  const json released = held.patch(d.patch);
  EXPECT_EQ(released["spec"], held["spec"]);
  EXPECT_EQ(Annotations(released), json({{api::kReleasedCandidateAnnotation, HashOf(held)}}));
  EXPECT_THAT(d.reason, HasSubstr("each pod takes the template when it is deleted"));
}

TEST(StatefulSetReleaseTest, ForgottenPartitionIsLeftPinnedAndSaysSo) {
  json held = HeldSet(StatefulSet(), 3, "1");
  held["metadata"]["annotations"].erase(api::kUserPartitionAnnotation);
  const GateDecision d = ReleaseStatefulSetHold(held);
  ASSERT_EQ(d.action, GateAction::kRelease);
  const json released = held.patch(d.patch);
  EXPECT_EQ(Partition(released), 3);
  EXPECT_FALSE(Annotations(released).contains(api::kHeldCandidateAnnotation));
  EXPECT_THAT(d.reason, HasSubstr("stays 3; lower it"));
}

TEST(StatefulSetReleaseTest, GarbledPartitionKeepsTheHold) {
  for (const char* garbled : {"-1", "two", "1.5", "99999999999999999999"}) {
    const json held = HeldSet(StatefulSet(), 3, garbled);
    GateDecision d;
    ASSERT_NO_THROW(d = ReleaseStatefulSetHold(held));
    EXPECT_EQ(d.action, GateAction::kHold) << garbled;
    EXPECT_EQ(d.patch, json::array());
    EXPECT_THAT(d.reason, HasSubstr(api::kUserPartitionAnnotation));
    EXPECT_THAT(d.reason, HasSubstr(json(garbled).dump()));
  }
}

// --- DaemonSet gate ------------------------------------------------------------

class DaemonSetGateTest : public ::testing::TestWithParam<HoldCase> {};

TEST_P(DaemonSetGateTest, Decides) { CheckCase(GetParam(), DaemonSet, DecideDaemonSetGate); }

json NewAgent() { return WithImage(DaemonSet(), "vector:2"); }

std::function<json(const json&)> SwitchedToOnDelete(const json& user_strategy) {
  return [=](const json& admitted) {
    json held = WithStrategy(admitted, {{"type", "OnDelete"}});
    held = Annotated(held, api::kUserUpdateStrategyAnnotation, user_strategy.dump());
    return Annotated(held, api::kHeldCandidateAnnotation, HashOf(admitted));
  };
}

json HeldAgent() { return HeldDaemonSet(DaemonSet(), DaemonSet()["spec"]["updateStrategy"]); }

const json kSurge = {{"type", "RollingUpdate"},
                     {"rollingUpdate", {{"maxUnavailable", 0}, {"maxSurge", "25%"}}}};

INSTANTIATE_TEST_SUITE_P(
    Cases, DaemonSetGateTest,
    ::testing::Values(
        HoldCase{"no_policy",
                 kUpdate,
                 DaemonSet,
                 NewAgent,
                 std::nullopt,
                 {},
                 GateAction::kAllow,
                 false,
                 "no AllocatorPolicy governs this DaemonSet",
                 nullptr},
        HoldCase{"opted_out",
                 kUpdate,
                 DaemonSet,
                 [] { return Annotated(NewAgent(), api::kInjectAnnotation, "false"); },
                 kEnforce,
                 {},
                 GateAction::kAllow,
                 false,
                 "opted out",
                 nullptr},
        HoldCase{"create_is_canaried_not_held",
                 kCreate,
                 nullptr,
                 DaemonSet,
                 kEnforce,
                 {},
                 GateAction::kAllow,
                 true,
                 "cannot be held",
                 nullptr},
        HoldCase{"audit",
                 kUpdate,
                 DaemonSet,
                 NewAgent,
                 kAudit,
                 {},
                 GateAction::kAllow,
                 true,
                 "Audit",
                 nullptr},
        // D1.
        HoldCase{"enforce_switches_to_on_delete",
                 kUpdate,
                 DaemonSet,
                 NewAgent,
                 kEnforce,
                 {},
                 GateAction::kHold,
                 true,
                 "a pod deleted while held would get is refused until the release",
                 SwitchedToOnDelete(DaemonSet()["spec"]["updateStrategy"])},
        HoldCase{"enforce_remembers_surge_settings",
                 kUpdate,
                 [] { return WithStrategy(DaemonSet(), kSurge); },
                 [] { return WithStrategy(NewAgent(), kSurge); },
                 kEnforce,
                 {},
                 GateAction::kHold,
                 true,
                 "OnDelete",
                 SwitchedToOnDelete(kSurge)},
        HoldCase{"enforce_without_strategy_remembers_null",
                 kUpdate,
                 [] { return WithStrategy(DaemonSet(), nullptr); },
                 [] { return WithStrategy(NewAgent(), nullptr); },
                 kEnforce,
                 {},
                 GateAction::kHold,
                 true,
                 "OnDelete",
                 SwitchedToOnDelete(nullptr)},
        // D2.
        HoldCase{"unchanged_while_held_stays",
                 kUpdate,
                 HeldAgent,
                 [] { return Annotated(HeldAgent(), "team", "logs"); },
                 kEnforce,
                 {},
                 GateAction::kHold,
                 false,
                 "stays held",
                 nullptr},
        HoldCase{"users_strategy_while_held_is_remembered",
                 kUpdate,
                 HeldAgent,
                 [] { return WithStrategy(HeldAgent(), kSurge); },
                 kEnforce,
                 {},
                 GateAction::kHold,
                 false,
                 "new strategy is remembered",
                 [](const json& d) {
                   return Annotated(WithStrategy(d, {{"type", "OnDelete"}}),
                                    api::kUserUpdateStrategyAnnotation, kSurge.dump());
                 }},
        HoldCase{"override_while_held_untouched",
                 kUpdate,
                 HeldAgent,
                 [] {
                   return Annotated(WithStrategy(HeldAgent(), kSurge), api::kOverrideHoldAnnotation,
                                    "incident 42");
                 },
                 kEnforce,
                 {},
                 GateAction::kAllow,
                 false,
                 "overridden",
                 nullptr},
        // D3.
        HoldCase{
            "users_on_delete_is_recorded_only",
            kUpdate,
            [] {
              return WithStrategy(DaemonSet(), {{"type", "OnDelete"}});
            },
            [] {
              return WithStrategy(NewAgent(), {{"type", "OnDelete"}});
            },
            kEnforce,
            {},
            GateAction::kHold,
            true,
            "a node that joins or a pod deleted while held would get is refused until the release",
            [](const json& d) { return Annotated(d, api::kHeldCandidateAnnotation, HashOf(d)); }},
        // Rule 4.
        HoldCase{"flat_candidate_releases_earlier_hold",
                 kUpdate,
                 HeldAgent,
                 [] { return WithImage(HeldAgent(), "vector:2"); },
                 kEnforce,
                 {"vector:2"},
                 GateAction::kRelease,
                 false,
                 "restored",
                 [](const json& d) {
                   json released = WithStrategy(d, DaemonSet()["spec"]["updateStrategy"]);
                   released["metadata"]["annotations"] = {
                       {api::kReleasedCandidateAnnotation, HashOf(d)}};
                   return released;
                 }}));

// --- DaemonSet release ---------------------------------------------------------

TEST(DaemonSetReleaseTest, HoldThenReleaseGivesBackTheUsersStrategy) {
  for (const json& strategy : {DaemonSet()["spec"]["updateStrategy"], kSurge, json()}) {
    const json before = WithStrategy(DaemonSet(), strategy);
    WorkloadGateInput input;
    input.old_object = before;
    input.new_object = WithImage(before, "vector:2");
    input.policy = Policy(kEnforce);
    const GateDecision hold = DecideDaemonSetGate(input);
    ASSERT_EQ(hold.action, GateAction::kHold) << hold.reason;
    const json held = input.new_object.patch(hold.patch);
    EXPECT_EQ(held["spec"]["updateStrategy"], json({{"type", "OnDelete"}}));
    const GateDecision release = ReleaseDaemonSetHold(held);
    ASSERT_EQ(release.action, GateAction::kRelease) << release.reason;
    const json released = held.patch(release.patch);
    EXPECT_EQ(released["spec"], input.new_object["spec"]) << strategy.dump();
    EXPECT_EQ(Annotations(released),
              json({{api::kReleasedCandidateAnnotation, HashOf(input.new_object)}}));
  }
}

TEST(DaemonSetReleaseTest, UsersOwnOnDeleteReleasesTheRecordOnly) {
  json held = WithStrategy(DaemonSet(), {{"type", "OnDelete"}});
  held = Annotated(held, api::kHeldCandidateAnnotation, HashOf(held));
  const GateDecision d = ReleaseDaemonSetHold(held);
  ASSERT_EQ(d.action, GateAction::kRelease);
  const json released = held.patch(d.patch);
  EXPECT_EQ(released["spec"], held["spec"]);
  EXPECT_THAT(d.reason, HasSubstr("stays OnDelete"));
}

TEST(DaemonSetReleaseTest, GarbledStrategyKeepsTheHold) {
  for (const char* garbled : {"{", "7", "\"RollingUpdate\"", ""}) {
    json held = HeldAgent();
    held["metadata"]["annotations"][api::kUserUpdateStrategyAnnotation] = garbled;
    GateDecision d;
    ASSERT_NO_THROW(d = ReleaseDaemonSetHold(held));
    EXPECT_EQ(d.action, GateAction::kHold) << garbled;
    EXPECT_EQ(d.patch, json::array());
    EXPECT_THAT(d.reason, HasSubstr(api::kUserUpdateStrategyAnnotation));
  }
}

// --- the override: the pin is the user's to lift -------------------------------

TEST(PinInPlaceTest, AStatefulSetStaysPinnedUntilTheUserSetsThePartition) {
  const json pinned = HeldSet(StatefulSet(), kHeldPartition, "1");
  const std::optional<std::string> pin = StatefulSetPinInPlace(pinned);
  ASSERT_TRUE(pin.has_value());
  EXPECT_THAT(*pin, HasSubstr("spec.updateStrategy.rollingUpdate.partition is still 2147483647"));
  EXPECT_THAT(*pin, HasSubstr("'1'")) << "names what the user had";
  EXPECT_EQ(StatefulSetPinInPlace(WithPartition(pinned, 1)), std::nullopt) << "set back by hand";
  EXPECT_EQ(StatefulSetPinInPlace(WithPartition(pinned, 0)), std::nullopt);
  json on_delete = WithStrategy(StatefulSet(), {{"type", "OnDelete"}});
  on_delete = Annotated(on_delete, api::kHeldCandidateAnnotation, HashOf(on_delete));
  EXPECT_EQ(StatefulSetPinInPlace(on_delete), std::nullopt) << "a recorded-only hold pins nothing";
}

TEST(PinInPlaceTest, ADaemonSetStaysPinnedUntilTheUserSetsTheStrategy) {
  const std::optional<std::string> pin = DaemonSetPinInPlace(HeldAgent());
  ASSERT_TRUE(pin.has_value());
  EXPECT_THAT(*pin, HasSubstr("spec.updateStrategy is still the hold's OnDelete"));
  EXPECT_EQ(DaemonSetPinInPlace(WithStrategy(HeldAgent(), kSurge)), std::nullopt);
  json own = WithStrategy(DaemonSet(), {{"type", "OnDelete"}});
  own = Annotated(own, api::kHeldCandidateAnnotation, HashOf(own));
  EXPECT_EQ(DaemonSetPinInPlace(own), std::nullopt) << "the user's own OnDelete is not a pin";
}

// Rule D4: the pod the DaemonSet controller creates for a held DaemonSet
// (for a node that joins, or in place of a deleted pod).
struct PodOfDaemonSet {
  json daemonset =
      Annotated(WithUid(HeldAgent(), "ds-uid-1"), api::kHeldCandidateAnnotation, "0123abcd");
  json pod = json::parse(R"({"metadata": {"name": "shipper-x7k2p", "namespace": "data",
    "labels": {"app": "shipper", "controller-revision-hash": "6d5f9c7b8"},
    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "shipper",
                         "uid": "ds-uid-1", "controller": true}]}})");
  std::optional<api::AllocatorPolicy> policy = Policy(kEnforce);

  std::optional<std::string> Decide() const {
    HeldDaemonSetPodInput in;
    in.pod = api::ParseObjectMeta(pod);
    in.daemonset = api::ParseDeploymentSummary(daemonset);
    in.policy = policy;
    in.operator_namespace = "allocguard-system";
    return RefusePodOfHeldDaemonSet(in);
  }
  static json WithUid(json object, const std::string& uid) {
    object["metadata"]["uid"] = uid;
    return object;
  }
};

TEST(HeldDaemonSetPodTest, APodOfAHeldDaemonSetIsRefusedWithWhatReleasesIt) {
  const std::optional<std::string> refused = PodOfDaemonSet().Decide();
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(*refused,
            "DaemonSet data/shipper is held by AllocatorPolicy db-jemalloc: its new pod template "
            "(allocguard.io/held-candidate 0123abcd) waits for its replay canary, and every pod "
            "the DaemonSet creates now would run it. Its controller creates this pod again once "
            "the hold is released (a Flat verdict, the policy in Audit or Off, or an override; "
            "docs/workload-kinds.md)");
  // The user's own OnDelete strategy (D3, a recorded-only hold): refused too.
  PodOfDaemonSet own;
  own.daemonset = Annotated(
      PodOfDaemonSet::WithUid(WithStrategy(DaemonSet(), {{"type", "OnDelete"}}), "ds-uid-1"),
      api::kHeldCandidateAnnotation, "0123abcd");
  EXPECT_TRUE(own.Decide().has_value());
}

TEST(HeldDaemonSetPodTest, EveryOtherPodIsAdmitted) {
  {
    PodOfDaemonSet c;  // a DaemonSet of the same name, another uid: not this pod's
    c.daemonset["metadata"]["uid"] = "ds-uid-2";
    EXPECT_EQ(c.Decide(), std::nullopt);
  }
  {
    PodOfDaemonSet c;  // an owner that is not its controller
    c.pod["metadata"]["ownerReferences"][0]["controller"] = false;
    EXPECT_EQ(c.Decide(), std::nullopt);
  }
  {
    PodOfDaemonSet c;  // a ReplicaSet's pod
    c.pod["metadata"]["ownerReferences"][0]["kind"] = "ReplicaSet";
    EXPECT_EQ(c.Decide(), std::nullopt);
  }
  {
    PodOfDaemonSet c;  // not held
    c.daemonset["metadata"]["annotations"].erase(api::kHeldCandidateAnnotation);
    EXPECT_EQ(c.Decide(), std::nullopt);
  }
  {
    PodOfDaemonSet c;  // an override its user was allowed to make
    c.daemonset = Annotated(c.daemonset, api::kOverrideHoldAnnotation, "incident 42");
    EXPECT_EQ(c.Decide(), std::nullopt);
  }
  {
    PodOfDaemonSet c;  // the policy went to Audit: the hold is being released
    c.policy = Policy(kAudit);
    EXPECT_EQ(c.Decide(), std::nullopt);
  }
  {
    PodOfDaemonSet c;  // no policy governs its template any more
    c.policy = std::nullopt;
    EXPECT_EQ(c.Decide(), std::nullopt);
  }
  {
    PodOfDaemonSet c;  // the DaemonSet is gone
    HeldDaemonSetPodInput in;
    in.pod = api::ParseObjectMeta(c.pod);
    in.policy = c.policy;
    EXPECT_EQ(RefusePodOfHeldDaemonSet(in), std::nullopt);
  }
}

TEST(WorkloadHoldTest, MalformedObjectsNeverThrow) {
  WorkloadGateInput input;
  input.policy = Policy(kEnforce);
  for (const json& garbage :
       {json(5), json::array(), json{{"spec", 1}}, json{{"metadata", {{"annotations", 3}}}},
        json{{"spec", {{"updateStrategy", "x"}, {"replicas", "3"}}}}}) {
    input.old_object = garbage;
    input.new_object = garbage;
    EXPECT_NO_THROW(DecideStatefulSetGate(input)) << garbage.dump();
    EXPECT_NO_THROW(DecideDaemonSetGate(input)) << garbage.dump();
    EXPECT_NO_THROW(ReleaseStatefulSetHold(garbage)) << garbage.dump();
    EXPECT_NO_THROW(ReleaseDaemonSetHold(garbage)) << garbage.dump();
    EXPECT_NO_THROW(StatefulSetPinInPlace(garbage)) << garbage.dump();
    EXPECT_NO_THROW(DaemonSetPinInPlace(garbage)) << garbage.dump();
    HeldDaemonSetPodInput pod;
    pod.pod = api::ParseObjectMeta(garbage);
    pod.daemonset = api::ParseDeploymentSummary(garbage);
    pod.policy = Policy(kEnforce);
    EXPECT_EQ(RefusePodOfHeldDaemonSet(pod), std::nullopt) << garbage.dump();
  }
}

}  // namespace
}  // namespace allocguard::admission
