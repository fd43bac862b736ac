// The headers ALLOCGUARD_PCH precompiles once, for every C++ target of the
// tree (cmake/precompiled_headers.cmake): the standard headers most sources
// include and nlohmann/json, which nearly every source reaches.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
