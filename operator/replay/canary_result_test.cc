#include "operator/replay/canary_result.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace allocguard::replay {
namespace {

CanaryResult Sample(int minutes) {
  CanaryResult r;
  r.variant = "candidate";
  r.allocator = "glibc";
  r.verdict = Verdict::kRatchet;
  for (int m = 0; m < minutes; ++m) r.floors_mib.push_back(1234.5 + m * 17.25);
  r.slope_gib_per_hour = 1.012345;
  r.slope_low = 0.8;
  r.slope_high = 1.2;
  r.peak_mib = 4321.06;
  r.requests = 123456789;
  r.errors = 3;
  r.late = 17;
  r.anon_only = true;
  r.minutes = minutes + 1;
  r.message = "floor rises 1.01 GiB/h [0.80, 1.20] over " + std::to_string(minutes) + " minutes";
  return r;
}

TEST(CanaryResultTest, RoundTripsEveryField) {
  CanaryResult r = Sample(14);
  r.workload_exited = true;
  r.exit_minute = 9;
  std::string text = EncodeCanaryResult(r);
  auto back = DecodeCanaryResult(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << text;
  EXPECT_EQ(back->version, 1);
  EXPECT_EQ(back->variant, "candidate");
  EXPECT_EQ(back->allocator, "glibc");
  EXPECT_EQ(back->verdict, Verdict::kRatchet);
  ASSERT_EQ(back->floors_mib.size(), 14u);
  EXPECT_DOUBLE_EQ(back->floors_mib[0], 1234.5);
  EXPECT_NEAR(back->floors_mib[13], 1234.5 + 13 * 17.25, 0.05);
  EXPECT_EQ(back->floor_stride, 1);
  EXPECT_NEAR(back->slope_gib_per_hour, 1.012, 1e-9);
  EXPECT_DOUBLE_EQ(back->slope_low, 0.8);
  EXPECT_DOUBLE_EQ(back->slope_high, 1.2);
  EXPECT_NEAR(back->peak_mib, 4321.1, 1e-9);
  EXPECT_EQ(back->requests, 123456789);
  EXPECT_EQ(back->errors, 3);
  EXPECT_EQ(back->late, 17);
  EXPECT_TRUE(back->workload_exited);
  EXPECT_EQ(back->exit_minute, 9);
  EXPECT_TRUE(back->anon_only);
  EXPECT_EQ(back->minutes, 15);
  EXPECT_EQ(back->message, r.message);
}

// What a bake-off ranks by travels with the result; unmeasured is NaN both
// ways (a driver before these fields wrote none).
TEST(CanaryResultTest, TheBakeOffFiguresRoundTrip) {
  CanaryResult r = Sample(14);
  auto back = DecodeCanaryResult(EncodeCanaryResult(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(std::isnan(back->floor_level_mib));
  EXPECT_TRUE(std::isnan(back->cpu_seconds));
  EXPECT_TRUE(std::isnan(back->p99_ms));
  r.floor_level_mib = 1345.67;
  r.cpu_seconds = 64.234;
  r.p99_ms = 41.27;
  back = DecodeCanaryResult(EncodeCanaryResult(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_NEAR(back->floor_level_mib, 1345.7, 1e-9);
  EXPECT_NEAR(back->cpu_seconds, 64.23, 1e-9);
  EXPECT_NEAR(back->p99_ms, 41.3, 1e-9);
  auto older = DecodeCanaryResult(R"({"v":1,"verdict":"Flat","floors":[1,2]})");
  ASSERT_TRUE(older.ok()) << older.status().ToString();
  EXPECT_TRUE(std::isnan(older->cpu_seconds));
  EXPECT_FALSE(DecodeCanaryResult(R"({"v":1,"verdict":"Flat","cpu_s":"lots"})").ok());
}

TEST(CanaryResultTest, SlopeOfTooFewFloorsIsNaNAndStaysNaN) {
  CanaryResult r = Sample(1);
  r.verdict = Verdict::kInconclusive;
  r.slope_gib_per_hour = r.slope_low = r.slope_high = std::nan("");
  std::string text = EncodeCanaryResult(r);
  EXPECT_NE(text.find("\"slope\":null"), std::string::npos) << text;
  auto back = DecodeCanaryResult(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(std::isnan(back->slope_gib_per_hour));
  EXPECT_TRUE(std::isnan(back->slope_high));
}

TEST(CanaryResultTest, A120MinuteRunFitsTheKubeletLimitAndKeepsEveryFloor) {
  CanaryResult r = Sample(120);
  std::string text = EncodeCanaryResult(r);
  EXPECT_LE(text.size(), kMaxTerminationMessageBytes);
  auto back = DecodeCanaryResult(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->floors_mib.size(), 120u);
  EXPECT_EQ(back->floor_stride, 1);
}

TEST(CanaryResultTest, TooManyFloorsAreThinnedDeterministicallyKeepingTheLast) {
  CanaryResult r = Sample(1000);
  r.floors_mib.back() = 99999.9;
  r.message = std::string(5000, 'x');
  std::string text = EncodeCanaryResult(r);
  EXPECT_LE(text.size(), kMaxTerminationMessageBytes);
  EXPECT_EQ(text, EncodeCanaryResult(r));
  auto back = DecodeCanaryResult(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_GT(back->floor_stride, 1);
  ASSERT_GE(back->floors_mib.size(), 2u);
  EXPECT_DOUBLE_EQ(back->floors_mib.front(), 1234.5);
  EXPECT_DOUBLE_EQ(back->floors_mib.back(), 99999.9);
  EXPECT_NEAR(back->floors_mib[1], 1234.5 + back->floor_stride * 17.25, 0.05);
  EXPECT_LE(back->message.size(), 256u);
  EXPECT_EQ(back->message.substr(back->message.size() - 3), "...");
  EXPECT_EQ(back->verdict, Verdict::kRatchet);
  EXPECT_EQ(back->requests, 123456789);
}

CanaryResult WithBooks(CanaryResult r, int minutes) {
  r.books_reading = BooksReading::kRetention;
  for (int m = 0; m < minutes; ++m) {
    r.in_use_floors_mib.push_back(250.5);  // MiB travel with one decimal
    r.retained_floors_mib.push_back(20 + m * 40.5);
  }
  r.in_use_slope_gib_per_hour = 0.004;
  r.retained_slope_gib_per_hour = 2.373;
  return r;
}

TEST(CanaryResultTest, TheBooksRoundTrip) {
  CanaryResult r = WithBooks(Sample(14), 14);
  auto back = DecodeCanaryResult(EncodeCanaryResult(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->books_reading, BooksReading::kRetention);
  EXPECT_EQ(back->in_use_floors_mib, r.in_use_floors_mib);
  EXPECT_EQ(back->retained_floors_mib.size(), 14u);
  EXPECT_DOUBLE_EQ(back->retained_floors_mib.back(), 20 + 13 * 40.5);
  EXPECT_DOUBLE_EQ(back->in_use_slope_gib_per_hour, 0.004);
  EXPECT_DOUBLE_EQ(back->retained_slope_gib_per_hour, 2.373);

  // Without books there is no "books" member, and none comes back.
  const std::string plain = EncodeCanaryResult(Sample(14));
  EXPECT_EQ(plain.find("books"), std::string::npos);
  EXPECT_FALSE(DecodeCanaryResult(plain)->books_reading.has_value());
}

// The books' floors are thinned with the judged ones, by the same stride,
// keeping each list's last floor.
TEST(CanaryResultTest, TheBooksAreThinnedWithTheFloors) {
  CanaryResult r = WithBooks(Sample(400), 400);
  std::string text = EncodeCanaryResult(r);
  EXPECT_LE(text.size(), kMaxTerminationMessageBytes);
  auto back = DecodeCanaryResult(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_GT(back->floor_stride, 1);
  EXPECT_EQ(back->retained_floors_mib.size(), back->floors_mib.size());
  EXPECT_EQ(back->in_use_floors_mib.size(), back->floors_mib.size());
  EXPECT_NEAR(back->retained_floors_mib[1], 20 + back->floor_stride * 40.5, 0.05);
  EXPECT_DOUBLE_EQ(back->retained_floors_mib.back(), 20 + 399 * 40.5);
  EXPECT_EQ(back->books_reading, BooksReading::kRetention);
}

TEST(CanaryResultTest, BooksOfTheWrongShapeAreErrorsThatSaySo) {
  const std::string head = R"({"v":1,"verdict":"Flat","books":)";
  for (const auto& [books, says] : std::vector<std::pair<std::string, std::string>>{
           {R"("x")", "books must be an object"},
           {R"({"reading":"Retaining"})", "books.reading is \"Retaining\""},
           {R"({"reading":7})", "reading must be a string"},
           {R"({"reading":"Leak","in_use":[1,"x"]})", "in_use must be a list of numbers"},
           {R"({"reading":"Leak","retained_slope":"up"})", "retained_slope must be a number"}}) {
    auto r = DecodeCanaryResult(head + books + "}");
    ASSERT_FALSE(r.ok()) << books;
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
  }
  auto null_books = DecodeCanaryResult(head + "null}");
  ASSERT_TRUE(null_books.ok());
  EXPECT_FALSE(null_books->books_reading.has_value());
}

TEST(CanaryResultTest, LongMessageIsCutAtACharacterBoundary) {
  CanaryResult r = Sample(3);
  r.message.clear();
  for (int i = 0; i < 2000; ++i) r.message += "\xc3\xa9";  // é
  std::string text = EncodeCanaryResult(r);
  EXPECT_LE(text.size(), kMaxTerminationMessageBytes);
  auto back = DecodeCanaryResult(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->message.find("\xef\xbf\xbd"), std::string::npos) << "a character was split";
  EXPECT_EQ(back->message.substr(0, 4), "\xc3\xa9\xc3\xa9");
  EXPECT_EQ(back->floors_mib.size(), 3u);
}

TEST(CanaryResultTest, InvalidUtf8InAMessageDoesNotBreakEncoding) {
  CanaryResult r = Sample(2);
  r.message = "stderr: \xff\xfe garbage";
  auto back = DecodeCanaryResult(EncodeCanaryResult(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->message.substr(0, 8), "stderr: ");
}

TEST(CanaryResultTest, GarbageIsAnErrorNotACrash) {
  const std::vector<std::string> inputs = {
      "",
      "not json",
      "[1,2,3]",
      "null",
      "{\"v\":1",  // truncated
      R"({"v":2,"verdict":"Flat"})",
      "{\"v\":1}",
      R"({"v":"1","verdict":"Flat"})",
      R"({"v":1,"verdict":7})",
      R"({"v":1,"verdict":"Great"})",
      R"({"v":1,"verdict":"Flat","floors":{"a":1}})",
      R"({"v":1,"verdict":"Flat","floors":[1,"x"]})",
      R"({"v":1,"verdict":"Flat","requests":1.5})",
      R"({"v":1,"verdict":"Flat","exited":"yes"})",
      R"({"v":1,"verdict":"Flat","stride":0})",
      std::string(10000, '['),
  };
  for (const std::string& in : inputs) {
    auto r = DecodeCanaryResult(in);
    EXPECT_FALSE(r.ok()) << in.substr(0, 80);
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    }
  }
  std::string good = EncodeCanaryResult(Sample(5));
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(DecodeCanaryResult(good.substr(0, n)).ok()) << n;
  }
}

TEST(CanaryResultTest, MinimalResultDecodesWithDefaults) {
  auto r = DecodeCanaryResult("  {\"v\":1,\"verdict\":\"Failed\",\"future_field\":[1]}\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->verdict, Verdict::kFailed);
  EXPECT_TRUE(r->floors_mib.empty());
  EXPECT_FALSE(r->workload_exited);
  EXPECT_EQ(r->exit_minute, -1);
}

}  // namespace
}  // namespace allocguard::replay
