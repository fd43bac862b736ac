#include "operator/common/books_reading.h"

namespace allocguard {

const char* BooksReadingName(BooksReading reading) {
  switch (reading) {
    case BooksReading::kTooFewMinutes:
      return "TooFewMinutes";
    case BooksReading::kUnclear:
      return "Unclear";
    case BooksReading::kFlat:
      return "Flat";
    case BooksReading::kRetention:
      return "Retention";
    case BooksReading::kLeak:
      return "Leak";
  }
  return "Unclear";
}

std::optional<BooksReading> BooksReadingFromName(std::string_view name) {
  for (BooksReading r : {BooksReading::kTooFewMinutes, BooksReading::kUnclear, BooksReading::kFlat,
                         BooksReading::kRetention, BooksReading::kLeak}) {
    if (name == BooksReadingName(r)) return r;
  }
  return std::nullopt;
}

}  // namespace allocguard
