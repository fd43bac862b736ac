#include "operator/api/names.h"

#include <gtest/gtest.h>

#include <string>

namespace allocguard::api {
namespace {

TEST(NamesTest, DnsLabelAsKubernetesValidatesIt) {
  EXPECT_TRUE(IsDnsLabel("a"));
  EXPECT_TRUE(IsDnsLabel("ratchet-db-0"));
  EXPECT_TRUE(IsDnsLabel(std::string(63, 'a')));
  EXPECT_FALSE(IsDnsLabel(std::string(64, 'a'))) << "longer than 63";
  EXPECT_FALSE(IsDnsLabel("abcd", 3)) << "longer than the caller's limit";
  EXPECT_FALSE(IsDnsLabel(""));
  EXPECT_FALSE(IsDnsLabel("-a"));
  EXPECT_FALSE(IsDnsLabel("a-"));
  EXPECT_FALSE(IsDnsLabel("A"));
  EXPECT_FALSE(IsDnsLabel("a.b")) << "a dot makes a subdomain, not a label";
  EXPECT_FALSE(IsDnsLabel("a_b"));
  EXPECT_FALSE(IsDnsLabel(std::string("a\0b", 3)));
}

TEST(NamesTest, DnsSubdomainAsKubernetesValidatesIt) {
  EXPECT_TRUE(IsDnsSubdomain("ratchet-agent"));
  EXPECT_TRUE(IsDnsSubdomain("a.b-c.d"));
  EXPECT_TRUE(IsDnsSubdomain(std::string(253, 'a')));
  EXPECT_FALSE(IsDnsSubdomain(std::string(254, 'a')));
  EXPECT_FALSE(IsDnsSubdomain(""));
  EXPECT_FALSE(IsDnsSubdomain(".a"));
  EXPECT_FALSE(IsDnsSubdomain("a."));
  EXPECT_FALSE(IsDnsSubdomain("a..b")) << "an empty label";
  EXPECT_FALSE(IsDnsSubdomain("a.-b")) << "a label starting with '-'";
  EXPECT_FALSE(IsDnsSubdomain("a-.b")) << "a label ending with '-'";
  EXPECT_TRUE(IsDnsSubdomain(std::string(100, 'a') + "." + std::string(100, 'b')))
      << "a label of a subdomain may be longer than 63";
  EXPECT_FALSE(IsDnsSubdomain("a/b")) << "a slash would change the request's path";
  EXPECT_FALSE(IsDnsSubdomain("../secrets"));
  EXPECT_FALSE(IsDnsSubdomain("a?watch=1"));
  EXPECT_FALSE(IsDnsSubdomain("Agent"));
}

}  // namespace
}  // namespace allocguard::api
