#include "operator/common/status.h"

#include <gtest/gtest.h>

namespace allocguard {
namespace {

Result<int> ParsePositive(int v) {
  if (v <= 0) return InvalidArgument("value must be positive, got " + std::to_string(v));
  return v;
}

Result<int> Doubled(int v) {
  AG_ASSIGN_OR_RETURN(int x, ParsePositive(v));
  return 2 * x;
}

TEST(StatusTest, ErrorKeepsCodeAndMessageThroughPropagation) {
  Result<int> r = Doubled(-1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().ToString(), "InvalidArgument: value must be positive, got -1");
  EXPECT_EQ(r.status().WithContext("load file").message(),
            "load file: value must be positive, got -1");
}

TEST(StatusTest, ValuePassesThrough) {
  Result<int> r = Doubled(21);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 42);
  EXPECT_TRUE(r.status().ok());
}

}  // namespace
}  // namespace allocguard
