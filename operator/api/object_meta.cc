#include "operator/api/object_meta.h"

#include "operator/api/json_fields.h"
#include "operator/api/json_reader.h"

namespace allocguard::api {

using json_fields::Reader;
using nlohmann::json;

std::string ObjectMeta::Annotation(const std::string& key) const {
  auto it = annotations.find(key);
  return it == annotations.end() ? "" : it->second;
}

bool ObjectMeta::HasAnnotation(const std::string& key) const {
  return annotations.find(key) != annotations.end();
}

const OwnerReference* ObjectMeta::ControllerRef() const {
  for (const OwnerReference& ref : owner_references) {
    if (ref.controller) return &ref;
  }
  return nullptr;
}

std::string ObjectMeta::Key() const {
  return namespace_name.empty() ? name : namespace_name + "/" + name;
}

ObjectMeta ParseObjectMeta(const json& object, std::vector<std::string>* problems) {
  ObjectMeta meta;
  const json* metadata = json_fields::Member(object, "metadata");
  if (metadata == nullptr) return meta;
  if (!metadata->is_object()) {
    if (problems != nullptr) {
      problems->push_back("metadata: must be an object, got " + json_fields::Dump(*metadata));
    }
    return meta;
  }
  Reader r(*metadata, "metadata", problems);
  r.String("name", &meta.name);
  r.String("namespace", &meta.namespace_name);
  r.String("uid", &meta.uid);
  r.String("resourceVersion", &meta.resource_version);
  r.Int("generation", &meta.generation);
  r.String("creationTimestamp", &meta.creation_timestamp);
  r.String("deletionTimestamp", &meta.deletion_timestamp);
  r.StringMap("labels", &meta.labels);
  r.StringMap("annotations", &meta.annotations);
  r.Objects("ownerReferences", [&](const json& item, const std::string& path) {
    OwnerReference ref;
    Reader o(item, path, problems);
    o.String("apiVersion", &ref.api_version);
    o.String("kind", &ref.kind);
    o.String("name", &ref.name);
    o.String("uid", &ref.uid);
    o.Bool("controller", &ref.controller);
    meta.owner_references.push_back(std::move(ref));
  });
  return meta;
}

json ObjectMetaToJson(const ObjectMeta& meta) {
  json out = json::object();
  auto put = [&out](const char* key, const std::string& value) {
    if (!value.empty()) out[key] = value;
  };
  put("name", meta.name);
  put("namespace", meta.namespace_name);
  put("uid", meta.uid);
  put("resourceVersion", meta.resource_version);
  if (meta.generation != 0) out["generation"] = meta.generation;
  put("creationTimestamp", meta.creation_timestamp);
  put("deletionTimestamp", meta.deletion_timestamp);
  if (!meta.labels.empty()) out["labels"] = meta.labels;
  if (!meta.annotations.empty()) out["annotations"] = meta.annotations;
  if (!meta.owner_references.empty()) {
    json refs = json::array();
    for (const OwnerReference& ref : meta.owner_references) {
      json entry = {{"apiVersion", ref.api_version},
                    {"kind", ref.kind},
                    {"name", ref.name},
                    {"uid", ref.uid}};
      if (ref.controller) entry["controller"] = true;
      refs.push_back(std::move(entry));
    }
    out["ownerReferences"] = std::move(refs);
  }
  return out;
}

}  // namespace allocguard::api
