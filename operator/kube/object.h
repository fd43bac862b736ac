#pragma once

// Kubernetes objects are JSON documents (nlohmann::json), read defensively.

#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace allocguard::kube {

using Object = nlohmann::json;

// Field access that never throws on data from the server: a missing field,
// a field of another type, or a non-object yields the fallback.
std::string StringField(const Object& object, const char* key);
const Object& ObjectField(const Object& object, const char* key);  // {} when absent
int64_t IntField(const Object& object, const char* key, int64_t fallback = 0);
// The field as it is, or null when absent or when object is not an object.
const Object& FieldOrNull(const Object& object, const char* key);
// An object's string members (labels, annotations, nodeSelector); members of
// other types are left out, a non-object gives an empty map.
std::map<std::string, std::string> StringMap(const Object& object);

}  // namespace allocguard::kube
