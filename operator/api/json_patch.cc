#include "operator/api/json_patch.h"

namespace allocguard::api {

using nlohmann::json;

namespace {

constexpr char kMetadata[] = "metadata";
constexpr char kAnnotations[] = "annotations";
constexpr char kLabels[] = "labels";
constexpr char kSpec[] = "spec";
constexpr char kPaused[] = "paused";

// A JSON Pointer reference token (RFC 6901): "~" as "~0", "/" as "~1".
void AppendEscaped(std::string& path, const std::string& key) {
  for (char c : key) {
    if (c == '~') {
      path += "~0";
    } else if (c == '/') {
      path += "~1";
    } else {
      path += c;
    }
  }
}

json Op(const char* op, const std::string& path) { return json{{"op", op}, {"path", path}}; }

json Op(const char* op, const std::string& path, const json& value) {
  return json{{"op", op}, {"path", path}, {"value", value}};
}

// json::diff's walk: `path` is the pointer of `source` and `target`, kept as
// it was on return.
void AppendDiff(const json& source, const json& target, std::string& path, json& out) {
  const bool container = source.is_array() || source.is_object();
  if (source.type() != target.type() || !container) {
    // json::diff's first test: equal values (1 and 1.0 included) need nothing.
    if (!(source == target)) out.push_back(Op("replace", path, target));
    return;
  }
  const size_t length = path.size();
  if (source.is_array()) {
    size_t i = 0;
    for (; i < source.size() && i < target.size(); ++i) {
      path += '/';
      path += std::to_string(i);
      AppendDiff(source[i], target[i], path, out);
      path.resize(length);
    }
    // What `source` has beyond `target`: removed from the last index down,
    // so that each index is still valid when its operation applies.
    for (size_t j = source.size(); j > i; --j) {
      path += '/';
      path += std::to_string(j - 1);
      out.push_back(Op("remove", path));
      path.resize(length);
    }
    for (; i < target.size(); ++i) out.push_back(Op("add", path + "/-", target[i]));
    return;
  }
  for (auto it = source.cbegin(); it != source.cend(); ++it) {
    path += '/';
    AppendEscaped(path, it.key());
    auto in_target = target.find(it.key());
    if (in_target != target.end()) {
      AppendDiff(it.value(), *in_target, path, out);
    } else {
      out.push_back(Op("remove", path));
    }
    path.resize(length);
  }
  for (auto it = target.cbegin(); it != target.cend(); ++it) {
    if (source.contains(it.key())) continue;
    path += '/';
    AppendEscaped(path, it.key());
    out.push_back(Op("add", path, it.value()));
    path.resize(length);
  }
}

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

json JsonPatchBetween(const json& source, const json& target) {
  json out = json::array();
  std::string path;
  AppendDiff(source, target, path, out);
  return out;
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
