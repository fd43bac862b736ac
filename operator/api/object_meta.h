#pragma once

// The metadata every Kubernetes object carries (metav1.ObjectMeta), as a C++
// value read once at the edge. The operator reads objects from its caches
// and from admission requests, and anyone who may write them may have put
// anything there; ParseObjectMeta never throws: a member of the wrong type
// reads as absent and is reported with its path ("metadata.labels.app: must
// be a string, got 7").

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace allocguard::api {

// metadata.ownerReferences[] entry.
struct OwnerReference {
  std::string api_version;  // apiVersion
  std::string kind;
  std::string name;
  std::string uid;
  bool controller = false;

  bool operator==(const OwnerReference&) const = default;
};

struct ObjectMeta {
  std::string name;
  std::string namespace_name;  // namespace
  std::string uid;
  std::string resource_version;  // resourceVersion
  int64_t generation = 0;
  std::string creation_timestamp;  // creationTimestamp, RFC 3339 as written
  std::string deletion_timestamp;  // deletionTimestamp; non-empty while terminating
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::vector<OwnerReference> owner_references;  // ownerReferences

  // annotations[key], or "" when absent.
  std::string Annotation(const std::string& key) const;
  // Whether annotations holds key (an empty value counts).
  bool HasAnnotation(const std::string& key) const;
  // The owner reference with controller: true, or nullptr.
  const OwnerReference* ControllerRef() const;
  // "namespace/name", or "name" for a cluster-scoped object.
  std::string Key() const;
  bool Terminating() const { return !deletion_timestamp.empty(); }

  bool operator==(const ObjectMeta&) const = default;
};

// The `metadata` member of `object` (a whole object, not its metadata).
// An object without metadata gives an empty ObjectMeta; problems are
// appended to `problems` (may be null) under "metadata".
ObjectMeta ParseObjectMeta(const nlohmann::json& object,
                           std::vector<std::string>* problems = nullptr);

// The `metadata` member for an object the operator builds: the members of
// ObjectMeta that are set, as JSON (the server's own members, such as uid,
// resourceVersion, generation and the timestamps, only when set).
nlohmann::json ObjectMetaToJson(const ObjectMeta& meta);

}  // namespace allocguard::api
