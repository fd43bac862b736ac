#include "operator/replay/books_floors.h"

#include <cmath>
#include <functional>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace allocguard::replay {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kMiB = 1024.0 * 1024.0;

// A sample every 2 s for `minutes`, in-use and retained given in MiB as
// functions of the time in minutes, with a small saw-tooth of in-flight
// work on top (the floor is its low point).
std::vector<BooksSample> Series(int minutes, const std::function<double(double)>& in_use_mib,
                                const std::function<double(double)>& retained_mib) {
  std::vector<BooksSample> out;
  for (double t = 0; t <= minutes * 60.0 + 1e-9; t += 2) {
    const double m = t / 60;
    const double busy = static_cast<int>(t) % 10 == 0 ? 0 : 3;  // MiB of requests in flight
    out.push_back({.t_seconds = t,
                   .in_use_bytes = static_cast<int64_t>((in_use_mib(m) + busy) * kMiB),
                   .retained_bytes = static_cast<int64_t>(retained_mib(m) * kMiB)});
  }
  return out;
}

const memory::FloorOptions kFloors{.warmup_minutes = 1, .sample_interval_seconds = 2};
constexpr double kMaxSlope = 0.5;  // GiB/h, the judge's default

// The demo's glibc ratchet as the books see it: the program's live bytes
// stay level while the arenas keep what it freed, 40 MiB more each minute
// (2.3 GiB/h).
TEST(BooksFloorsTest, InUseFlatRetainedClimbingIsRetention) {
  auto books =
      ComputeBooksFloors(Series(
                             10, [](double) { return 300; }, [](double m) { return 50 + 40 * m; }),
                         kFloors, kMaxSlope);
  ASSERT_TRUE(books.has_value());
  EXPECT_EQ(books->reading, BooksReading::kRetention);
  EXPECT_EQ(books->in_use.trend, BooksTrend::kFlat);
  EXPECT_EQ(books->retained.trend, BooksTrend::kClimbing);
  EXPECT_NEAR(books->retained.slope_gib_per_h, 40.0 * 60 / 1024, 0.01);
  EXPECT_NEAR(books->in_use.slope_gib_per_h, 0, 0.01);
  EXPECT_EQ(books->in_use.floors.size(), 9u);  // minutes 1..9 after one minute of warm-up
  const std::string why = ExplainBooks(*books);
  EXPECT_THAT(why, HasSubstr("in-use flat ("));
  EXPECT_THAT(why, HasSubstr("retained climbing (+2.34 GiB/h)"));
  EXPECT_THAT(why, HasSubstr("(retention)"));
}

// A leak: the program holds 30 MiB more each minute; the allocator's free
// bytes stay level.
TEST(BooksFloorsTest, InUseClimbingIsALeak) {
  auto books =
      ComputeBooksFloors(Series(
                             10, [](double m) { return 300 + 30 * m; }, [](double) { return 20; }),
                         kFloors, kMaxSlope);
  ASSERT_TRUE(books.has_value());
  EXPECT_EQ(books->reading, BooksReading::kLeak);
  const std::string why = ExplainBooks(*books);
  EXPECT_THAT(why, HasSubstr("in-use climbing (+1.76 GiB/h)"));
  EXPECT_THAT(why, HasSubstr("retained flat"));
  EXPECT_THAT(why, HasSubstr("no allocator gives back"));
}

// jemalloc on the same load: both level.
TEST(BooksFloorsTest, BothLevelIsFlat) {
  auto books = ComputeBooksFloors(Series(
                                      10, [](double) { return 300; }, [](double) { return 35; }),
                                  kFloors, kMaxSlope);
  ASSERT_TRUE(books.has_value());
  EXPECT_EQ(books->reading, BooksReading::kFlat);
  EXPECT_THAT(ExplainBooks(*books), HasSubstr("neither the program nor the allocator"));
}

// A slope right at the threshold cannot be told from either side: the
// reading says so instead of guessing.
TEST(BooksFloorsTest, ASlopeAtTheThresholdIsUnclear) {
  const double at_threshold_mib_per_min = kMaxSlope * 1024 / 60;
  // Minute-to-minute noise of ±8 MiB (about one minute of the climb).
  auto noisy = [&](double m) {
    return 300 + at_threshold_mib_per_min * m + (static_cast<int>(m) % 2 == 0 ? 8 : -8);
  };
  auto books = ComputeBooksFloors(Series(7, noisy, [](double) { return 20; }), kFloors, kMaxSlope);
  ASSERT_TRUE(books.has_value());
  EXPECT_EQ(books->in_use.trend, BooksTrend::kUnclear);
  EXPECT_EQ(books->reading, BooksReading::kUnclear);
  EXPECT_THAT(ExplainBooks(*books), HasSubstr("in-use unclear"));
  EXPECT_THAT(ExplainBooks(*books), Not(HasSubstr("(retention)")));
}

TEST(BooksFloorsTest, TwoMinutesAreTooFew) {
  auto books =
      ComputeBooksFloors(Series(
                             3, [](double) { return 300; }, [](double m) { return 50 + 40 * m; }),
                         kFloors, kMaxSlope);
  ASSERT_TRUE(books.has_value());
  EXPECT_EQ(books->in_use.floors.size(), 2u);
  EXPECT_EQ(books->reading, BooksReading::kTooFewMinutes);
  EXPECT_TRUE(std::isnan(books->in_use.slope_gib_per_h));
  EXPECT_THAT(ExplainBooks(*books), HasSubstr("cover 2 minute(s)"));
}

TEST(BooksFloorsTest, NoSamplesNoBooks) {
  EXPECT_FALSE(ComputeBooksFloors({}, kFloors, kMaxSlope).has_value());
}

TEST(BooksFloorsTest, ReadingOfTwoTrends) {
  using T = BooksTrend;
  using R = BooksReading;
  struct Case {
    T in_use, retained;
    R want;
  };
  for (const Case& c :
       {Case{T::kClimbing, T::kFlat, R::kLeak}, Case{T::kClimbing, T::kClimbing, R::kLeak},
        Case{T::kClimbing, T::kUnclear, R::kLeak}, Case{T::kFlat, T::kClimbing, R::kRetention},
        Case{T::kFlat, T::kFlat, R::kFlat}, Case{T::kFlat, T::kUnclear, R::kUnclear},
        Case{T::kUnclear, T::kClimbing, R::kUnclear}, Case{T::kUnclear, T::kFlat, R::kUnclear}}) {
    EXPECT_EQ(ReadBooks(c.in_use, c.retained), c.want)
        << static_cast<int>(c.in_use) << "," << static_cast<int>(c.retained);
  }
}

TEST(BooksReadingTest, NamesRoundTrip) {
  for (BooksReading r : {BooksReading::kTooFewMinutes, BooksReading::kUnclear, BooksReading::kFlat,
                         BooksReading::kRetention, BooksReading::kLeak}) {
    EXPECT_EQ(BooksReadingFromName(BooksReadingName(r)), r);
  }
  EXPECT_FALSE(BooksReadingFromName("retention").has_value());
  EXPECT_FALSE(BooksReadingFromName("").has_value());
}

}  // namespace
}  // namespace allocguard::replay
