#include "operator/common/rfc3339.h"

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <ctime>

namespace allocguard {

Result<std::chrono::system_clock::time_point> ParseRfc3339(const std::string& text) {
  int y = 0;
  int mo = 0;
  int d = 0;
  int h = 0;
  int mi = 0;
  int s = 0;
  char tail[64] = {0};
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%63s", &y, &mo, &d, &h, &mi, &s, tail) <
      6) {
    return InvalidArgument("\"" + text + "\" is not an RFC 3339 time");
  }
  if (y < 0 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 ||
      s < 0 || s > 60) {
    return InvalidArgument("\"" + text + "\" is not an RFC 3339 time (a field is out of range)");
  }
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  time_t t = timegm(&tm);
  std::string rest = tail;
  int64_t micros = 0;
  if (!rest.empty() && rest.front() == '.') {
    size_t i = 1;
    int64_t scale = 100000;
    while (i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i]))) {
      micros += (rest[i] - '0') * scale;
      scale /= 10;
      ++i;
    }
    rest = rest.substr(i);
  }
  int64_t offset = 0;
  if (rest == "Z" || rest == "z") {
    offset = 0;
  } else if (rest.size() == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':' &&
             std::isdigit(static_cast<unsigned char>(rest[1])) &&
             std::isdigit(static_cast<unsigned char>(rest[2])) &&
             std::isdigit(static_cast<unsigned char>(rest[4])) &&
             std::isdigit(static_cast<unsigned char>(rest[5]))) {
    // Digits only: std::stol would throw on anything else.
    const int hours = (rest[1] - '0') * 10 + (rest[2] - '0');
    const int minutes = (rest[4] - '0') * 10 + (rest[5] - '0');
    offset = (int64_t{hours} * 60 + minutes) * 60;
    if (rest[0] == '-') offset = -offset;
  } else {
    return InvalidArgument("\"" + text + "\" is not an RFC 3339 time (bad zone)");
  }
  return std::chrono::system_clock::from_time_t(t - offset) + std::chrono::microseconds(micros);
}

std::string FormatRfc3339(std::chrono::system_clock::time_point t, bool micros) {
  auto secs = std::chrono::time_point_cast<std::chrono::seconds>(t);
  if (secs > t) secs -= std::chrono::seconds(1);
  time_t tt = std::chrono::system_clock::to_time_t(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out = buf;
  if (micros) {
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(t - secs).count();
    char frac[32];
    std::snprintf(frac, sizeof frac, ".%06lld", static_cast<long long>(us));
    out += frac;
  }
  return out + "Z";
}

}  // namespace allocguard
