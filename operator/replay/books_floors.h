#pragma once

// The allocator's books over a replay run (docs/allocator-books.md): the
// per-minute floors of the bytes the program has in use and of the bytes the
// allocator retains (holds but has not given back), their slopes, and what
// they say about a climbing memory floor.
//
// The stats agent splits the figure the judge watches from the inside: a
// floor that climbs while in-use stays flat and retained climbs is memory the
// allocator keeps (retention, which another allocator or tuning cures); a
// floor that climbs with in-use is memory the program itself holds (a leak,
// or a working set that grows), which no allocator gives back. One variant's
// books can therefore say which of the two it is, without a second variant.
//
// Each figure's trend is read from its slope interval (memory::
// FitSlopeInterval, differences-based noise, 5 % on each side) against the
// threshold the judge holds the memory floor to, as the guard reads the
// books in production: climbing when the whole interval is above it, flat
// when the whole interval is below it, unclear otherwise.
//
// The reading explains; it never decides: the verdict stays the floor
// judge's (operator/memory/floor_judge.h), and the reading is only added to
// its explanation.
//
// Pure functions over recorded samples.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "operator/common/books_reading.h"
#include "operator/memory/memory_sample.h"

namespace allocguard::replay {

// The books of a workload at one sample: the sums over its processes that
// published a split (in-use and retained) at that time.
struct BooksSample {
  double t_seconds = 0;
  int64_t in_use_bytes = 0;
  int64_t retained_bytes = 0;
};

// The books need this many minute floors before a trend is read from them.
inline constexpr int kBooksMinFloors = 3;
// Each side of a figure's slope interval.
inline constexpr double kBooksOneSidedAlpha = 0.05;

enum class BooksTrend { kUnclear, kFlat, kClimbing };

// One figure over the run.
struct BooksFigureTrend {
  // Per-minute floors after warm-up (memory::ComputeMinuteFloors of the
  // figure), oldest first.
  std::vector<memory::MinuteFloor> floors;
  // Least-squares slope and its interval, GiB/h; NaN below kBooksMinFloors
  // floors.
  double slope_gib_per_h = 0;
  double low_gib_per_h = 0;
  double high_gib_per_h = 0;
  BooksTrend trend = BooksTrend::kUnclear;
};

struct BooksFloors {
  BooksFigureTrend in_use;
  BooksFigureTrend retained;
  double max_slope_gib_per_h = 0;  // the threshold the trends were read against
  BooksReading reading = BooksReading::kTooFewMinutes;
};

// The books' floors, trends and reading; nullopt when no sample has books
// (the agent was not loaded, or the allocator reports no split: mimalloc's
// release builds, musl's malloc).
std::optional<BooksFloors> ComputeBooksFloors(std::span<const BooksSample> samples,
                                              const memory::FloorOptions& options,
                                              double max_slope_gib_per_h);

// The reading of two trends (pure; what ComputeBooksFloors decides with).
BooksReading ReadBooks(BooksTrend in_use, BooksTrend retained);

// One sentence for the verdict's explanation, naming the figure that showed
// it, e.g. "The allocator's books: in-use flat (+0.01 GiB/h), retained
// climbing (+3.20 GiB/h): the allocator keeps memory the program has freed
// (retention)."
std::string ExplainBooks(const BooksFloors& books);

}  // namespace allocguard::replay
