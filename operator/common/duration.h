#pragma once

// Durations as users write them in policies, load files and flags.

#include <chrono>
#include <string>

#include "operator/common/status.h"

namespace allocguard {

// Accepts "250ms", "30s", "2m", "1h", Go-style sums of those ("1h30m",
// "1m0.5s") and bare seconds ("30"). Never throws.
Result<std::chrono::milliseconds> ParseDuration(const std::string& text);

}  // namespace allocguard
