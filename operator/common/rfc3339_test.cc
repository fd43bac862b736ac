#include "operator/common/rfc3339.h"

#include <gtest/gtest.h>

namespace allocguard {
namespace {

TEST(Rfc3339Test, ParsesAndFormatsMicroTime) {
  auto t = ParseRfc3339("2024-05-01T10:00:00.123456Z");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(FormatRfc3339(*t, true), "2024-05-01T10:00:00.123456Z");
  EXPECT_EQ(FormatRfc3339(*t, false), "2024-05-01T10:00:00Z");
  auto offset = ParseRfc3339("2024-05-01T12:00:00+02:00");
  ASSERT_TRUE(offset.ok());
  EXPECT_EQ(FormatRfc3339(*offset, false), "2024-05-01T10:00:00Z");
  EXPECT_FALSE(ParseRfc3339("yesterday").ok());
}

// Times come from objects anyone may write: a malformed one is an error,
// never an exception.
TEST(Rfc3339Test, RefusesMalformedTimesWithoutThrowing) {
  for (const char* text : {"", "2024-05-01T10:00:00+ab:cd", "2024-05-01T10:00:00+0:000",
                           "2024-13-01T10:00:00Z", "2024-05-01T25:00:00Z", "2024-05-01T10:00:00",
                           "2024-05-01T10:00:00Q", "-001-05-01T10:00:00Z"}) {
    EXPECT_FALSE(ParseRfc3339(text).ok()) << text;
  }
}

}  // namespace
}  // namespace allocguard
