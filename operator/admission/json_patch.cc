#include "operator/admission/json_patch.h"

namespace allocguard::admission {

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

}  // namespace allocguard::admission
