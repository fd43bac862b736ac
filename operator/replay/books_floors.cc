#include "operator/replay/books_floors.h"

#include <cmath>
#include <limits>

#include "operator/memory/floor_judge.h"
#include "operator/memory/slope_interval.h"

namespace allocguard::replay {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

BooksFigureTrend TrendOf(std::span<const BooksSample> samples, int64_t BooksSample::*figure,
                         const memory::FloorOptions& options, double max_slope_gib_per_h) {
  std::vector<memory::MemorySample> series;
  series.reserve(samples.size());
  for (const BooksSample& s : samples) {
    memory::MemorySample m;
    m.t_seconds = s.t_seconds;
    m.anon_bytes = s.*figure;  // JudgedBytes() is then the figure itself
    series.push_back(m);
  }
  BooksFigureTrend t;
  t.floors = memory::ComputeMinuteFloors(series, options);
  t.slope_gib_per_h = t.low_gib_per_h = t.high_gib_per_h = kNaN;
  if (static_cast<int>(t.floors.size()) < kBooksMinFloors) return t;
  const memory::SlopeInterval fit =
      memory::FitSlopeInterval(t.floors, kBooksOneSidedAlpha, memory::SlopeNoise::kDifferences);
  constexpr double kPerMinuteToGiBPerHour = 60.0 / memory::kBytesPerGiB;
  t.slope_gib_per_h = fit.slope * kPerMinuteToGiBPerHour;
  if (!fit.valid) return t;
  t.low_gib_per_h = fit.low * kPerMinuteToGiBPerHour;
  t.high_gib_per_h = fit.high * kPerMinuteToGiBPerHour;
  if (t.low_gib_per_h > max_slope_gib_per_h) {
    t.trend = BooksTrend::kClimbing;
  } else if (t.high_gib_per_h < max_slope_gib_per_h) {
    t.trend = BooksTrend::kFlat;
  }
  return t;
}

std::string Describe(const char* name, const BooksFigureTrend& t) {
  const std::string slope = memory::FormatSlope(t.slope_gib_per_h);
  switch (t.trend) {
    case BooksTrend::kClimbing:
      return std::string(name) + " climbing (" + slope + ")";
    case BooksTrend::kFlat:
      return std::string(name) + " flat (" + slope + ")";
    case BooksTrend::kUnclear:
      break;
  }
  if (std::isnan(t.low_gib_per_h) || std::isnan(t.high_gib_per_h)) {
    return std::string(name) + " unclear (" + slope + ")";
  }
  return std::string(name) + " unclear (" + slope + ", between " +
         memory::FormatSlopeValue(t.low_gib_per_h) + " and " +
         memory::FormatSlopeValue(t.high_gib_per_h) + ")";
}

}  // namespace

BooksReading ReadBooks(BooksTrend in_use, BooksTrend retained) {
  if (in_use == BooksTrend::kClimbing) return BooksReading::kLeak;
  if (in_use != BooksTrend::kFlat) return BooksReading::kUnclear;
  if (retained == BooksTrend::kClimbing) return BooksReading::kRetention;
  if (retained == BooksTrend::kFlat) return BooksReading::kFlat;
  return BooksReading::kUnclear;
}

std::optional<BooksFloors> ComputeBooksFloors(std::span<const BooksSample> samples,
                                              const memory::FloorOptions& options,
                                              double max_slope_gib_per_h) {
  if (samples.empty()) return std::nullopt;
  BooksFloors books;
  books.max_slope_gib_per_h = max_slope_gib_per_h;
  books.in_use = TrendOf(samples, &BooksSample::in_use_bytes, options, max_slope_gib_per_h);
  books.retained = TrendOf(samples, &BooksSample::retained_bytes, options, max_slope_gib_per_h);
  const bool enough = static_cast<int>(books.in_use.floors.size()) >= kBooksMinFloors &&
                      static_cast<int>(books.retained.floors.size()) >= kBooksMinFloors;
  books.reading =
      enough ? ReadBooks(books.in_use.trend, books.retained.trend) : BooksReading::kTooFewMinutes;
  return books;
}

std::string ExplainBooks(const BooksFloors& books) {
  std::string figures = "The allocator's books: " + Describe("in-use", books.in_use) + ", " +
                        Describe("retained", books.retained) + ", against " +
                        memory::FormatSlope(books.max_slope_gib_per_h) + ": ";
  switch (books.reading) {
    case BooksReading::kTooFewMinutes:
      return "The allocator's books cover " + std::to_string(books.in_use.floors.size()) +
             " minute(s) after warm-up, too few to read a trend from.";
    case BooksReading::kUnclear:
      return figures + "they do not tell retention from a leak yet.";
    case BooksReading::kFlat:
      return figures + "neither the program nor the allocator holds more memory minute by minute.";
    case BooksReading::kRetention:
      return figures + "the allocator keeps memory the program has freed (retention).";
    case BooksReading::kLeak:
      return figures +
             "the program itself holds more memory minute by minute (a leak or a growing "
             "working set), which no allocator gives back.";
  }
  return figures;
}

}  // namespace allocguard::replay
