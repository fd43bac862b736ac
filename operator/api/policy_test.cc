#include "operator/api/policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "operator/api/invalid_resources_for_test.h"
#include "operator/replay/load_spec.h"

namespace allocguard::api {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

json Minimal() {
  return json::parse(R"({
    "apiVersion": "allocguard.io/v1alpha1", "kind": "AllocatorPolicy",
    "metadata": {"name": "p", "namespace": "shop", "uid": "u-1", "generation": 3},
    "spec": {"selector": {"matchLabels": {"app": "web"}}, "allocator": {"name": "jemalloc"},
             "rollout": {"mode": "Off"}}})");
}

TEST(ParseAllocatorPolicyTest, AbsentFieldsTakeTheDefaultsOfTypesH) {
  auto policy = ParseAllocatorPolicy(Minimal());
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  EXPECT_EQ(policy->ns, "shop");
  EXPECT_EQ(policy->name, "p");
  EXPECT_EQ(policy->uid, "u-1");
  EXPECT_EQ(policy->generation, 3);
  const AllocatorPolicySpec& s = policy->spec;
  EXPECT_EQ(s.selector.match_labels, (std::map<std::string, std::string>{{"app", "web"}}));
  EXPECT_EQ(s.allocator, AllocatorSpec{.name = Allocator::kJemalloc});
  EXPECT_EQ(s.limits, LimitsSpec{});
  EXPECT_EQ(s.limits.max_floor_slope_bytes_per_hour, 512LL << 20);
  EXPECT_EQ(s.canary.duration, std::chrono::minutes(15));
  EXPECT_EQ(s.canary.sample_interval, std::chrono::seconds(2));
  EXPECT_EQ(s.canary.load, LoadSpec{});
  ASSERT_EQ(s.canary.variants.size(), 1u);  // the glibc baseline
  EXPECT_EQ(s.canary.variants[0].name, "glibc");
  EXPECT_EQ(s.canary.variants[0].allocator.name, Allocator::kGlibc);
  EXPECT_EQ(s.rollout.mode, RolloutMode::kOff);
  EXPECT_EQ(s.guard, GuardSpec{});
  EXPECT_EQ(s.stats, StatsSpec{});
  EXPECT_FALSE(s.StatsEnabled());  // the guard is off
  EXPECT_EQ(s.libc, Libc::kAuto);
}

// spec.stats.enabled: absent follows the guard; given, it wins either way.
TEST(ParseAllocatorPolicyTest, StatsFollowTheGuardUnlessSet) {
  struct Case {
    json guard;
    json stats;  // null: no spec.stats
    bool enabled;
  };
  for (const Case& c : std::vector<Case>{
           {json{{"enabled", true}}, nullptr, true},
           {json{{"enabled", false}}, nullptr, false},
           {json{{"enabled", true}}, json::object(), true},
           {json{{"enabled", true}}, json{{"enabled", false}}, false},
           {json{{"enabled", false}}, json{{"enabled", true}}, true},
       }) {
    json object = ValidPolicyForTest();
    object["spec"]["guard"] = c.guard;
    if (!c.stats.is_null()) object["spec"]["stats"] = c.stats;
    auto policy = ParseAllocatorPolicy(object);
    ASSERT_TRUE(policy.ok()) << policy.status().ToString() << " " << object["spec"].dump();
    EXPECT_EQ(policy->spec.StatsEnabled(), c.enabled) << object["spec"].dump();
  }
  json object = ValidPolicyForTest();
  object["spec"]["stats"] = {{"enabled", "yes"}};
  auto refused = ParseAllocatorPolicy(object);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("spec.stats.enabled"));
  object["spec"]["stats"] = json::array();
  refused = ParseAllocatorPolicy(object);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("spec.stats"));
}

TEST(ParseAllocatorPolicyTest, ReadsEveryField) {
  json p = json::parse(R"({
    "apiVersion": "allocguard.io/v1alpha1", "kind": "AllocatorPolicy",
    "metadata": {"name": "p", "namespace": "shop"},
    "spec": {
      "selector": {"matchLabels": {"app": "web"},
                   "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a", "b"]}]},
      "containers": ["server", "worker"],
      "libc": "glibc",
      "allocator": {"name": "glibc",
                    "glibc": {"arenaMax": 2, "trimThreshold": "128Mi", "mmapThreshold": 65536}},
      "limits": {"memory": "1.5Gi", "maxFloorSlopePerHour": "256Mi"},
      "canary": {
        "duration": "1h30m", "sampleInterval": "500ms",
        "load": {"port": 9000, "rate": 2.5, "workers": 8, "seed": 99, "arrival": "uniform",
                 "ready": {"path": "/healthz", "timeout": "2m"}, "lateAfter": "250ms",
                 "requestTimeout": "5s",
                 "requests": [{"name": "q", "method": "POST", "path": "/q/{key}", "body": "b",
                               "contentType": "text/plain", "weight": 0.5, "keySpace": 10,
                               "expect": [200, 404]},
                              {"path": "/other"}]},
        "variants": [{"name": "je", "allocator": {"name": "jemalloc",
                                                    "jemalloc": {"mallocConf": "narenas:2"}}},
                     {"name": "mi", "allocator": {"name": "mimalloc",
                                                    "mimalloc": {"options": {"purge_delay": "0"}}}},
                     {"name": "tc", "allocator": {"name": "tcmalloc",
                                                    "tcmalloc": {"releaseRate": 4,
                                                                 "maxTotalThreadCacheBytes": "32Mi"}}}],
        "nodeSelector": {"node.kubernetes.io/instance-type": "big"},
        "productionCPUs": 64
      },
      "rollout": {"mode": "Enforce"},
      "guard": {"enabled": true, "threshold": "1Gi", "action": "Backpressure"}
    }})");
  auto policy = ParseAllocatorPolicy(p);
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  const AllocatorPolicySpec& s = policy->spec;
  ASSERT_EQ(s.selector.match_expressions.size(), 1u);
  EXPECT_EQ(s.selector.match_expressions[0].op, "NotIn");
  EXPECT_EQ(s.containers, (std::vector<std::string>{"server", "worker"}));
  EXPECT_EQ(s.libc, Libc::kGlibc);
  EXPECT_EQ(s.allocator.name, Allocator::kGlibc);
  EXPECT_EQ(s.allocator.glibc_arena_max, 2);
  EXPECT_EQ(s.allocator.glibc_trim_threshold, 128LL << 20);
  EXPECT_EQ(s.allocator.glibc_mmap_threshold, 65536);
  EXPECT_EQ(s.limits.memory_bytes, 3LL << 29);
  EXPECT_EQ(s.limits.max_floor_slope_bytes_per_hour, 256LL << 20);
  EXPECT_EQ(s.canary.duration, std::chrono::minutes(90));
  EXPECT_EQ(s.canary.sample_interval, milliseconds(500));
  const LoadSpec& load = s.canary.load;
  EXPECT_EQ(load.port, 9000);
  EXPECT_EQ(load.rate, 2.5);
  EXPECT_EQ(load.workers, 8);
  EXPECT_EQ(load.seed, 99u);
  EXPECT_EQ(load.arrival, "uniform");
  EXPECT_EQ(load.ready_path, "/healthz");
  EXPECT_EQ(load.ready_timeout, std::chrono::minutes(2));
  EXPECT_EQ(load.late_after, milliseconds(250));
  EXPECT_EQ(load.request_timeout, std::chrono::seconds(5));
  ASSERT_EQ(load.requests.size(), 2u);
  EXPECT_EQ(load.requests[0],
            (LoadRequestSpec{"q", "POST", "/q/{key}", "b", "text/plain", 0.5, 10, {200, 404}}));
  EXPECT_EQ(load.requests[1].name, "request-1");
  EXPECT_EQ(load.requests[1].expect, std::vector<int>{200});
  ASSERT_EQ(s.canary.variants.size(), 3u);
  EXPECT_EQ(s.canary.variants[0].allocator.jemalloc_malloc_conf, "narenas:2");
  EXPECT_EQ(s.canary.variants[1].allocator.mimalloc_options.at("purge_delay"), "0");
  EXPECT_EQ(s.canary.variants[2].allocator.tcmalloc_release_rate, 4.0);
  EXPECT_EQ(s.canary.variants[2].allocator.tcmalloc_max_total_thread_cache, 32LL << 20);
  EXPECT_EQ(s.canary.node_selector.at("node.kubernetes.io/instance-type"), "big");
  EXPECT_EQ(s.canary.production_cpus, 64);
  EXPECT_EQ(s.rollout.mode, RolloutMode::kEnforce);
  EXPECT_TRUE(s.guard.enabled);
  EXPECT_EQ(s.guard.threshold_bytes, 1LL << 30);
  EXPECT_EQ(s.guard.action, GuardAction::kBackpressure);
}

TEST(ParseAllocatorPolicyTest, MaxDurationDefaultsToThirtyMinutesOrTheDuration) {
  json object = ValidPolicyForTest();
  object["spec"]["canary"]["duration"] = "15m";
  auto policy = ParseAllocatorPolicy(object);
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  EXPECT_EQ(policy->spec.canary.max_duration, std::chrono::minutes(30));
  // The default is not written back: policies from before the field keep
  // their canaries' proof keys.
  const auto canary_json = [](const CanarySpec& canary) {
    ReplayCanarySpec spec;
    spec.canary = canary;
    return ReplayCanarySpecToJson(spec)["canary"];
  };
  EXPECT_FALSE(canary_json(policy->spec.canary).contains("maxDuration"));
  object["spec"]["canary"]["duration"] = "45m";
  policy = ParseAllocatorPolicy(object);
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  EXPECT_EQ(policy->spec.canary.max_duration, std::chrono::minutes(45));
  object["spec"]["canary"]["maxDuration"] = "1h";
  policy = ParseAllocatorPolicy(object);
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  EXPECT_EQ(policy->spec.canary.max_duration, std::chrono::hours(1));
  EXPECT_EQ(canary_json(policy->spec.canary)["maxDuration"], "1h");
  object["spec"]["canary"]["maxDuration"] = "30m";
  EXPECT_EQ(ParseAllocatorPolicy(object).status().message(),
            "spec.canary.maxDuration: must not be shorter than duration");
}

TEST(ParseAllocatorPolicyTest, InconclusiveRerunsDefaultsToOneAndIsWrittenOnlyWhenOther) {
  json object = ValidPolicyForTest();
  auto policy = ParseAllocatorPolicy(object);
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  EXPECT_EQ(policy->spec.canary.inconclusive_reruns, 1);
  ReplayCanarySpec spec;
  spec.canary = policy->spec.canary;
  EXPECT_FALSE(ReplayCanarySpecToJson(spec)["canary"].contains("inconclusiveReruns"));
  object["spec"]["canary"]["inconclusiveReruns"] = 0;
  policy = ParseAllocatorPolicy(object);
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  EXPECT_EQ(policy->spec.canary.inconclusive_reruns, 0);
  spec.canary = policy->spec.canary;
  EXPECT_EQ(ReplayCanarySpecToJson(spec)["canary"]["inconclusiveReruns"], 0);
  object["spec"]["canary"]["inconclusiveReruns"] = "2";
  EXPECT_EQ(ParseAllocatorPolicy(object).status().message(),
            "spec.canary.inconclusiveReruns: must be an integer, got \"2\"");
}

// canary.bakeOff without variants runs the matrix `replay --bake-off` runs,
// less the candidate's own allocator; given variants are the matrix instead.
TEST(ParseAllocatorPolicyTest, BakeOffRunsTheMatrixLessTheCandidate) {
  json object = ValidPolicyForTest();  // allocator: jemalloc
  auto policy = ParseAllocatorPolicy(object);
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  EXPECT_FALSE(policy->spec.canary.bake_off);
  object["spec"]["canary"]["bakeOff"] = true;
  policy = ParseAllocatorPolicy(object);
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  EXPECT_TRUE(policy->spec.canary.bake_off);
  std::vector<std::string> names;
  for (const VariantSpec& v : policy->spec.canary.variants) names.push_back(v.name);
  EXPECT_THAT(names, testing::ElementsAre("glibc", "glibc-arena2", "jemalloc-bg-decay1s",
                                          "mimalloc", "tcmalloc"));
  const std::vector<VariantSpec>& v = policy->spec.canary.variants;
  EXPECT_EQ(v[1].allocator, (AllocatorSpec{.name = Allocator::kGlibc, .glibc_arena_max = 2}));
  EXPECT_EQ(v[2].allocator.name, Allocator::kJemalloc);
  EXPECT_EQ(v[2].allocator.jemalloc_malloc_conf,
            "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:1000");
  // A glibc policy on musl: the plain glibc entry is the candidate, and
  // tcmalloc has no musl build.
  object["spec"]["allocator"] = {{"name", "glibc"}};
  object["spec"]["libc"] = "musl";
  policy = ParseAllocatorPolicy(object);
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  names.clear();
  for (const VariantSpec& variant : policy->spec.canary.variants) names.push_back(variant.name);
  EXPECT_THAT(names,
              testing::ElementsAre("glibc-arena2", "jemalloc", "jemalloc-bg-decay1s", "mimalloc"));
  // Variants of its own: those are ranked, the matrix is not run.
  object["spec"]["canary"]["variants"] =
      json::parse(R"([{"name":"je","allocator":{"name":"jemalloc"}}])");
  policy = ParseAllocatorPolicy(object);
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  ASSERT_EQ(policy->spec.canary.variants.size(), 1u);
  EXPECT_EQ(policy->spec.canary.variants[0].name, "je");
  object["spec"]["canary"]["bakeOff"] = "yes";
  EXPECT_EQ(ParseAllocatorPolicy(object).status().message(),
            "spec.canary.bakeOff: must be true or false, got \"yes\"");
}

// The canary's snapshot records the bake-off and its expanded matrix; a
// canary that is no bake-off does not write the field (older canaries' keys
// stay as they were).
TEST(ParseAllocatorPolicyTest, BakeOffIsWrittenIntoTheCanaryOnlyWhenOn) {
  json object = ValidPolicyForTest();
  auto policy = ParseAllocatorPolicy(object);
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  ReplayCanarySpec spec;
  spec.canary = policy->spec.canary;
  EXPECT_FALSE(ReplayCanarySpecToJson(spec)["canary"].contains("bakeOff"));
  object["spec"]["canary"]["bakeOff"] = true;
  policy = ParseAllocatorPolicy(object);
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  spec.canary = policy->spec.canary;
  spec.candidate_allocator = policy->spec.allocator;
  spec.pod_template_json = R"({"spec":{"containers":[{"name":"app"}]}})";
  json written = ReplayCanarySpecToJson(spec);
  EXPECT_EQ(written["canary"]["bakeOff"], true);
  EXPECT_EQ(written["canary"]["variants"].size(), 5u);
  json canary = {{"apiVersion", kApiVersion},
                 {"kind", "ReplayCanary"},
                 {"metadata", {{"name", "c"}, {"namespace", "n"}}},
                 {"spec", written}};
  auto parsed = ParseReplayCanary(canary);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->spec.canary, spec.canary);
}

TEST(ParseAllocatorPolicyTest, TheValidTestPolicyParses) {
  auto policy = ParseAllocatorPolicy(ValidPolicyForTest());
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
}

// The same table the API server must refuse (crd_controlplane_test.cc): the
// parser refuses each too, naming the same field.
TEST(ParseAllocatorPolicyTest, RefusesEveryInvalidPolicyNamingTheField) {
  for (const InvalidCaseForTest& c : InvalidPolicyCasesForTest()) {
    if (c.server_only) continue;
    json object = ValidPolicyForTest();
    object.merge_patch(json::parse(c.patch));
    auto policy = ParseAllocatorPolicy(object);
    ASSERT_FALSE(policy.ok()) << c.name;
    EXPECT_EQ(policy.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(policy.status().message().find(c.field), std::string::npos)
        << c.name << ": " << policy.status().message();
  }
}

TEST(ParseAllocatorPolicyTest, ErrorsSayWhatIsWrong) {
  json object = ValidPolicyForTest();
  object["spec"]["canary"]["load"]["requests"][2]["weight"] = -1;
  EXPECT_EQ(ParseAllocatorPolicy(object).status().message(),
            "spec.canary.load.requests[2].weight: must be positive, got -1");
  object = ValidPolicyForTest();
  object["spec"]["allocator"]["glibc"] = {{"arenaMax", 2}};
  EXPECT_EQ(ParseAllocatorPolicy(object).status().message(),
            "spec.allocator.glibc: glibc tunables are allowed only when name is glibc");
  object = ValidPolicyForTest();
  object["spec"]["limits"]["memory"] = "2GB";
  EXPECT_EQ(ParseAllocatorPolicy(object).status().message(),
            "spec.limits.memory: quantity \"2GB\" has unknown suffix \"GB\" (use Ki, Mi, Gi, Ti, "
            "k, M or G)");
}

TEST(ParseAllocatorPolicyTest, WrongKindAndMissingPartsAreRefused) {
  json object = ValidPolicyForTest();
  object["kind"] = "ReplayCanary";
  EXPECT_EQ(ParseAllocatorPolicy(object).status().message(),
            "kind: must be AllocatorPolicy, got \"ReplayCanary\"");
  EXPECT_EQ(ParseAllocatorPolicy(json::object()).status().message(), "metadata: is required");
  object = ValidPolicyForTest();
  object.erase("spec");
  EXPECT_EQ(ParseAllocatorPolicy(object).status().message(), "spec: is required");
}

// Replaces, one at a time, every value in `object` (at any depth) by each of
// a set of wrongly shaped values, and calls f on each mutant.
void ForEachMutant(const json& object, const std::function<void(const json&)>& f) {
  const json kWrong[] = {nullptr,
                         0,
                         -1,
                         1.5,
                         1e300,
                         "x",
                         "",
                         true,
                         json::array(),
                         json::object(),
                         18446744073709551615ULL,
                         json::array({nullptr}),
                         json::parse(R"({"a": [1, {"b": null}]})")};
  json flat = object.flatten();
  for (const auto& [pointer, unused] : flat.items()) {
    // Every prefix of the pointer too, so whole objects and lists are replaced.
    json::json_pointer p(pointer);
    while (!p.empty()) {
      for (const json& wrong : kWrong) {
        json mutant = object;
        mutant[p] = wrong;
        f(mutant);
      }
      p = p.parent_pointer();
    }
  }
  for (const json& wrong : kWrong) f(wrong);
}

TEST(ParseAllocatorPolicyTest, NeverThrowsOnMalformedShapes) {
  int parsed = 0;
  int refused = 0;
  json full = ValidPolicyForTest();
  full["spec"]["guard"] = {{"enabled", true}, {"threshold", "1Gi"}, {"action", "Restart"}};
  full["spec"]["stats"] = {{"enabled", false}};
  full["spec"]["canary"]["variants"] =
      json::parse(R"([{"name": "g", "allocator": {"name": "glibc", "glibc": {"arenaMax": 2}}}])");
  full["spec"]["selector"]["matchExpressions"] =
      json::parse(R"([{"key": "k", "operator": "In", "values": ["v"]}])");
  ForEachMutant(full, [&](const json& mutant) {
    EXPECT_NO_THROW({
      auto r = ParseAllocatorPolicy(mutant);
      if (r.ok()) {
        ++parsed;
      } else {
        ++refused;
        EXPECT_FALSE(r.status().message().empty());
      }
    });
  });
  EXPECT_GT(refused, 100);  // the mutants really were malformed
  EXPECT_GT(parsed, 0);     // and nulls (absent fields) still take defaults
}

TEST(ParseReplayCanaryTest, NeverThrowsOnMalformedShapes) {
  int refused = 0;
  ForEachMutant(ValidCanaryForTest(), [&](const json& mutant) {
    EXPECT_NO_THROW(refused += ParseReplayCanary(mutant).ok() ? 0 : 1);
  });
  EXPECT_GT(refused, 50);
}

TEST(ParseReplayCanaryTest, RefusesEveryInvalidCanaryNamingTheField) {
  ASSERT_TRUE(ParseReplayCanary(ValidCanaryForTest()).ok());
  for (const InvalidCaseForTest& c : InvalidCanaryCasesForTest()) {
    json object = ValidCanaryForTest();
    object.merge_patch(json::parse(c.patch));
    auto canary = ParseReplayCanary(object);
    ASSERT_FALSE(canary.ok()) << c.name;
    EXPECT_NE(canary.status().message().find(c.field), std::string::npos)
        << c.name << ": " << canary.status().message();
  }
}

ReplayCanarySpec FullCanarySpec() {
  ReplayCanarySpec spec;
  spec.policy = "web-policy";
  spec.target_kind = "StatefulSet";
  spec.target_name = "web";
  spec.template_hash = "7f9c";
  spec.pod_template_json =
      R"({"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web"}]}})";
  spec.candidate_allocator.name = Allocator::kGlibc;
  spec.candidate_allocator.glibc_arena_max = 4;
  spec.libc = Libc::kGlibc;
  spec.candidate_allocator.glibc_trim_threshold = 0;
  spec.candidate_allocator.glibc_mmap_threshold = 1 << 20;
  spec.canary.duration = std::chrono::minutes(20);
  spec.canary.sample_interval = milliseconds(1500);
  spec.canary.load.port = 9090;
  spec.canary.load.rate = 12.5;
  spec.canary.load.seed = 7;
  spec.canary.load.requests = {
      {"a", "PUT", "/a/{key}", "{\"k\": {key}}", "application/json", 2, 100, {200, 201}}};
  spec.canary.variants = {
      {"tc",
       {.name = Allocator::kTcmalloc,
        .tcmalloc_release_rate = 0.5,
        .tcmalloc_max_total_thread_cache = 48LL << 20}},
      {"mi", {.name = Allocator::kMimalloc, .mimalloc_options = {{"purge_delay", "10"}}}},
  };
  spec.canary.node_selector = {{"pool", "big"}};
  spec.canary.production_cpus = 32;
  spec.limits.memory_bytes = 3LL << 29;
  spec.limits.max_floor_slope_bytes_per_hour = 100'000'000;
  return spec;
}

TEST(ReplayCanarySpecToJsonTest, RoundTripsThroughTheParser) {
  for (const ReplayCanarySpec& spec :
       {FullCanarySpec(), [] {
          ReplayCanarySpec s;  // defaults, with only what the parser requires
          s.pod_template_json = R"({"spec":{"containers":[{"name":"app"}]}})";
          s.canary.load.requests = {{.name = "r", .path = "/"}};
          return s;
        }()}) {
    json object = {{"apiVersion", kApiVersion},
                   {"kind", "ReplayCanary"},
                   {"metadata", {{"name", "c"}, {"namespace", "n"}}},
                   {"spec", ReplayCanarySpecToJson(spec)}};
    auto parsed = ParseReplayCanary(object);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString() << "\n" << object.dump(2);
    EXPECT_EQ(json::parse(parsed->spec.pod_template_json), json::parse(spec.pod_template_json));
    parsed->spec.pod_template_json = spec.pod_template_json;
    EXPECT_EQ(parsed->spec, spec) << object.dump(2);
  }
}

TEST(ReplayCanarySpecToJsonTest, WritesTheCrdShape) {
  json j = ReplayCanarySpecToJson(FullCanarySpec());
  EXPECT_EQ(j["policyRef"], json({{"name", "web-policy"}}));
  EXPECT_EQ(j["target"], json({{"kind", "StatefulSet"}, {"name", "web"}}));
  EXPECT_EQ(j["candidate"]["allocator"],
            json::parse(R"({"name": "glibc", "glibc": {"arenaMax": 4, "trimThreshold": "0",
                                                       "mmapThreshold": "1Mi"}})"));
  EXPECT_EQ(j["canary"]["duration"], "20m");
  EXPECT_EQ(j["canary"]["sampleInterval"], "1500ms");
  EXPECT_EQ(j["canary"]["load"]["requests"][0]["contentType"], "application/json");
  EXPECT_EQ(j["canary"]["variants"][0]["allocator"]["tcmalloc"]["maxTotalThreadCacheBytes"],
            "48Mi");
  EXPECT_EQ(j["limits"], json::parse(R"({"memory": "1536Mi",
                                         "maxFloorSlopePerHour": "100000000"})"));
}

TEST(AllocatorSpecToJsonTest, OnlyTheNamedAllocatorsTunables) {
  AllocatorSpec a{.name = Allocator::kJemalloc,
                  .glibc_arena_max = 2,  // not jemalloc's: not written
                  .jemalloc_malloc_conf = "background_thread:true"};
  EXPECT_EQ(AllocatorSpecToJson(a), json::parse(R"({"name": "jemalloc",
                            "jemalloc": {"mallocConf": "background_thread:true"}})"));
  EXPECT_EQ(AllocatorSpecToJson(AllocatorSpec{.name = Allocator::kMimalloc}),
            json({{"name", "mimalloc"}}));
}

TEST(SelectorTest, MatchesLikeKubernetes) {
  LabelSelector s{.match_labels = {{"app", "web"}},
                  .match_expressions = {{"tier", "In", {"front", "edge"}},
                                        {"canary", "DoesNotExist", {}},
                                        {"zone", "NotIn", {"a"}},
                                        {"team", "Exists", {}}}};
  struct Case {
    std::map<std::string, std::string> labels;
    bool want;
  };
  const Case cases[] = {
      {{{"app", "web"}, {"tier", "front"}, {"team", "x"}}, true},
      {{{"app", "web"}, {"tier", "edge"}, {"team", "x"}, {"zone", "b"}}, true},
      {{{"app", "web"}, {"tier", "back"}, {"team", "x"}}, false},                   // In
      {{{"app", "api"}, {"tier", "front"}, {"team", "x"}}, false},                  // matchLabels
      {{{"app", "web"}, {"tier", "front"}, {"team", "x"}, {"canary", ""}}, false},  // DoesNotExist
      {{{"app", "web"}, {"tier", "front"}, {"team", "x"}, {"zone", "a"}}, false},   // NotIn
      {{{"app", "web"}, {"tier", "front"}}, false},                                 // Exists
      {{}, false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(SelectorMatches(s, c.labels), c.want) << ::testing::PrintToString(c.labels);
  }
  EXPECT_TRUE(SelectorMatches(LabelSelector{}, {{"any", "thing"}}));
  EXPECT_FALSE(SelectorMatches(LabelSelector{.match_expressions = {{"k", "Near", {"v"}}}}, {}));
}

TEST(SelectorTest, SelectorStringIsTheListQuerySyntax) {
  LabelSelector s{.match_labels = {{"app", "web"}, {"app.kubernetes.io/part-of", "shop"}},
                  .match_expressions = {{"tier", "In", {"front", "edge"}},
                                        {"zone", "NotIn", {"a"}},
                                        {"team", "Exists", {}},
                                        {"canary", "DoesNotExist", {}}}};
  EXPECT_EQ(SelectorString(s),
            "app=web,app.kubernetes.io/part-of=shop,tier in (front,edge),zone notin (a),team,"
            "!canary");
  EXPECT_EQ(SelectorString(LabelSelector{}), "");
}

TEST(RenderLoadFileTest, ReplayParsesItBackToTheSameLoad) {
  LoadSpec load;
  load.port = 8081;
  load.rate = 33.3;
  load.workers = 7;
  load.seed = 123456789012345ULL;
  load.arrival = "uniform";
  load.ready_path = "/ready?x=1#y";
  load.ready_timeout = std::chrono::minutes(3);
  load.late_after = milliseconds(750);
  load.request_timeout = std::chrono::seconds(12);
  load.requests = {
      {"plain", "GET", "/items/{key}", "", "", 3, 1000, {200}},
      {"tricky: \"quoted\" #not-a-comment",
       "POST",
       "/a b/'c'",
       "line1\nline2\t\"{key}\" \\ \x01 é",
       "application/json; charset=utf-8",
       0.25,
       1,
       {201, 409, 500}},
      {"yes", "DELETE", "/- [x]: {y}", "null", "", 1, 1, {204}},
  };
  std::string text = RenderLoadFile(load);
  auto parsed = replay::ParseLoadSpec(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString() << "\n" << text;
  EXPECT_EQ(parsed->base_url, "http://127.0.0.1:8081");
  EXPECT_EQ(parsed->rate, 33.3);
  EXPECT_EQ(parsed->workers, 7);
  EXPECT_EQ(parsed->seed, 123456789012345ULL);
  EXPECT_EQ(parsed->arrival, replay::Arrival::kUniform);
  EXPECT_EQ(parsed->ready.path, load.ready_path);
  EXPECT_EQ(parsed->ready.timeout, load.ready_timeout);
  EXPECT_EQ(parsed->late_after, load.late_after);
  EXPECT_EQ(parsed->request_timeout, load.request_timeout);
  ASSERT_EQ(parsed->requests.size(), load.requests.size());
  for (size_t i = 0; i < load.requests.size(); ++i) {
    const replay::RequestSpec& got = parsed->requests[i];
    const LoadRequestSpec& want = load.requests[i];
    EXPECT_EQ(got.name, want.name);
    EXPECT_EQ(got.method, want.method);
    EXPECT_EQ(got.path, want.path);
    EXPECT_EQ(got.body, want.body);
    EXPECT_EQ(got.content_type, want.content_type);
    EXPECT_EQ(got.weight, want.weight);
    EXPECT_EQ(got.key_space, want.key_space);
    EXPECT_EQ(got.expect, want.expect);
  }
}

TEST(RenderLoadFileTest, TheDefaultLoadOfAParsedPolicyRenders) {
  auto policy = ParseAllocatorPolicy(ValidPolicyForTest());
  ASSERT_TRUE(policy.ok());
  auto parsed = replay::ParseLoadSpec(RenderLoadFile(policy->spec.canary.load));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->base_url, "http://127.0.0.1:8080");
  EXPECT_EQ(parsed->rate, 10);
  EXPECT_EQ(parsed->ready.timeout, std::chrono::seconds(60));
  EXPECT_EQ(parsed->requests.size(), 3u);
}

TEST(NamesTest, RoundTrip) {
  for (Allocator a :
       {Allocator::kGlibc, Allocator::kJemalloc, Allocator::kMimalloc, Allocator::kTcmalloc}) {
    EXPECT_EQ(AllocatorFromName(AllocatorName(a)), a);
  }
  for (RolloutMode m : {RolloutMode::kEnforce, RolloutMode::kAudit, RolloutMode::kOff}) {
    EXPECT_EQ(RolloutModeFromName(RolloutModeName(m)), m);
  }
  for (GuardAction g : {GuardAction::kNone, GuardAction::kBackpressure, GuardAction::kRestart}) {
    EXPECT_EQ(GuardActionFromName(GuardActionName(g)), g);
  }
  EXPECT_EQ(AllocatorName(Allocator::kJemalloc), "jemalloc");
  EXPECT_EQ(RolloutModeName(RolloutMode::kEnforce), "Enforce");
  EXPECT_EQ(GuardActionName(GuardAction::kBackpressure), "Backpressure");
  EXPECT_FALSE(AllocatorFromName("Jemalloc"));
  EXPECT_EQ(MimallocOptionEnvName("purge_delay"), "MIMALLOC_PURGE_DELAY");
}

}  // namespace
}  // namespace allocguard::api
