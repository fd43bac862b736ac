#pragma once

// Small, non-throwing reads of nlohmann::json values for the parsers of
// operator/api (policy.cc, canary_status.cc). Nothing here throws: a value of
// the wrong type is an error naming its path, never a json::type_error.

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "operator/common/status.h"

namespace allocguard::api::json_fields {

// "base.key", or "key" when base is empty.
std::string Path(const std::string& base, const std::string& key);
// "base[i]".
std::string Item(const std::string& base, size_t i);

// JSON text of a value for messages; invalid UTF-8 is replaced.
std::string Dump(const nlohmann::json& v);

// The member, or nullptr when it is absent or null. Non-objects have none.
const nlohmann::json* Member(const nlohmann::json& obj, const char* key);

// An integer (a float with no fraction counts) that fits int64_t; otherwise
// InvalidArgument "<path>: must be an integer, got ...".
Result<int64_t> AsInt(const nlohmann::json& v, const std::string& path);

}  // namespace allocguard::api::json_fields
