#pragma once

// What the allocator's books say about a run's memory (docs/allocator-books.md):
// one enum, from the replay's analysis (replay/books_floors.h) through the
// driver's termination message to the ReplayCanary status, written as its
// name only where a person or the API reads it.

#include <optional>
#include <string_view>

namespace allocguard {

enum class BooksReading {
  kTooFewMinutes,  // fewer minute floors with books than a trend needs
  kUnclear,        // the slope intervals do not say (noise, or a slope near the threshold)
  kFlat,           // neither in-use nor retained climbs
  kRetention,      // in-use flat, retained climbing: the allocator keeps freed memory
  kLeak,           // in-use climbing: the program holds more (retained may climb too)
};

// "TooFewMinutes", "Unclear", "Flat", "Retention", "Leak".
const char* BooksReadingName(BooksReading reading);

// The reading a name written by BooksReadingName stands for; nullopt for
// any other text.
std::optional<BooksReading> BooksReadingFromName(std::string_view name);

}  // namespace allocguard
