#pragma once

// The release this binary belongs to: the repository's VERSION file, read by
// CMake at configure time (docs/install.md, "Versions").

#include <string_view>

namespace allocguard {

// "0.1.0".
std::string_view Version();

}  // namespace allocguard
