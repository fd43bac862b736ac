#include "operator/common/duration.h"

#include <gtest/gtest.h>

#include <chrono>

namespace allocguard {
namespace {

TEST(ParseDurationTest, Units) {
  EXPECT_EQ(ParseDuration("250ms").value(), std::chrono::milliseconds(250));
  EXPECT_EQ(ParseDuration("2m").value(), std::chrono::minutes(2));
  EXPECT_EQ(ParseDuration("1.5s").value(), std::chrono::milliseconds(1500));
  EXPECT_EQ(ParseDuration("30").value(), std::chrono::seconds(30));
  EXPECT_FALSE(ParseDuration("2d").ok());
  EXPECT_FALSE(ParseDuration("m").ok());
}

TEST(ParseDurationTest, GoStyleCompoundDurations) {
  EXPECT_EQ(ParseDuration("1h30m").value(), std::chrono::minutes(90));
  EXPECT_EQ(ParseDuration("2m30s").value(), std::chrono::seconds(150));
  EXPECT_EQ(ParseDuration("1m0.5s").value(), std::chrono::milliseconds(60500));
  EXPECT_EQ(ParseDuration("1s250ms").value(), std::chrono::milliseconds(1250));
  EXPECT_FALSE(ParseDuration("1h30").ok());   // a number without its unit
  EXPECT_FALSE(ParseDuration("1h-5m").ok());  // no signs
  EXPECT_FALSE(ParseDuration("1..5s").ok());
  EXPECT_FALSE(ParseDuration("1h 30m").ok());  // no spaces
  EXPECT_FALSE(ParseDuration("1e9h").ok());
}

}  // namespace
}  // namespace allocguard
