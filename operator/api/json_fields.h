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

// The reads of an object's metadata and a Deployment's pause that the
// decisions of controllers/ and admission/ share, one meaning each:
// metadata.annotations[key] when it is a string, "" otherwise (absent, null,
// another type, or an object without metadata).
std::string Annotation(const nlohmann::json& object, const char* key);
// Whether metadata.annotations holds key as a string; an empty string counts.
bool HasAnnotation(const nlohmann::json& object, const char* key);
// A Deployment's spec.paused: true only when it is the boolean true.
bool Paused(const nlohmann::json& deployment);

}  // namespace allocguard::api::json_fields
