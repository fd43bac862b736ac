#include "operator/canary/job_builder.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>

#include "operator/admission/allocator_injection.h"
#include "operator/api/json_fields.h"
#include "operator/api/json_patch.h"
#include "operator/api/names.h"
#include "operator/api/object_meta.h"
#include "operator/api/policy.h"
#include "operator/api/quantity.h"
#include "operator/memory/memory_sample.h"

namespace allocguard::canary {
namespace {

using nlohmann::json;

constexpr size_t kMaxNameLength = 63;
constexpr char kReservedCandidate[] = "candidate";
constexpr char kDriverTmpVolume[] = "allocguard-replay-tmp";
constexpr char kDriverOutDir[] = "/tmp/allocguard-replay";

// Env vars the injection sets for an allocator's tunables (see
// admission::AllocatorTunableEnv); mimalloc's all start with MIMALLOC_.
bool IsTunableEnv(const std::string& name) {
  static const std::set<std::string> kNames = {
      "MALLOC_ARENA_MAX", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_",
      "MALLOC_CONF",      "TCMALLOC_RELEASE_RATE",  "TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES",
  };
  return kNames.contains(name) || name.rfind("MIMALLOC_", 0) == 0;
}

std::string StringField(const json& obj, const char* key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

bool IsOwnContainer(const std::string& name) {
  return name == api::kInitContainerName || name == api::kGuardContainerName ||
         name == api::kDriverContainerName;
}

// Removes the entries of obj[key] (a list) for which `drop` is true.
template <typename Pred>
void EraseFromList(json& obj, const char* key, Pred drop) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_array()) return;
  json kept = json::array();
  for (json& entry : *it) {
    if (!drop(entry)) kept.push_back(std::move(entry));
  }
  *it = std::move(kept);
}

// LD_PRELOAD without the entries under the library mount path.
std::string PreloadWithoutOurs(const std::string& value) {
  const std::string ours = std::string(api::kLibraryMountPath) + "/";
  std::string out;
  std::string part;
  auto flush = [&] {
    if (!part.empty() && part.rfind(ours, 0) != 0) out += (out.empty() ? "" : ":") + part;
    part.clear();
  };
  for (char c : value) {
    if (c == ':' || c == ' ' || c == '\t') {
      flush();
    } else {
      part += c;
    }
  }
  flush();
  return out;
}

// Undoes an earlier allocguard injection in a pod template (spec and
// metadata), so the variant's injection starts from the user's own spec.
void StripInjection(json& metadata, json& spec) {
  json* annotations = metadata.contains("annotations") && metadata["annotations"].is_object()
                          ? &metadata["annotations"]
                          : nullptr;
  const bool was_injected = annotations && annotations->contains(api::kInjectedAnnotation);
  for (const char* key : {"initContainers", "containers"}) {
    EraseFromList(spec, key, [](const json& c) { return IsOwnContainer(StringField(c, "name")); });
    auto it = spec.find(key);
    if (it == spec.end() || !it->is_array()) continue;
    for (json& container : *it) {
      if (!container.is_object()) continue;
      EraseFromList(container, "volumeMounts", [](const json& m) {
        const std::string name = StringField(m, "name");
        return name == api::kLibraryVolumeName || name == api::kBooksVolumeName;
      });
      EraseFromList(container, "env", [&](json& var) {
        const std::string name = StringField(var, "name");
        if (was_injected && (IsTunableEnv(name) || name == "ALLOCGUARD_STATS_DIR")) return true;
        if (name != "LD_PRELOAD" || !var.contains("value") || !var["value"].is_string()) {
          return false;
        }
        std::string rest = PreloadWithoutOurs(var["value"].get<std::string>());
        if (rest.empty()) return true;
        var["value"] = rest;
        return false;
      });
    }
  }
  EraseFromList(spec, "volumes", [](const json& v) {
    const std::string name = StringField(v, "name");
    return name == api::kLibraryVolumeName || name == api::kBooksVolumeName;
  });
  if (annotations) {
    for (const char* a :
         {api::kInjectedAnnotation, api::kPolicyAnnotation, api::kPolicyGenerationAnnotation}) {
      annotations->erase(a);
    }
  }
}

// A volume backed by a claim (persistentVolumeClaim, or an ephemeral one
// that would create a claim) becomes an emptyDir of the same name.
void ReplaceClaimsWithEmptyDirs(json& spec) {
  auto it = spec.find("volumes");
  if (it == spec.end() || !it->is_array()) return;
  for (json& volume : *it) {
    if (!volume.is_object()) continue;
    if (volume.contains("persistentVolumeClaim") || volume.contains("ephemeral")) {
      volume = {{"name", StringField(volume, "name")}, {"emptyDir", json::object()}};
    }
  }
}

// A StatefulSet's claims (CanaryJobOptions::claim_volumes) as emptyDirs.
void AddClaimVolumes(json& spec, const std::vector<ClaimVolume>& claims) {
  if (claims.empty()) return;
  json& volumes = spec["volumes"];
  if (!volumes.is_array()) volumes = json::array();
  for (const ClaimVolume& claim : claims) {
    json empty_dir = json::object();
    if (claim.size_bytes) empty_dir["sizeLimit"] = api::FormatQuantityBytes(*claim.size_bytes);
    json volume = {{"name", claim.name}, {"emptyDir", std::move(empty_dir)}};
    bool replaced = false;
    for (json& v : volumes) {
      if (StringField(v, "name") == claim.name) {
        v = volume;
        replaced = true;
      }
    }
    if (!replaced) volumes.push_back(std::move(volume));
  }
}

// A StatefulSet pod's identity in the canary's pod (CanaryJobOptions::pod_identity).
void SetPodIdentity(json& spec, const std::string& identity) {
  if (!api::IsDnsLabel(identity)) return;  // as spec.hostname must be
  spec["hostname"] = identity;
  for (const char* list : {"initContainers", "containers"}) {
    auto containers = spec.find(list);
    if (containers == spec.end() || !containers->is_array()) continue;
    for (json& container : *containers) {
      if (!container.is_object()) continue;
      auto env = container.find("env");
      if (env == container.end() || !env->is_array()) continue;
      for (json& var : *env) {
        const json* from = api::json_fields::Member(var, "valueFrom");
        const json* field = from == nullptr ? nullptr : api::json_fields::Member(*from, "fieldRef");
        const json* path =
            field == nullptr ? nullptr : api::json_fields::Member(*field, "fieldPath");
        if (path == nullptr || *path != "metadata.name") continue;
        var = {{"name", StringField(var, "name")}, {"value", identity}};
      }
    }
  }
}

std::string FormatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// The value of MALLOC_ARENA_MAX (a literal) in the first selected container
// that sets it.
std::optional<std::string> ArenaMaxInPod(const json& spec, const std::vector<std::string>& names) {
  for (const char* key : {"initContainers", "containers"}) {
    auto it = spec.find(key);
    if (it == spec.end() || !it->is_array()) continue;
    for (const json& c : *it) {
      if (std::find(names.begin(), names.end(), StringField(c, "name")) == names.end()) continue;
      auto env = c.find("env");
      if (env == c.end() || !env->is_array()) continue;
      for (const json& var : *env) {
        if (StringField(var, "name") == "MALLOC_ARENA_MAX" && var.contains("value")) {
          return StringField(var, "value");
        }
      }
    }
  }
  return std::nullopt;
}

json DriverContainer(const api::ReplayCanary& canary, const api::VariantSpec& variant,
                     const std::string& allocator, const CanaryJobOptions& options, bool books) {
  const api::CanarySpec& c = canary.spec.canary;
  api::LoadSpec load = c.load;
  load.seed = api::RerunSeed(load.seed, options.rerun);
  json args = {"replay",
               "--in-pod",
               "--load-json",
               api::RenderLoadFile(load),
               "--port",
               std::to_string(c.load.port),
               "--duration",
               std::to_string(c.duration.count()) + "s",
               "--max-duration",
               std::to_string(std::max(c.max_duration, c.duration).count()) + "s",
               "--interval",
               std::to_string(c.sample_interval.count()) + "ms",
               "--max-slope",
               FormatNumber(static_cast<double>(canary.spec.limits.max_floor_slope_bytes_per_hour) /
                            memory::kBytesPerGiB),
               "--variant",
               variant.name,
               "--allocator",
               allocator,
               "--termination-log",
               kTerminationLogPath,
               "--out",
               kDriverOutDir};
  if (!options.target_comm.empty()) {
    args.push_back("--target-comm");
    args.push_back(options.target_comm);
  }
  json mounts = {{{"name", kDriverTmpVolume}, {"mountPath", "/tmp"}}};
  if (books) {
    args.push_back("--books-dir");
    args.push_back(api::kBooksMountPath);
    mounts.push_back(
        {{"name", api::kBooksVolumeName}, {"mountPath", api::kBooksMountPath}, {"readOnly", true}});
  }
  return {{"name", api::kDriverContainerName},
          {"image", options.image},
          {"imagePullPolicy", "IfNotPresent"},
          {"args", std::move(args)},
          {"terminationMessagePath", kTerminationLogPath},
          {"terminationMessagePolicy", "File"},
          {"resources",
           {{"requests", {{"cpu", "100m"}, {"memory", "64Mi"}}},
            {"limits", {{"cpu", "1"}, {"memory", "256Mi"}}}}},
          {"securityContext", admission::RestrictedSecurityContext()},
          {"volumeMounts", std::move(mounts)}};
}

}  // namespace

const char* ArenaLimitSourceName(ArenaLimitSource source) {
  switch (source) {
    case ArenaLimitSource::kNodeSelector:
      return "NodeSelector";
    case ArenaLimitSource::kArenaMaxEnv:
      return "ArenaMaxEnv";
    case ArenaLimitSource::kCanaryNode:
      return "CanaryNode";
  }
  return "CanaryNode";
}

std::string ShortenName(const std::string& name, size_t max) {
  if (name.size() <= max) return name;
  uint32_t hash = 2166136261u;  // FNV-1a
  for (unsigned char c : name) {
    hash ^= c;
    hash *= 16777619u;
  }
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "-%08x", hash);
  std::string head = name.substr(0, max - 9);
  while (!head.empty() && (head.back() == '-' || head.back() == '.')) head.pop_back();
  return head + suffix;
}

std::string CanaryJobName(const std::string& canary, const std::string& variant, int rerun) {
  const std::string suffix = rerun > 0 ? "-r" + std::to_string(rerun) : "";
  return ShortenName(canary + "-" + variant + suffix, kMaxNameLength);
}

const api::AllocatorSpec& VariantAllocator(const api::ReplayCanary& canary,
                                           const api::VariantSpec& variant) {
  return variant.name == kReservedCandidate ? canary.spec.candidate_allocator : variant.allocator;
}

Result<json> BuildCanaryJob(const api::ReplayCanary& canary, const api::VariantSpec& variant,
                            const CanaryJobOptions& options, CanaryJobInfo* info) {
  if (options.image.empty()) return InvalidArgument("the canary Job needs the allocguard image");
  if (variant.name.empty()) return InvalidArgument("variant has no name");
  json pod_template = json::parse(canary.spec.pod_template_json, nullptr, false);
  if (pod_template.is_discarded() || !pod_template.is_object()) {
    return InvalidArgument("spec.template of ReplayCanary " + canary.name +
                           " is not a JSON pod template");
  }
  if (!pod_template.contains("spec") || !pod_template["spec"].is_object()) {
    return InvalidArgument("spec.template.spec of ReplayCanary " + canary.name +
                           " is missing or not an object");
  }
  json metadata = pod_template.contains("metadata") && pod_template["metadata"].is_object()
                      ? pod_template["metadata"]
                      : json::object();
  json spec = pod_template["spec"];
  for (const char* key : {"initContainers", "containers", "volumes"}) {
    if (spec.contains(key) && !spec[key].is_null() && !spec[key].is_array()) {
      return InvalidArgument(std::string("spec.template.spec.") + key + " is not a list");
    }
  }

  StripInjection(metadata, spec);
  ReplaceClaimsWithEmptyDirs(spec);
  AddClaimVolumes(spec, options.claim_volumes);
  if (!options.pod_identity.empty()) SetPodIdentity(spec, options.pod_identity);
  spec["restartPolicy"] = "Never";
  spec["shareProcessNamespace"] = true;

  // The arena limit of production.
  const api::CanarySpec& c = canary.spec.canary;
  api::AllocatorSpec allocator = VariantAllocator(canary, variant);
  const bool glibc = allocator.name == api::Allocator::kGlibc;
  if (!c.node_selector.empty()) {
    json& selector = spec["nodeSelector"];
    if (!selector.is_object()) selector = json::object();
    for (const auto& [k, v] : c.node_selector) selector[k] = v;
  } else if (glibc && c.production_cpus && !allocator.glibc_arena_max) {
    allocator.glibc_arena_max = 8 * *c.production_cpus;
  }

  std::vector<std::string> conflicts;
  admission::InjectionOptions injection{
      .image = options.image,
      .allocator_dir = options.allocator_dir,
      .libc = admission::ResolveLibc(canary.spec.libc,
                                     api::ParseObjectMeta(json{{"metadata", metadata}}).annotations,
                                     &conflicts),
      .stats_agent = options.stats_agent};
  AG_RETURN_IF_ERROR(
      admission::InjectAllocator(spec, allocator, options.containers, injection, &conflicts)
          .WithContext("injecting " + admission::AllocatorLabel(allocator.name)));

  ArenaLimit arena;
  const auto arena_env =
      glibc ? ArenaMaxInPod(spec, admission::SelectContainerNames(spec, options.containers))
            : std::nullopt;
  if (arena_env) {
    arena = {ArenaLimitSource::kArenaMaxEnv, *arena_env};
  } else if (!c.node_selector.empty()) {
    std::string value;
    for (const auto& [k, v] : c.node_selector) {
      if (!value.empty()) value += ',';
      value.append(k).append("=").append(v);
    }
    arena = {ArenaLimitSource::kNodeSelector, value};
  }

  const std::string allocator_name = admission::AllocatorLabel(allocator.name);
  if (!spec.contains("containers") || !spec["containers"].is_array()) {
    spec["containers"] = json::array();
  }
  if (!spec.contains("volumes") || !spec["volumes"].is_array()) spec["volumes"] = json::array();
  const bool books = api::IndexOfNamed(spec["volumes"], api::kBooksVolumeName).has_value();
  spec["containers"].push_back(DriverContainer(canary, variant, allocator_name, options, books));
  spec["volumes"].push_back({{"name", kDriverTmpVolume}, {"emptyDir", json::object()}});

  const std::string name = CanaryJobName(canary.name, variant.name, options.rerun);
  const json labels = {{api::kCanaryLabel, ShortenName(canary.name, kMaxNameLength)},
                       {api::kVariantLabel, ShortenName(variant.name, kMaxNameLength)},
                       {api::kManagedByLabel, api::kManagedByValue}};
  json annotations = metadata.contains("annotations") && metadata["annotations"].is_object()
                         ? metadata["annotations"]
                         : json::object();
  annotations[api::kInjectAnnotation] = "false";
  annotations["sidecar.istio.io/inject"] = "false";
  annotations["linkerd.io/inject"] = "disabled";

  const std::string arena_text = std::string(ArenaLimitSourceName(arena.source)) +
                                 (arena.value.empty() ? "" : "=" + arena.value);
  const auto deadline = std::max(c.max_duration, c.duration) +
                        std::chrono::duration_cast<std::chrono::seconds>(c.load.ready_timeout) +
                        options.deadline_slack;
  json job = {{"apiVersion", "batch/v1"},
              {"kind", "Job"},
              {"metadata",
               {{"name", name},
                {"namespace", canary.ns},
                {"labels", labels},
                {"annotations", {{kArenaLimitAnnotation, arena_text}}},
                {"ownerReferences",
                 {{{"apiVersion", api::kApiVersion},
                   {"kind", "ReplayCanary"},
                   {"name", canary.name},
                   {"uid", canary.uid},
                   {"controller", true},
                   {"blockOwnerDeletion", true}}}}}},
              {"spec",
               {{"backoffLimit", 0},
                {"activeDeadlineSeconds", deadline.count()},
                {"ttlSecondsAfterFinished", options.ttl_after_finished.count()},
                {"template",
                 {{"metadata", {{"labels", labels}, {"annotations", std::move(annotations)}}},
                  {"spec", std::move(spec)}}}}}};

  if (info) {
    info->name = name;
    info->allocator = allocator_name;
    info->arena_limit = arena;
    info->conflicts = std::move(conflicts);
  }
  return job;
}

}  // namespace allocguard::canary
