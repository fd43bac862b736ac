#pragma once

// Kubernetes resource quantities ("512Mi", "1.5Gi", "2G", "1048576") as bytes,
// and the duration strings of the CRDs ("15m", "1h30m").

#include <chrono>
#include <cstdint>
#include <string>

#include "operator/common/status.h"

namespace allocguard::api {

// Parses a non-negative Kubernetes quantity in bytes: a decimal number
// (optionally with a fraction) and an optional suffix, binary (Ki Mi Gi Ti Pi
// Ei) or decimal (k M G T P E). A fraction of a byte rounds up, as Kubernetes
// does ("0.5" is 1). Refused, with a message quoting the text: signs,
// exponent notation ("1e3"), milli and smaller suffixes, and values above
// INT64_MAX.
Result<int64_t> ParseQuantityBytes(const std::string& text);

// The shortest exact quantity for a byte count: 536870912 -> "512Mi",
// 1500 -> "1500". Round-trips through ParseQuantityBytes. REQUIRES bytes >= 0.
std::string FormatQuantityBytes(int64_t bytes);

// "15m", "2s", "1500ms", "90m": the largest of h, m, s, ms that divides the
// duration exactly. Accepted by ParseDuration (which reads back the same
// duration) and by the CRDs' duration pattern.
// REQUIRES 0 <= d <= kMaxDuration (operator/common/duration.h; about 31 700 years).
std::string FormatDuration(std::chrono::milliseconds d);

}  // namespace allocguard::api
