#pragma once

// A Pod as the admission webhooks read it: the parts of the Pod, its PodSpec
// and its containers that the allocator injection and the guard sidecar
// decide by, as C++ values read once at the edge (the AdmissionReview's
// object). Anyone who may create a Pod may have put anything there: ParsePod
// never throws; a member of the wrong type reads as absent and is reported
// with its path ("spec.containers[1].env[0].name: must be a string, got 7").
//
// Only reads are typed here. The webhook's JSON Patch is still computed over
// the original document, so members this file does not model survive
// untouched.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/api/object_meta.h"

namespace allocguard::api {

// containers[].env[] entry.
struct EnvVar {
  std::string name;
  // `value` when it is a string (absent, null or another type: nullopt).
  std::optional<std::string> value;
  // Whether the entry has a `valueFrom` member, whatever its content.
  bool has_value_from = false;

  bool operator==(const EnvVar&) const = default;
};

// containers[].volumeMounts[] entry.
struct VolumeMount {
  std::string name;
  std::string mount_path;  // mountPath

  bool operator==(const VolumeMount&) const = default;
};

// The members of a (pod or container) securityContext that the guard copies.
struct SecurityContext {
  std::optional<int64_t> run_as_user;   // runAsUser
  std::optional<int64_t> run_as_group;  // runAsGroup

  bool operator==(const SecurityContext&) const = default;
};

struct Container {
  std::string name;
  std::vector<EnvVar> env;
  std::vector<VolumeMount> volume_mounts;  // volumeMounts
  // terminationMessagePolicy; nullopt when absent (or not a string).
  std::optional<std::string> termination_message_policy;
  // resources.limits.memory as written ("512Mi"); "" when absent.
  std::string memory_limit;
  SecurityContext security_context;  // securityContext

  // The entry of env named `wanted`, or nullptr.
  const EnvVar* Env(const std::string& wanted) const;

  bool operator==(const Container&) const = default;
};

struct PodSpec {
  std::vector<Container> init_containers;  // initContainers
  std::vector<Container> containers;
  std::vector<std::string> volume_names;  // volumes[].name
  // shareProcessNamespace; nullopt when absent.
  std::optional<bool> share_process_namespace;
  bool host_network = false;         // hostNetwork
  SecurityContext security_context;  // securityContext

  // Whether the spec itself is not an object (null included), and whether
  // each list member is not absent, null or a list of objects (what
  // InjectAllocator requires of them).
  bool malformed = false;
  bool init_containers_malformed = false;
  bool containers_malformed = false;
  bool volumes_malformed = false;

  // The container named `wanted` in initContainers, then containers; nullptr
  // when there is none.
  const Container* FindContainer(const std::string& wanted) const;

  bool operator==(const PodSpec&) const = default;
};

struct Pod {
  ObjectMeta metadata;
  std::string generate_name;  // metadata.generateName
  // Whether `spec` is present and an object (a Pod the webhook can inject).
  bool has_spec = false;
  PodSpec spec;

  // metadata.name, or "<generateName>*" for a pod named by generateName, or
  // "(unnamed pod)"; for messages.
  std::string DisplayName() const;

  bool operator==(const Pod&) const = default;
};

// Reads a PodSpec object; problems are appended under `path` (may be null).
PodSpec ParsePodSpec(const nlohmann::json& object, const std::string& path,
                     std::vector<std::string>* problems = nullptr);

// Reads a whole Pod (or anything shaped like one: a non-object gives an
// empty Pod). Problems are appended to `problems` (may be null).
Pod ParsePod(const nlohmann::json& object, std::vector<std::string>* problems = nullptr);

}  // namespace allocguard::api
