#include "operator/common/duration.h"

#include <cctype>
#include <cmath>
#include <cstdint>

namespace allocguard {

Result<std::chrono::milliseconds> ParseDuration(const std::string& text) {
  if (text.empty()) return InvalidArgument("empty duration");
  auto is_digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '.'; };
  auto is_alpha = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; };
  double ms = 0;
  size_t i = 0;
  int terms = 0;
  while (i < text.size()) {
    size_t number_start = i;
    while (i < text.size() && is_digit(text[i])) ++i;
    if (i == number_start) {
      return InvalidArgument(terms == 0 ? "duration \"" + text + "\" does not start with a number"
                                        : "duration \"" + text + "\" is not well formed");
    }
    std::string number = text.substr(number_start, i - number_start);
    if (number.find('.') != number.rfind('.') || number == ".") {
      return InvalidArgument("duration \"" + text + "\" is not a number");
    }
    double value = 0;
    try {
      value = std::stod(number);
    } catch (const std::exception&) {
      return InvalidArgument("duration \"" + text + "\" is not a number");
    }
    size_t unit_start = i;
    while (i < text.size() && is_alpha(text[i])) ++i;
    std::string unit = text.substr(unit_start, i - unit_start);
    if (unit.empty() && (terms > 0 || i < text.size())) {
      return InvalidArgument("duration \"" + text + "\" needs a unit after every number");
    }
    if (unit == "ms") {
      ms += value;
    } else if (unit == "s" || unit.empty()) {  // a bare number alone means seconds
      ms += value * 1000;
    } else if (unit == "m") {
      ms += value * 60'000;
    } else if (unit == "h") {
      ms += value * 3'600'000;
    } else {
      std::string message = "duration \"";
      message.append(text).append("\" has unknown unit \"").append(unit);
      message.append("\" (use ms, s, m or h)");
      return InvalidArgument(message);
    }
    ++terms;
  }
  if (!(ms < static_cast<double>(kMaxDuration.count()) + 1)) {
    return InvalidArgument("duration \"" + text + "\" is too long");
  }
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(ms)));
}

}  // namespace allocguard
