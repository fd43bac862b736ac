#pragma once

// RFC 3339 times as the Kubernetes API writes them: metav1.Time
// ("2024-05-01T10:00:00Z") and metav1.MicroTime ("2024-05-01T10:00:00.123456Z").
// The one parser and formatter of the operator; the parser never throws
// (times come from objects anyone may write).

#include <chrono>
#include <string>

#include "operator/common/status.h"

namespace allocguard {

// RFC 3339 ("2024-05-01T10:00:00Z", fractional seconds and offsets allowed).
Result<std::chrono::system_clock::time_point> ParseRfc3339(const std::string& text);
// "2024-05-01T10:00:00Z" and, for MicroTime, "2024-05-01T10:00:00.123456Z".
std::string FormatRfc3339(std::chrono::system_clock::time_point t, bool micros);

}  // namespace allocguard
