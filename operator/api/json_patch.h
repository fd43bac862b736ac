#pragma once

// Writes into a copy of an admitted object, for the webhooks that answer with
// an RFC 6902 JSON Patch: they edit a copy of the original document and
// return JsonPatchBetween(original, copy), so that every member allocguard
// does not model survives untouched. Decisions read typed values (operator/api);
// these functions only write. None throws: a member on the way that is not
// an object is replaced by one (the API server has typed the objects these
// webhooks admit, so this happens only to malformed input).

#include <cstddef>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace allocguard::api {

// object[key], made an object first when `object` is not one; the member is
// created (null) when absent.
nlohmann::json& MemberOf(nlohmann::json& object, const std::string& key);

// MemberOf(object, key), made an object when it is not one.
nlohmann::json& ObjectMemberOf(nlohmann::json& object, const std::string& key);

// MemberOf(object, key), made an empty list when it is not a list.
nlohmann::json& ListMemberOf(nlohmann::json& object, const std::string& key);

// The index of the first object in `list` whose "name" is the string
// `name`; nullopt when there is none or `list` is not a list. For patch
// building, which must find an entry of the document it edits.
std::optional<size_t> IndexOfNamed(const nlohmann::json& list, const std::string& name);

// metadata.annotations[key] = value.
void SetAnnotation(nlohmann::json& object, const std::string& key, const std::string& value);
// Removes metadata.annotations[key] when present.
void RemoveAnnotation(nlohmann::json& object, const std::string& key);
// metadata.labels[key] = value.
void SetLabel(nlohmann::json& object, const std::string& key, const std::string& value);
// spec.paused = paused (a Deployment).
void SetPaused(nlohmann::json& deployment, bool paused);

// The RFC 6902 JSON Patch that turns `source` into `target`: exactly what
// nlohmann::json::diff(source, target) returns, operation for operation and
// in the same order, at a fraction of its cost. json::diff compares every
// subtree whole before it descends into it, allocates a patch array and a
// path string at every node it visits, and copies each child patch into its
// parent's; on an admitted Pod that was a sixth of the Pod webhook's CPU
// (docs/benchmarks.md, "Where a review's CPU went"). This walks both
// documents once, builds a path only for an operation it writes, and appends
// to one array.
nlohmann::json JsonPatchBetween(const nlohmann::json& source, const nlohmann::json& target);

// The RFC 7386 JSON merge patch that turns `before` into `after`: members
// removed are null, objects are compared member by member, anything else
// (lists included) is replaced whole. REQUIRES: `after` holds no null
// member, which a merge patch cannot write.
nlohmann::json MergePatchBetween(const nlohmann::json& before, const nlohmann::json& after);

}  // namespace allocguard::api
