#include "operator/api/json_patch.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <random>
#include <string>
#include <vector>

namespace allocguard::api {
namespace {

using nlohmann::json;

// JsonPatchBetween must be json::diff, operation for operation: the webhooks
// answered with json::diff before, and their tests and the API server's
// audit logs show its patches.
void ExpectSameAsDiff(const json& source, const json& target) {
  const json ours = JsonPatchBetween(source, target);
  EXPECT_EQ(ours, json::diff(source, target))
      << "source " << source.dump() << "\ntarget " << target.dump();
  EXPECT_EQ(source.patch(ours), target) << ours.dump();
}

TEST(JsonPatchBetweenTest, WritesTheOperationsJsonDiffWrites) {
  const json pod = {
      {"metadata", {{"name", "web"}, {"labels", {{"app", "web"}}}}},
      {"spec",
       {{"containers", {{{"name", "web"}, {"env", {{{"name", "A"}, {"value", "1"}}}}}}},
        {"volumes", json::array()}}}};
  json injected = pod;
  injected["metadata"]["annotations"]["allocguard.io/injected"] = "jemalloc";
  injected["metadata"]["labels"]["allocguard.io/guard"] = "true";
  injected["spec"]["containers"][0]["env"].push_back({{"name", "LD_PRELOAD"}, {"value", "/x"}});
  injected["spec"]["containers"].push_back({{"name", "allocguard-guard"}});
  injected["spec"]["volumes"].push_back({{"name", "allocguard-lib"}});
  injected["spec"]["shareProcessNamespace"] = true;

  const json patch = JsonPatchBetween(pod, injected);
  // The members the source has come first, in key order, then those it
  // lacks: json::diff's two passes.
  const json expected = json::parse(R"([
    {"op":"add","path":"/metadata/labels/allocguard.io~1guard","value":"true"},
    {"op":"add","path":"/metadata/annotations","value":{"allocguard.io/injected":"jemalloc"}},
    {"op":"add","path":"/spec/containers/0/env/-","value":{"name":"LD_PRELOAD","value":"/x"}},
    {"op":"add","path":"/spec/containers/-","value":{"name":"allocguard-guard"}},
    {"op":"add","path":"/spec/volumes/-","value":{"name":"allocguard-lib"}},
    {"op":"add","path":"/spec/shareProcessNamespace","value":true}])");
  EXPECT_EQ(patch, expected) << patch.dump();
  ExpectSameAsDiff(pod, injected);
}

TEST(JsonPatchBetweenTest, EqualDocumentsNeedNoOperation) {
  const json doc = {{"a", {1, 2, {{"b", nullptr}}}}, {"c", "d"}};
  EXPECT_EQ(JsonPatchBetween(doc, doc), json::array());
  // 1, 1u and 1.0 are equal to json::diff, whatever their stored types.
  EXPECT_EQ(JsonPatchBetween(json{{"n", 1}}, json{{"n", 1.0}}), json::array());
  EXPECT_EQ(JsonPatchBetween(json{{"n", 1}}, json{{"n", 1u}}), json::array());
  ExpectSameAsDiff(json{{"n", 1}}, json{{"n", 1.5}});
}

TEST(JsonPatchBetweenTest, RemovesFromTheLastIndexDown) {
  const json patch = JsonPatchBetween(json{{"l", {1, 2, 3, 4}}}, json{{"l", {1}}});
  EXPECT_EQ(patch, json::parse(R"([{"op":"remove","path":"/l/3"},{"op":"remove","path":"/l/2"},
                                   {"op":"remove","path":"/l/1"}])"));
  ExpectSameAsDiff(json{{"l", {1, 2, 3, 4}}}, json{{"l", {1}}});
  ExpectSameAsDiff(json{{"l", {1, {{"x", 1}}, 3}}}, json{{"l", {2, {{"x", 2}}}}});
}

TEST(JsonPatchBetweenTest, EscapesKeysAndReplacesAcrossTypes) {
  ExpectSameAsDiff(json{{"a/b~c", 1}, {"gone", true}}, json{{"a/b~c", 2}, {"new~/", {1}}});
  ExpectSameAsDiff(json{{"x", {{"y", 1}}}}, json{{"x", {1, 2}}});
  ExpectSameAsDiff(json{{"x", "s"}}, json{{"x", nullptr}});
  ExpectSameAsDiff(json::array({1, 2}), json{{"root", "replaced"}});
  ExpectSameAsDiff(json("a"), json("b"));
  ExpectSameAsDiff(json{{"", {{"", 1}}}}, json{{"", {{"", 2}}}});
}

// Random documents and random edits of them, as the webhooks make (members
// added, changed and removed, list entries appended, changed and dropped).
json RandomValue(std::mt19937_64& rng, int depth) {
  std::uniform_int_distribution<int> kind(0, depth <= 0 ? 3 : 5);
  switch (kind(rng)) {
    case 0:
      return nullptr;
    case 1:
      return static_cast<int>(rng() % 5);
    case 2:
      return std::string(1 + rng() % 3, static_cast<char>('a' + rng() % 3));
    case 3:
      return rng() % 2 == 0;
    case 4: {
      json list = json::array();
      for (size_t i = rng() % 4; i > 0; --i) list.push_back(RandomValue(rng, depth - 1));
      return list;
    }
    default: {
      static const std::vector<std::string> keys = {"a", "b", "c/d", "e~f", "~1", ""};
      json object = json::object();
      for (size_t i = rng() % 4; i > 0; --i) {
        object[keys[rng() % keys.size()]] = RandomValue(rng, depth - 1);
      }
      return object;
    }
  }
}

void RandomEdit(json& value, std::mt19937_64& rng, int depth) {
  if (value.is_object() && !value.empty() && rng() % 3 != 0) {
    auto it = value.begin();
    std::advance(it, static_cast<std::ptrdiff_t>(rng() % value.size()));
    if (rng() % 4 == 0) {
      value.erase(it);
    } else {
      RandomEdit(*it, rng, depth - 1);
    }
    if (rng() % 4 == 0) value["added"] = RandomValue(rng, depth - 1);
    return;
  }
  if (value.is_array() && !value.empty() && rng() % 3 != 0) {
    const size_t i = rng() % value.size();
    switch (rng() % 4) {
      case 0:
        value.erase(value.begin() + static_cast<std::ptrdiff_t>(i), value.end());
        break;
      case 1:
        value.push_back(RandomValue(rng, depth - 1));
        break;
      default:
        RandomEdit(value[i], rng, depth - 1);
    }
    return;
  }
  value = RandomValue(rng, depth);
}

TEST(JsonPatchBetweenTest, MatchesJsonDiffOnRandomEdits) {
  std::mt19937_64 rng(20261205);
  for (int round = 0; round < 3000; ++round) {
    const json source = RandomValue(rng, 4);
    json target = source;
    for (int edits = 1 + static_cast<int>(rng() % 3); edits > 0; --edits) {
      RandomEdit(target, rng, 4);
    }
    ExpectSameAsDiff(source, target);
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace allocguard::api
