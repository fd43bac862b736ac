#include "operator/kube/pruned_parse.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace allocguard::kube {
namespace {

// A path as text, for assertions: "spec.containers[].name".
std::string Text(const MemberPath& path) {
  std::string out;
  for (const PathStep& step : path) {
    if (step.element) {
      out += "[]";
    } else {
      if (!out.empty()) out += ".";
      out += step.key;
    }
  }
  return out;
}

TEST(ParsePrunedTest, WithoutAFilterItIsTheParser) {
  const std::string text = R"({"a":[1,{"b":null}],"c":"d","e":{"f":2.5}})";
  EXPECT_EQ(ParsePruned(text, {}, nullptr), Object::parse(text));
  EXPECT_EQ(ParsePruned(text, {}, [](const MemberPath&) { return true; }), Object::parse(text));
}

TEST(ParsePrunedTest, TextThatIsNoJsonIsDiscardedNotThrown) {
  for (const char* text : {"", "{", R"({"a":})", "not json", R"({"a":1}})"}) {
    EXPECT_TRUE(ParsePruned(text, {}, [](const MemberPath&) { return false; }).is_discarded())
        << text;
  }
}

TEST(ParsePrunedTest, DropsAMemberWithEverythingInItAndKeepsItsSiblings) {
  const std::string text =
      R"({"metadata":{"name":"a","managedFields":[{"manager":"kubectl","fieldsV1":{"f:spec":{}}}],)"
      R"("labels":{"app":"web"}},"spec":{"replicas":2}})";
  const Object pruned = ParsePruned(
      text, {}, [](const MemberPath& path) { return Text(path) != "metadata.managedFields"; });
  EXPECT_EQ(pruned, Object::parse(R"({"metadata":{"name":"a","labels":{"app":"web"}},
                                      "spec":{"replicas":2}})"));
}

TEST(ParsePrunedTest, PathsStartAtTheRootAndNameArrayElements) {
  // A list page: each item is offered from its own root; the list's own
  // metadata is outside the root and kept whatever the filter says.
  const std::string text =
      R"({"metadata":{"continue":"c1"},"items":[{"a":{"b":[{"c":1,"d":2}],"e":3}},)"
      R"({"a":{"x":{"y":{"z":1}},"b":[]}}],"kind":"List"})";
  std::vector<std::string> seen;
  const Object pruned = ParsePruned(text, {{"items"}, {{}, true}}, [&](const MemberPath& path) {
    seen.push_back(Text(path));
    return Text(path) != "a.b[].d" && Text(path) != "a.x";
  });
  EXPECT_EQ(pruned,
            Object::parse(R"({"metadata":{"continue":"c1"},"items":[{"a":{"b":[{"c":1}],"e":3}},
                                      {"a":{"b":[]}}],"kind":"List"})"));
  // Members inside a dropped one may be offered too (a.x.y, a.x.y.z); what
  // matters is that the paths after it are right again.
  std::vector<std::string> outside_dropped;
  for (const std::string& p : seen) {
    if (p.rfind("a.x.", 0) != 0) outside_dropped.push_back(p);
  }
  EXPECT_EQ(outside_dropped,
            (std::vector<std::string>{"a", "a.b", "a.b[].c", "a.b[].d", "a.e", "a", "a.x", "a.b"}));
}

TEST(ParsePrunedTest, MembersOutsideTheRootAreKept) {
  const std::string text = R"({"type":"ADDED","object":{"spec":{"a":1},"status":{}},"spec":{}})";
  const Object pruned =
      ParsePruned(text, {{"object"}}, [](const MemberPath& path) { return Text(path) != "spec"; });
  EXPECT_EQ(pruned, Object::parse(R"({"type":"ADDED","object":{"status":{}},"spec":{}})"));
  // No root, or the root where no key leads: nothing is offered or pruned.
  for (const char* other : {R"({"type":"ADDED"})", R"([{"object":{"spec":1}}])"}) {
    EXPECT_EQ(ParsePruned(other, {{"object"}}, [](const MemberPath&) { return false; }),
              Object::parse(other))
        << other;
  }
  // A root that is an array: its elements' members are offered as such.
  std::vector<std::string> seen;
  ParsePruned(R"({"object":[{"spec":1}]})", {{"object"}}, [&](const MemberPath& path) {
    seen.push_back(Text(path));
    return true;
  });
  EXPECT_EQ(seen, std::vector<std::string>{"[].spec"});
}

}  // namespace
}  // namespace allocguard::kube
