#include "operator/admission/allocator_injection.h"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <limits>
#include <utility>

#include "operator/admission/library_layout.h"
#include "operator/api/json_patch.h"
#include "operator/api/names.h"
#include "operator/api/policy.h"

namespace allocguard::admission {

using api::IndexOfNamed;
using api::ListMemberOf;
using api::MemberOf;

namespace {

using nlohmann::json;

bool IsOwnContainer(const std::string& name) {
  return name == api::kInitContainerName || name == api::kGuardContainerName ||
         name == api::kDriverContainerName;
}

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string FormatDouble(double value) {
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  if (ec != std::errc()) {
    std::snprintf(buffer, sizeof(buffer), "%g", value);
    return buffer;
  }
  return std::string(buffer, end);
}

constexpr size_t kAtEnd = std::numeric_limits<size_t>::max();

// Replaces the entry of `list` named `name`, or inserts `entry` at `position`
// (clamped to the end) when there is none.
void UpsertNamed(json& list, const std::string& name, const json& entry, size_t position) {
  if (auto at = IndexOfNamed(list, name)) {
    list[*at] = entry;
    return;
  }
  position = std::min(position, list.size());
  list.insert(list.begin() + static_cast<std::ptrdiff_t>(position), entry);
}

json SmallResources() {
  return {{"requests", {{"cpu", "10m"}, {"memory", "16Mi"}}},
          {"limits", {{"cpu", "100m"}, {"memory", "64Mi"}}}};
}

// Installs `libraries` (the allocator's, the stats agent's, or both) into
// the library volume.
json InitContainer(const std::vector<std::string>& libraries, const InjectionOptions& options) {
  std::string dir = options.allocator_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  json command = {"allocguard", "install-allocator", "--from", dir, "--to", api::kLibraryMountPath};
  for (const std::string& library : libraries) command.push_back(library);
  return {{"name", api::kInitContainerName},
          {"image", options.image},
          {"imagePullPolicy", "IfNotPresent"},
          {"command", command},
          {"volumeMounts",
           {{{"name", api::kLibraryVolumeName}, {"mountPath", api::kLibraryMountPath}}}},
          {"resources", SmallResources()},
          {"securityContext", RestrictedSecurityContext()}};
}

// Splits an LD_PRELOAD value the way ld.so does: on ':' and spaces.
std::vector<std::string> SplitPreload(const std::string& value) {
  std::vector<std::string> parts;
  std::string current;
  for (char c : value) {
    if (c == ':' || c == ' ' || c == '\t') {
      if (!current.empty()) parts.push_back(std::move(current));
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty()) parts.push_back(std::move(current));
  return parts;
}

void AddConflict(std::vector<std::string>* conflicts, std::string message) {
  if (conflicts != nullptr && !Contains(*conflicts, message))
    conflicts->push_back(std::move(message));
}

// Merges `preload` into the container's LD_PRELOAD (`typed` is what the
// container had before).
void MergePreload(json& container, const api::Container& typed, const std::string& preload,
                  std::vector<std::string>* conflicts) {
  const api::EnvVar* var = typed.Env("LD_PRELOAD");
  json& env = ListMemberOf(container, "env");
  if (var == nullptr) {
    env.push_back({{"name", "LD_PRELOAD"}, {"value", preload}});
    return;
  }
  if (var->has_value_from) {
    AddConflict(conflicts, "container \"" + typed.name +
                               "\" takes LD_PRELOAD from valueFrom; allocguard left it alone, so " +
                               preload + " is not preloaded there");
    return;
  }
  std::vector<std::string> parts = SplitPreload(var->value.value_or(""));
  if (Contains(parts, preload)) return;
  // An entry of an earlier injection (another allocator or libc) goes: two
  // allocators preloaded at once would each own some of the process's memory.
  const std::string ours = std::string(api::kLibraryMountPath) + "/";
  std::erase_if(parts, [&](const std::string& p) { return p.rfind(ours, 0) == 0; });
  parts.push_back(preload);
  std::string merged;
  for (const std::string& p : parts) merged += (merged.empty() ? "" : ":") + p;
  if (auto at = IndexOfNamed(env, "LD_PRELOAD")) MemberOf(env[*at], "value") = merged;
}

void SetTunable(json& container, const api::Container& typed, const std::string& name,
                const std::string& value, std::vector<std::string>* conflicts) {
  const api::EnvVar* var = typed.Env(name);
  if (var == nullptr) {
    ListMemberOf(container, "env").push_back({{"name", name}, {"value", value}});
    return;
  }
  if (!var->has_value_from && var->value == value) return;
  std::string theirs =
      var->has_value_from ? "a valueFrom reference" : "\"" + var->value.value_or("") + "\"";
  AddConflict(conflicts, "container \"" + typed.name + "\" sets " + name + " to " + theirs +
                             "; allocguard kept it and did not apply the policy's \"" + value +
                             "\"");
}

// Mounts the library volume read-only; false (with a conflict) when another
// volume already occupies the mount path.
bool MountLibrary(json& container, const api::Container& typed,
                  std::vector<std::string>* conflicts) {
  for (const api::VolumeMount& mount : typed.volume_mounts) {
    if (mount.mount_path == api::kLibraryMountPath && mount.name != api::kLibraryVolumeName) {
      AddConflict(conflicts, "container \"" + typed.name + "\" already mounts volume \"" +
                                 mount.name + "\" at " + api::kLibraryMountPath +
                                 "; allocguard preloaded nothing there");
      return false;
    }
  }
  const json ours = {
      {"name", api::kLibraryVolumeName}, {"mountPath", api::kLibraryMountPath}, {"readOnly", true}};
  UpsertNamed(ListMemberOf(container, "volumeMounts"), api::kLibraryVolumeName, ours, kAtEnd);
  return true;
}

// Whether the books mount path is free for allocguard's books volume in the
// container; false (with a conflict) when another volume occupies it.
bool BooksPathFree(const api::Container& typed, std::vector<std::string>* conflicts) {
  for (const api::VolumeMount& mount : typed.volume_mounts) {
    if (mount.mount_path == api::kBooksMountPath && mount.name != api::kBooksVolumeName) {
      AddConflict(conflicts, "container \"" + typed.name + "\" already mounts volume \"" +
                                 mount.name + "\" at " + api::kBooksMountPath +
                                 "; allocguard did not preload the stats agent there");
      return false;
    }
  }
  return true;
}

// Mounts the container's own directory of the books volume.
// REQUIRES: BooksPathFree(typed).
void MountBooks(json& container, const api::Container& typed) {
  const json ours = {{"name", api::kBooksVolumeName},
                     {"mountPath", api::kBooksMountPath},
                     {"subPath", typed.name}};
  UpsertNamed(ListMemberOf(container, "volumeMounts"), api::kBooksVolumeName, ours, kAtEnd);
}

}  // namespace

bool StatsAgentShipped(const std::string& allocator_dir) {
  struct stat st;
  const std::string path = allocator_dir + "/glibc/" + api::kStatsAgentLibrary;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string AllocatorLibraryFile(api::Allocator allocator) {
  switch (allocator) {
    case api::Allocator::kJemalloc:
      return "libjemalloc.so.2";
    case api::Allocator::kMimalloc:
      return "libmimalloc.so.2";
    case api::Allocator::kTcmalloc:
      return "libtcmalloc_minimal.so.4";
    case api::Allocator::kGlibc:
      break;
  }
  return "";
}

std::string AllocatorLabel(api::Allocator allocator) { return api::AllocatorName(allocator); }

api::Libc ResolveLibc(api::Libc policy_libc, const std::map<std::string, std::string>& annotations,
                      std::vector<std::string>* conflicts) {
  auto value = annotations.find(api::kLibcAnnotation);
  if (value == annotations.end()) return policy_libc;
  if (auto libc = api::LibcFromName(value->second)) return *libc;
  AddConflict(conflicts, std::string("annotation ") + api::kLibcAnnotation + " is " +
                             json(value->second).dump() +
                             ", not auto, glibc or musl; allocguard used the " +
                             "policy's libc \"" + api::LibcName(policy_libc) + "\"");
  return policy_libc;
}

std::vector<std::pair<std::string, std::string>> AllocatorTunableEnv(
    const api::AllocatorSpec& allocator) {
  std::vector<std::pair<std::string, std::string>> env;
  switch (allocator.name) {
    case api::Allocator::kGlibc:
      if (allocator.glibc_arena_max) {
        env.emplace_back("MALLOC_ARENA_MAX", std::to_string(*allocator.glibc_arena_max));
      }
      if (allocator.glibc_trim_threshold) {
        env.emplace_back("MALLOC_TRIM_THRESHOLD_", std::to_string(*allocator.glibc_trim_threshold));
      }
      if (allocator.glibc_mmap_threshold) {
        env.emplace_back("MALLOC_MMAP_THRESHOLD_", std::to_string(*allocator.glibc_mmap_threshold));
      }
      break;
    case api::Allocator::kJemalloc:
      if (!allocator.jemalloc_malloc_conf.empty()) {
        env.emplace_back("MALLOC_CONF", allocator.jemalloc_malloc_conf);
      }
      break;
    case api::Allocator::kMimalloc:
      for (const auto& [key, value] : allocator.mimalloc_options) {
        env.emplace_back(api::MimallocOptionEnvName(key), value);
      }
      break;
    case api::Allocator::kTcmalloc:
      if (allocator.tcmalloc_release_rate) {
        env.emplace_back("TCMALLOC_RELEASE_RATE", FormatDouble(*allocator.tcmalloc_release_rate));
      }
      if (allocator.tcmalloc_max_total_thread_cache) {
        env.emplace_back("TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES",
                         std::to_string(*allocator.tcmalloc_max_total_thread_cache));
      }
      break;
  }
  return env;
}

std::vector<std::string> SelectContainerNames(const api::PodSpec& pod_spec,
                                              const std::vector<std::string>& containers) {
  std::vector<std::string> selected;
  for (const auto* list : {&pod_spec.init_containers, &pod_spec.containers}) {
    const bool init = list == &pod_spec.init_containers;
    for (const api::Container& c : *list) {
      if (c.name.empty() || IsOwnContainer(c.name)) continue;
      if (containers.empty() ? !init : Contains(containers, c.name)) selected.push_back(c.name);
    }
  }
  return selected;
}

std::vector<std::string> SelectContainerNames(const json& pod_spec,
                                              const std::vector<std::string>& containers) {
  return SelectContainerNames(api::ParsePodSpec(pod_spec, "spec"), containers);
}

json RestrictedSecurityContext() {
  return {{"runAsNonRoot", true},
          {"runAsUser", 65532},
          {"allowPrivilegeEscalation", false},
          {"readOnlyRootFilesystem", true},
          {"capabilities", {{"drop", {"ALL"}}}},
          {"seccompProfile", {{"type", "RuntimeDefault"}}}};
}

Status InjectAllocator(json& pod_spec, const api::AllocatorSpec& allocator,
                       const std::vector<std::string>& containers, const InjectionOptions& options,
                       std::vector<std::string>* conflicts) {
  const api::PodSpec typed = api::ParsePodSpec(pod_spec, "spec");
  if (typed.malformed) return InvalidArgument("pod spec is not an object");
  for (const auto& [malformed, key] : {std::pair{typed.init_containers_malformed, "initContainers"},
                                       std::pair{typed.containers_malformed, "containers"}}) {
    if (malformed) return InvalidArgument(std::string("spec.") + key + " is not a list of objects");
  }
  const std::string library = AllocatorLibraryFile(allocator.name);
  if (!library.empty() && options.image.empty()) {
    return InvalidArgument("injection image is empty; " + AllocatorLabel(allocator.name) +
                           " needs the allocguard image to copy its library from");
  }
  if (typed.volumes_malformed) return InvalidArgument("spec.volumes is not a list");

  const std::vector<std::string> selected = SelectContainerNames(typed, containers);
  if (selected.empty()) {
    if (!containers.empty()) {
      std::string names;
      for (const std::string& n : containers) names += (names.empty() ? "" : ", ") + n;
      AddConflict(conflicts, "none of the policy's containers (" + names +
                                 ") is in this pod; nothing was injected");
    }
    return Status::Ok();
  }

  const auto tunables = AllocatorTunableEnv(allocator);
  std::string library_to_preload = library;
  if (!library.empty() && !api::HasBuildFor(allocator.name, options.libc)) {
    AddConflict(conflicts, AllocatorLabel(allocator.name) + " has no " +
                               api::LibcName(options.libc) +
                               " build; allocguard set its tunables but preloaded nothing");
    library_to_preload.clear();
  }
  const std::string preload =
      library_to_preload.empty()
          ? ""
          : PreloadPath(api::kLibraryMountPath, options.libc, library_to_preload);
  // The stats agent rides with the allocator (same volume, same libc build),
  // or alone where glibc's own malloc serves the process. Not where the
  // allocator has no build for the libc: the process would run on another
  // malloc than the policy's.
  // glibc needs no image of its own; without one the agent cannot be
  // installed either, and glibc keeps its tunables alone.
  const bool stats =
      options.stats_agent && (!library_to_preload.empty() ||
                              (allocator.name == api::Allocator::kGlibc && !options.image.empty()));
  const std::string stats_preload =
      stats ? PreloadPath(api::kLibraryMountPath, options.libc, api::kStatsAgentLibrary) : "";
  std::vector<std::string> to_install;
  if (!library_to_preload.empty()) to_install.push_back(library);
  if (stats) to_install.emplace_back(api::kStatsAgentLibrary);
  if (!to_install.empty()) {
    UpsertNamed(ListMemberOf(pod_spec, "volumes"), api::kLibraryVolumeName,
                {{"name", api::kLibraryVolumeName}, {"emptyDir", json::object()}}, kAtEnd);
    if (stats) {
      // One 280-byte file per process: 16Mi is room for tens of thousands.
      UpsertNamed(ListMemberOf(pod_spec, "volumes"), api::kBooksVolumeName,
                  {{"name", api::kBooksVolumeName}, {"emptyDir", {{"sizeLimit", "16Mi"}}}}, kAtEnd);
    }
    UpsertNamed(ListMemberOf(pod_spec, "initContainers"), api::kInitContainerName,
                InitContainer(to_install, options), 0);
  }

  // The lists as they are now (the init container may have been added),
  // read again so that entry i of each typed list is entry i of the document.
  const api::PodSpec now = api::ParsePodSpec(pod_spec, "spec");
  for (const auto& [key, list] : {std::pair{"initContainers", &now.init_containers},
                                  std::pair{"containers", &now.containers}}) {
    if (list->empty()) continue;
    json& documents = ListMemberOf(pod_spec, key);
    for (size_t i = 0; i < list->size() && i < documents.size(); ++i) {
      const api::Container& container = (*list)[i];
      json& document = documents[i];
      if (!Contains(selected, container.name)) continue;
      const bool books = stats && BooksPathFree(container, conflicts);
      std::string entries = preload;
      if (books) entries.append(entries.empty() ? "" : ":").append(stats_preload);
      if (!entries.empty() && MountLibrary(document, container, conflicts)) {
        MergePreload(document, container, entries, conflicts);
        if (books) {
          MountBooks(document, container);
          SetTunable(document, container, "ALLOCGUARD_STATS_DIR", api::kBooksMountPath, conflicts);
        }
        // A loader that refuses the library writes to stderr and exits before
        // the program could write a termination message: with the logs as
        // fallback its words reach the pod status, where the circuit breaker
        // and the canary read them. "File" is replaced too: the API server
        // writes it into every pod template it stores, so it is almost never
        // a choice, and the fallback differs from it only for a container
        // that fails without writing a message of its own.
        if (container.termination_message_policy.value_or("File") == "File") {
          MemberOf(document, "terminationMessagePolicy") = "FallbackToLogsOnError";
        }
      }
      for (const auto& [var, value] : tunables) {
        SetTunable(document, container, var, value, conflicts);
      }
    }
  }
  return Status::Ok();
}

}  // namespace allocguard::admission
