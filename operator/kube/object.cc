#include "operator/kube/object.h"

namespace allocguard::kube {

std::string StringField(const Object& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

const Object& ObjectField(const Object& object, const char* key) {
  static const Object* const kEmpty = new Object(Object::object());
  if (!object.is_object()) return *kEmpty;
  auto it = object.find(key);
  return it != object.end() && it->is_object() ? *it : *kEmpty;
}

int64_t IntField(const Object& object, const char* key, int64_t fallback) {
  if (!object.is_object()) return fallback;
  auto it = object.find(key);
  return it != object.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

const Object& FieldOrNull(const Object& object, const char* key) {
  static const Object* const kNull = new Object();
  if (!object.is_object()) return *kNull;
  auto it = object.find(key);
  return it != object.end() ? *it : *kNull;
}

std::map<std::string, std::string> StringMap(const Object& object) {
  std::map<std::string, std::string> out;
  if (!object.is_object()) return out;
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (it.value().is_string()) out[it.key()] = it.value().get<std::string>();
  }
  return out;
}

}  // namespace allocguard::kube
