#include "operator/api/quantity.h"

#include <array>
#include <cctype>
#include <limits>
#include <utility>

namespace allocguard::api {
namespace {

__extension__ using Int128 = __int128;  // -Wpedantic: a GCC/Clang type

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// Suffixes with their multipliers; the binary ones first so "Mi" is not read
// as "M" followed by garbage.
constexpr std::array<std::pair<const char*, int64_t>, 13> kSuffixes = {{
    {"Ki", int64_t{1} << 10},
    {"Mi", int64_t{1} << 20},
    {"Gi", int64_t{1} << 30},
    {"Ti", int64_t{1} << 40},
    {"Pi", int64_t{1} << 50},
    {"Ei", int64_t{1} << 60},
    {"k", 1'000},
    {"M", 1'000'000},
    {"G", 1'000'000'000},
    {"T", 1'000'000'000'000},
    {"P", 1'000'000'000'000'000},
    {"E", 1'000'000'000'000'000'000},
    {"", 1},
}};

Status Refuse(const std::string& text, const std::string& why) {
  return InvalidArgument("quantity \"" + text + "\" " + why);
}

}  // namespace

Result<int64_t> ParseQuantityBytes(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  const std::string whole = text.substr(0, i);
  std::string fraction;
  if (i < text.size() && text[i] == '.') {
    size_t start = ++i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    fraction = text.substr(start, i - start);
    if (fraction.empty()) return Refuse(text, "has no digits after the decimal point");
  }
  if (whole.empty() && fraction.empty()) {
    if (!text.empty() && (text[0] == '-' || text[0] == '+')) {
      return Refuse(text, "must be an unsigned number of bytes");
    }
    return Refuse(text, "does not start with a number");
  }
  const std::string suffix = text.substr(i);
  int64_t multiplier = 0;
  for (const auto& [name, mult] : kSuffixes) {
    if (suffix == name) multiplier = mult;
  }
  if (multiplier == 0) {
    if (!suffix.empty() && (suffix[0] == 'e' || suffix[0] == 'E') && suffix.size() > 1) {
      return Refuse(text, "uses exponent notation; write it with a suffix such as Mi or G");
    }
    return Refuse(text, "has unknown suffix \"" + suffix + "\" (use Ki, Mi, Gi, Ti, k, M or G)");
  }
  // whole * multiplier, checked.
  int64_t bytes = 0;
  for (char c : whole) {
    int digit = c - '0';
    if (bytes > (kMax - digit) / 10) return Refuse(text, "is too large");
    bytes = bytes * 10 + digit;
  }
  if (bytes != 0 && bytes > kMax / multiplier) return Refuse(text, "is too large");
  bytes *= multiplier;
  // + ceil(0.<fraction> * multiplier), exact: 18 fraction digits and a
  // multiplier below 2^63 fit in 128 bits; later digits only round up.
  if (!fraction.empty()) {
    Int128 numerator = 0;
    Int128 denominator = 1;
    bool rest_nonzero = false;
    for (size_t k = 0; k < fraction.size(); ++k) {
      if (k < 18) {
        numerator = numerator * 10 + (fraction[k] - '0');
        denominator *= 10;
      } else if (fraction[k] != '0') {
        rest_nonzero = true;
      }
    }
    Int128 scaled = numerator * multiplier;
    Int128 part = scaled / denominator;
    if (scaled % denominator != 0 || rest_nonzero) ++part;
    if (part > kMax - bytes) return Refuse(text, "is too large");
    bytes += static_cast<int64_t>(part);
  }
  return bytes;
}

std::string FormatQuantityBytes(int64_t bytes) {
  static constexpr std::array<std::pair<const char*, int>, 6> kBinary = {
      {{"Ei", 60}, {"Pi", 50}, {"Ti", 40}, {"Gi", 30}, {"Mi", 20}, {"Ki", 10}}};
  if (bytes > 0) {
    for (const auto& [suffix, shift] : kBinary) {
      int64_t unit = int64_t{1} << shift;
      if (bytes % unit == 0) return std::to_string(bytes / unit) + suffix;
    }
  }
  return std::to_string(bytes);
}

std::string FormatDuration(std::chrono::milliseconds d) {
  int64_t ms = d.count();
  if (ms > 0) {
    if (ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
    if (ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
    if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
    return std::to_string(ms) + "ms";
  }
  return "0s";
}

}  // namespace allocguard::api
