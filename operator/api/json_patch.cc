#include "operator/api/json_patch.h"

namespace allocguard::api {

using nlohmann::json;

namespace {

constexpr char kMetadata[] = "metadata";
constexpr char kAnnotations[] = "annotations";
constexpr char kLabels[] = "labels";
constexpr char kSpec[] = "spec";
constexpr char kPaused[] = "paused";

}  // namespace

json& MemberOf(json& object, const std::string& key) {
  if (!object.is_object()) object = json::object();
  return object[key];
}

json& ObjectMemberOf(json& object, const std::string& key) {
  json& member = MemberOf(object, key);
  if (!member.is_object()) member = json::object();
  return member;
}

json& ListMemberOf(json& object, const std::string& key) {
  json& member = MemberOf(object, key);
  if (!member.is_array()) member = json::array();
  return member;
}

std::optional<size_t> IndexOfNamed(const json& list, const std::string& name) {
  if (!list.is_array()) return std::nullopt;
  for (size_t i = 0; i < list.size(); ++i) {
    const json& entry = list[i];
    if (!entry.is_object()) continue;
    auto it = entry.find("name");
    if (it != entry.end() && it->is_string() && it->get_ref<const std::string&>() == name) return i;
  }
  return std::nullopt;
}

void SetAnnotation(json& object, const std::string& key, const std::string& value) {
  ObjectMemberOf(ObjectMemberOf(object, kMetadata), kAnnotations)[key] = value;
}

void RemoveAnnotation(json& object, const std::string& key) {
  ObjectMemberOf(ObjectMemberOf(object, kMetadata), kAnnotations).erase(key);
}

void SetLabel(json& object, const std::string& key, const std::string& value) {
  ObjectMemberOf(ObjectMemberOf(object, kMetadata), kLabels)[key] = value;
}

void SetPaused(json& deployment, bool paused) {
  ObjectMemberOf(deployment, kSpec)[kPaused] = paused;
}

json MergePatchBetween(const json& before, const json& after) {
  if (!before.is_object() || !after.is_object()) return after;
  json patch = json::object();
  for (const auto& [key, value] : before.items()) {
    if (!after.contains(key)) patch[key] = nullptr;
  }
  for (const auto& [key, value] : after.items()) {
    auto it = before.find(key);
    if (it == before.end()) {
      patch[key] = value;
    } else if (*it != value) {
      patch[key] = MergePatchBetween(*it, value);
    }
  }
  return patch;
}

}  // namespace allocguard::api
