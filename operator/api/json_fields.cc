#include "operator/api/json_fields.h"

#include <cmath>
#include <limits>

namespace allocguard::api::json_fields {

using nlohmann::json;

std::string Path(const std::string& base, const std::string& key) {
  return base.empty() ? key : base + "." + key;
}

std::string Item(const std::string& base, size_t i) { return base + "[" + std::to_string(i) + "]"; }

std::string Dump(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); }

const json* Member(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

Result<int64_t> AsInt(const json& v, const std::string& path) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return InvalidArgument(path + ": is too large");
    }
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e18) {
      return static_cast<int64_t>(d);
    }
  }
  return InvalidArgument(path + ": must be an integer, got " + Dump(v));
}

namespace {

const nlohmann::json& AnnotationMember(const nlohmann::json& object, const char* key) {
  static const nlohmann::json kNull;
  const nlohmann::json* metadata = Member(object, "metadata");
  const nlohmann::json* annotations =
      metadata == nullptr ? nullptr : Member(*metadata, "annotations");
  const nlohmann::json* value = annotations == nullptr ? nullptr : Member(*annotations, key);
  return value == nullptr ? kNull : *value;
}

}  // namespace

std::string Annotation(const nlohmann::json& object, const char* key) {
  const nlohmann::json& value = AnnotationMember(object, key);
  return value.is_string() ? value.get<std::string>() : "";
}

bool HasAnnotation(const nlohmann::json& object, const char* key) {
  return AnnotationMember(object, key).is_string();
}

bool Paused(const nlohmann::json& deployment) {
  const nlohmann::json* spec = Member(deployment, "spec");
  const nlohmann::json* paused = spec == nullptr ? nullptr : Member(*spec, "paused");
  return paused != nullptr && paused->is_boolean() && paused->get<bool>();
}

}  // namespace allocguard::api::json_fields
