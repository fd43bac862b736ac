#include "operator/api/quantity.h"

#include <gtest/gtest.h>

#include "operator/common/duration.h"
#include "operator/replay/load_spec.h"

namespace allocguard::api {
namespace {

TEST(ParseQuantityBytesTest, KubernetesQuantities) {
  struct Case {
    const char* text;
    int64_t bytes;
  };
  const Case cases[] = {
      {"0", 0},
      {"1048576", 1048576},
      {"1Ki", 1024},
      {"512Mi", 512LL << 20},
      {"4Gi", 4LL << 30},
      {"2Ti", 2LL << 40},
      {"1Pi", 1LL << 50},
      {"1k", 1000},
      {"2M", 2'000'000},
      {"1G", 1'000'000'000},
      {"3T", 3'000'000'000'000},
      {"1.5Gi", 3LL << 29},
      {"0.5Ki", 512},
      {".5Mi", 512LL << 10},
      {"1.5", 2},       // a fraction of a byte rounds up, as Kubernetes does
      {"0.0001Ki", 1},  // 0.1024 bytes
      {"7Ei", 7LL << 60},
      {"9223372036854775807", 9223372036854775807LL},
  };
  for (const Case& c : cases) {
    auto q = ParseQuantityBytes(c.text);
    ASSERT_TRUE(q.ok()) << c.text << ": " << q.status().ToString();
    EXPECT_EQ(*q, c.bytes) << c.text;
  }
}

TEST(ParseQuantityBytesTest, RefusesWithAMessageThatQuotesTheText) {
  struct Case {
    const char* text;
    const char* want;
  };
  const Case cases[] = {
      {"", "does not start with a number"},
      {"Mi", "does not start with a number"},
      {"-1Mi", "must be an unsigned number"},
      {"+1", "must be an unsigned number"},
      {"2GB", "unknown suffix \"GB\""},
      {"1e3", "exponent notation"},
      {"1E3", "exponent notation"},
      {"500m", "unknown suffix \"m\""},  // milli-bytes make no sense
      {"1.", "no digits after the decimal point"},
      {"1.2.3", "unknown suffix \".3\""},
      {"8Ei", "too large"},
      {"9223372036854775808", "too large"},
      {"99999999999999999999999", "too large"},
      {"1 Gi", "unknown suffix \" Gi\""},
  };
  for (const Case& c : cases) {
    auto q = ParseQuantityBytes(c.text);
    ASSERT_FALSE(q.ok()) << c.text << " gave " << *q;
    EXPECT_NE(q.status().message().find(c.want), std::string::npos) << q.status().message();
    EXPECT_NE(q.status().message().find(std::string("\"") + c.text + "\""), std::string::npos)
        << q.status().message();
  }
}

TEST(FormatQuantityBytesTest, ShortestExactFormRoundTrips) {
  EXPECT_EQ(FormatQuantityBytes(512LL << 20), "512Mi");
  EXPECT_EQ(FormatQuantityBytes(3LL << 29), "1536Mi");
  EXPECT_EQ(FormatQuantityBytes(1500), "1500");
  EXPECT_EQ(FormatQuantityBytes(0), "0");
  EXPECT_EQ(FormatQuantityBytes(1LL << 60), "1Ei");
  for (int64_t bytes : {int64_t{1}, int64_t{1023}, int64_t{1024}, int64_t{123456789},
                        int64_t{5} << 40, int64_t{9223372036854775807LL}}) {
    EXPECT_EQ(ParseQuantityBytes(FormatQuantityBytes(bytes)).value(), bytes) << bytes;
  }
}

TEST(FormatDurationTest, LargestExactUnitAndParsesBack) {
  using std::chrono::milliseconds;
  EXPECT_EQ(FormatDuration(std::chrono::minutes(15)), "15m");
  EXPECT_EQ(FormatDuration(std::chrono::seconds(2)), "2s");
  EXPECT_EQ(FormatDuration(milliseconds(1500)), "1500ms");
  EXPECT_EQ(FormatDuration(std::chrono::minutes(90)), "90m");
  EXPECT_EQ(FormatDuration(std::chrono::hours(2)), "2h");
  EXPECT_EQ(FormatDuration(milliseconds(0)), "0s");
  EXPECT_FALSE(ParseDuration("1000000000000000ms").ok());  // kMaxDuration + 1 ms
  // The longest one too (fuzz/duration_fuzzer found that a longer one,
  // which FormatDuration writes, ParseDuration refuses: the bound is now
  // stated on both).
  for (int64_t ms : {int64_t{1}, int64_t{999}, int64_t{1000}, int64_t{61000}, int64_t{3600000},
                     int64_t{5400000}, int64_t{86400001}, kMaxDuration.count()}) {
    EXPECT_EQ(ParseDuration(FormatDuration(milliseconds(ms))).value(), milliseconds(ms));
  }
}

}  // namespace
}  // namespace allocguard::api
