#pragma once

// Durations as users write them in policies, load files and flags.

#include <chrono>
#include <string>

#include "operator/common/status.h"

namespace allocguard {

// Accepts "250ms", "30s", "2m", "1h", Go-style sums of those ("1h30m",
// "1m0.5s") and bare seconds ("30"), up to kMaxDuration; longer ones are
// refused as too long. Never throws.
Result<std::chrono::milliseconds> ParseDuration(const std::string& text);
// The longest duration ParseDuration reads: 10^15 ms less one (about 31 700
// years), where a double still holds every millisecond exactly.
inline constexpr std::chrono::milliseconds kMaxDuration{999'999'999'999'999};

// The longest a canary variant runs. A policy asking for longer is refused
// (spec.canary.duration, in the CRD and in the parser), and a replay CSV whose
// header plans longer keeps the default judge settings: the judge plans one
// look per minute of it, and a plan of a week of looks took minutes.
inline constexpr std::chrono::hours kMaxCanaryDuration{24};

}  // namespace allocguard
