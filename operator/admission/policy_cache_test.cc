#include "operator/admission/policy_cache.h"

#include <gtest/gtest.h>

#include "controllers/reconcilers.h"
#include "operator/admission/policies.h"

namespace allocguard::admission {
namespace {

using nlohmann::json;

json Policy(const std::string& name, const std::string& rv, const std::string& app) {
  return {
      {"apiVersion", "allocguard.io/v1alpha1"},
      {"kind", "AllocatorPolicy"},
      {"metadata", {{"name", name}, {"namespace", "shop"}, {"resourceVersion", rv}}},
      {"spec",
       {{"selector", {{"matchLabels", {{"app", app}}}}},
        {"allocator", {{"name", "jemalloc"}}},
        {"canary", {{"load", {{"port", 8080}, {"requests", {{{"name", "a"}, {"path", "/"}}}}}}}}}}};
}

std::vector<std::string> Apps(const std::vector<api::AllocatorPolicy>& policies) {
  std::vector<std::string> out;
  out.reserve(policies.size());
  for (const api::AllocatorPolicy& p : policies) {
    out.push_back(p.spec.selector.match_labels.at("app"));
  }
  return out;
}

class PolicyCacheTest : public ::testing::Test {
 protected:
  PolicyCacheTest() { controllers::AddNamespaceIndex(store_); }
  kube::Store store_;
  PolicyCache cache_{&store_};
};

TEST_F(PolicyCacheTest, ParsesEachPolicyOncePerVersion) {
  store_.Upsert(Policy("a", "1", "web"));
  store_.Upsert(Policy("b", "2", "db"));
  EXPECT_EQ(Apps(cache_.InNamespace("shop")), (std::vector<std::string>{"web", "db"}));
  EXPECT_EQ(Apps(cache_.InNamespace("shop")), (std::vector<std::string>{"web", "db"}));
  EXPECT_EQ(cache_.parses(), 2);

  // A new version is parsed again; the other policy is not.
  store_.Upsert(Policy("a", "3", "shop"));
  EXPECT_EQ(Apps(cache_.InNamespace("shop")), (std::vector<std::string>{"shop", "db"}));
  EXPECT_EQ(cache_.parses(), 3);
  // A relist hands out new objects of the same versions: nothing to parse.
  store_.Replace({Policy("a", "3", "shop"), Policy("b", "2", "db")});
  EXPECT_EQ(Apps(cache_.InNamespace("shop")), (std::vector<std::string>{"shop", "db"}));
  EXPECT_EQ(cache_.parses(), 3);
}

TEST_F(PolicyCacheTest, AnswersAsParsePoliciesDoesForUnparsableAndDeletedPolicies) {
  json broken = Policy("broken", "4", "web");
  broken["spec"]["allocator"] = "jemalloc";  // hostile: a string, not an object
  store_.Upsert(Policy("a", "1", "web"));
  store_.Upsert(broken);
  EXPECT_EQ(cache_.InNamespace("shop"),
            ParsePolicies(store_.ByIndex(controllers::kNamespaceIndex, "shop").Copies()));
  EXPECT_EQ(Apps(cache_.InNamespace("shop")), (std::vector<std::string>{"web"}));
  EXPECT_EQ(cache_.parses(), 2);  // the broken one is not parsed again either

  store_.Remove(Policy("a", "5", "web"));
  EXPECT_TRUE(cache_.InNamespace("shop").empty());
  EXPECT_TRUE(cache_.InNamespace("elsewhere").empty());
}

TEST_F(PolicyCacheTest, APolicyWithoutAVersionIsReusedOnlyWhileTheStoreHoldsThatObject) {
  store_.Upsert(Policy("a", "", "web"));
  EXPECT_EQ(Apps(cache_.InNamespace("shop")), (std::vector<std::string>{"web"}));
  store_.Upsert(Policy("a", "", "db"));
  EXPECT_EQ(Apps(cache_.InNamespace("shop")), (std::vector<std::string>{"db"}));
  EXPECT_EQ(cache_.parses(), 2);
}

}  // namespace
}  // namespace allocguard::admission
