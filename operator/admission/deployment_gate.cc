#include "operator/admission/deployment_gate.h"

#include <openssl/evp.h>

#include <array>
#include <cstdio>
#include <utility>

#include "operator/api/json_fields.h"
#include "operator/api/names.h"

namespace allocguard::admission {
namespace {

using nlohmann::json;

constexpr char kAllocguardPrefix[] = "allocguard.io/";

const json& Field(const json& object, const char* key) {
  static const json kNull;
  if (!object.is_object()) return kNull;
  auto it = object.find(key);
  return it == object.end() ? kNull : *it;
}

using api::json_fields::Annotation;
using api::json_fields::HasAnnotation;
using api::json_fields::Paused;

std::string Sha256Hex(const std::string& data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest.data(), &length, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    char byte[3];
    std::snprintf(byte, sizeof(byte), "%02x", digest[i]);
    hex += byte;
  }
  return hex;
}

GateDecision Allow(std::string reason) {
  GateDecision decision;
  decision.reason = std::move(reason);
  return decision;
}

// Sets metadata.annotations[key] = value in `deployment`.
void SetAnnotation(json& deployment, const char* key, const std::string& value) {
  json& metadata = deployment["metadata"];
  if (!metadata.is_object()) metadata = json::object();
  json& annotations = metadata["annotations"];
  if (!annotations.is_object()) annotations = json::object();
  annotations[key] = value;
}

}  // namespace

std::string TemplateHash(const json& pod_template) {
  const json& metadata = Field(pod_template, "metadata");
  json labels = Field(metadata, "labels");
  if (!labels.is_object()) labels = json::object();
  json annotations = json::object();
  const json& all = Field(metadata, "annotations");
  if (all.is_object()) {
    for (auto it = all.begin(); it != all.end(); ++it) {
      if (it.key().rfind(kAllocguardPrefix, 0) == 0) annotations[it.key()] = it.value();
    }
  }
  json spec = Field(pod_template, "spec");
  if (spec.is_null()) spec = json::object();
  const json canonical = {{"annotations", annotations}, {"labels", labels}, {"spec", spec}};
  return Sha256Hex(canonical.dump()).substr(0, 16);
}

GateDecision DecideDeploymentGate(const GateInput& input) {
  const json& deployment = input.new_deployment;
  if (!input.policy) return Allow("no AllocatorPolicy governs this Deployment");
  const api::AllocatorPolicy& policy = *input.policy;
  const std::string ns = [&] {
    const json& value = Field(Field(deployment, "metadata"), "namespace");
    return value.is_string() ? value.get<std::string>() : policy.ns;
  }();
  if (ns == "kube-system" ||
      (!input.operator_namespace.empty() && ns == input.operator_namespace)) {
    return Allow("Deployments in " + ns + " are never gated");
  }
  if (policy.spec.rollout.mode == api::RolloutMode::kOff) {
    return Allow("AllocatorPolicy " + policy.name + " has rollout mode Off");
  }
  const json& pod_template = Field(Field(deployment, "spec"), "template");
  if (Annotation(deployment, api::kInjectAnnotation) == "false" ||
      Annotation(pod_template, api::kInjectAnnotation) == "false") {
    return Allow(std::string("the Deployment opted out (") + api::kInjectAnnotation +
                 ": \"false\")");
  }

  GateDecision decision;
  decision.template_hash = TemplateHash(pod_template);
  const std::string& hash = decision.template_hash;
  const bool update =
      input.operation == AdmissionOperation::kUpdate && !input.old_deployment.is_null();
  if (update && TemplateHash(Field(Field(input.old_deployment, "spec"), "template")) == hash) {
    decision.reason = "the pod template did not change (template " + hash + ")";
    return decision;
  }

  json mutated = deployment;
  if (input.has_flat_verdict && input.has_flat_verdict(hash)) {
    decision.reason = "template " + hash + " already has a Flat verdict";
    if (HasAnnotation(deployment, api::kHeldCandidateAnnotation)) {
      mutated["metadata"]["annotations"].erase(api::kHeldCandidateAnnotation);
      if (Paused(deployment)) mutated["spec"]["paused"] = false;
      decision.action = GateAction::kRelease;
      decision.reason +=
          "; the hold of " + Annotation(deployment, api::kHeldCandidateAnnotation) + " is released";
    }
    SetAnnotation(mutated, api::kReleasedCandidateAnnotation, hash);
    decision.patch = json::diff(deployment, mutated);
    return decision;
  }

  decision.needs_canary = true;
  if (policy.spec.rollout.mode == api::RolloutMode::kAudit) {
    decision.reason = "Audit: template " + hash +
                      " rolls out now and is canaried (AllocatorPolicy " + policy.name + ")";
    return decision;
  }

  decision.action = GateAction::kHold;
  decision.reason = "Enforce: template " + hash + " is held until its replay canary is Flat (" +
                    "AllocatorPolicy " + policy.name + ")";
  json& spec = mutated["spec"];
  if (!spec.is_object()) spec = json::object();
  spec["paused"] = true;
  SetAnnotation(mutated, api::kHeldCandidateAnnotation, hash);
  decision.patch = json::diff(deployment, mutated);
  return decision;
}

}  // namespace allocguard::admission
