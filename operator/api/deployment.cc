#include "operator/api/deployment.h"

#include <openssl/evp.h>

#include <array>
#include <cstdio>

#include "operator/api/json_fields.h"
#include "operator/api/json_reader.h"
#include "operator/api/names.h"

namespace allocguard::api {
namespace {

using json_fields::Reader;
using nlohmann::json;

constexpr char kAllocguardPrefix[] = "allocguard.io/";

// The member, or a null value (absent member, or a non-object holder).
const json& MemberOrNull(const json& object, const char* key) {
  static const json kNull;
  const json* member = json_fields::Member(object, key);
  return member == nullptr ? kNull : *member;
}

// PodTemplateHash, or MeasuredTemplateHash when `with_labels` is false.
std::string TemplateDigest(const json& pod_template, bool with_labels) {
  const json& metadata = MemberOrNull(pod_template, "metadata");
  json labels = with_labels ? MemberOrNull(metadata, "labels") : json();
  if (!labels.is_object()) labels = json::object();
  json annotations = json::object();
  const json& all = MemberOrNull(metadata, "annotations");
  if (all.is_object()) {
    for (auto it = all.begin(); it != all.end(); ++it) {
      if (it.key().rfind(kAllocguardPrefix, 0) == 0) annotations[it.key()] = it.value();
    }
  }
  json spec = MemberOrNull(pod_template, "spec");
  if (spec.is_null()) spec = json::object();
  const json canonical = {{"annotations", annotations}, {"labels", labels}, {"spec", spec}};
  return Sha256Hex(canonical.dump()).substr(0, 16);
}

}  // namespace

std::string Sha256Hex(std::string_view text) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  EVP_Digest(text.data(), text.size(), digest.data(), &length, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    char byte[3];
    std::snprintf(byte, sizeof(byte), "%02x", digest[i]);
    hex += byte;
  }
  return hex;
}

std::string PodTemplateHash(const json& pod_template) {
  return TemplateDigest(pod_template, /*with_labels=*/true);
}

std::string MeasuredTemplateHash(const json& pod_template) {
  return TemplateDigest(pod_template, /*with_labels=*/false);
}

bool HoldsRollout(const ObjectMeta& metadata) {
  return !metadata.Annotation(kHeldCandidateAnnotation).empty();
}

Deployment ParseDeployment(const json& object, std::vector<std::string>* problems) {
  Deployment d;
  d.present = !object.is_null();
  d.metadata = ParseObjectMeta(object, problems);
  const json* spec = json_fields::Member(object, "spec");
  if (spec == nullptr || !spec->is_object()) {
    if (spec != nullptr && problems != nullptr) {
      problems->push_back("spec: must be an object, got " + json_fields::Dump(*spec));
    }
    d.pod_template.hash = PodTemplateHash(json());
    return d;
  }
  Reader r(*spec, "spec", problems);
  if (const json* paused = json_fields::Member(*spec, "paused");
      paused != nullptr && paused->is_boolean()) {
    d.paused = paused->get<bool>();
  } else {
    bool ignored = false;
    r.Bool("paused", &ignored);  // reports a member of another type
  }
  r.Int("replicas", &d.replicas);
  const json& tmpl = MemberOrNull(*spec, "template");
  if (!tmpl.is_null() && !tmpl.is_object()) {
    r.Problem("template", "must be an object, got " + json_fields::Dump(tmpl));
  }
  std::vector<std::string> template_problems;
  d.pod_template.metadata = ParseObjectMeta(tmpl, &template_problems);
  for (const std::string& p : template_problems) r.Report("spec.template." + p);
  d.pod_template.hash = PodTemplateHash(tmpl);
  return d;
}

}  // namespace allocguard::api
