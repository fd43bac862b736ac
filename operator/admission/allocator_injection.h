#pragma once

// Injection of an allocator into a PodSpec: the pure, in-place mutation shared
// by the Pod injection webhook and the canary Jobs (one per variant).
//
// What InjectAllocator adds for jemalloc, mimalloc and tcmalloc:
//   - an emptyDir volume api::kLibraryVolumeName;
//   - an init container api::kInitContainerName, first in initContainers, that
//     installs the allocator's glibc and musl builds from options.allocator_dir
//     into api::kLibraryMountPath (`allocguard install-allocator`, laid out as
//     library_layout.h describes);
//   - in each selected container: the volume mounted read-only at
//     api::kLibraryMountPath, LD_PRELOAD=PreloadPath(mount, options.libc, lib)
//     merged into any literal LD_PRELOAD (an earlier entry of allocguard's own
//     is replaced), terminationMessagePolicy: FallbackToLogsOnError when it
//     is unset or File, the API server's default (so a loader's error, written
//     to stderr before the program runs, becomes the termination message),
//     and the allocator's tunables as env vars.
// For glibc only the tunables are set (no volume, no init container), unless
// options.stats_agent: then the stats agent alone is installed and preloaded
// as above (glibc's own malloc keeps serving the process; the agent reads it
// through mallinfo2, or mallinfo before glibc 2.33).
//
// Containers allocguard adds itself (kInitContainerName, kGuardContainerName,
// kDriverContainerName) are never selected. An empty `containers` selects every
// entry of spec.containers; a non-empty list selects the entries of
// spec.containers and spec.initContainers with those names, so init containers
// are touched only when named.
//
// A user's explicit value always wins: an LD_PRELOAD given by valueFrom, a
// tunable env var the container already sets to another value, or a mount of
// another volume at kLibraryMountPath leaves that part of the container alone
// and appends a message (naming the container and the variable) to *conflicts.
//
// Injected containers satisfy the Pod Security Standard "restricted" and carry
// small resource requests and limits.
//
// Idempotent: injecting the same allocator twice yields the same spec.

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/api/pod_spec.h"
#include "operator/api/types.h"
#include "operator/common/status.h"

namespace allocguard::admission {

struct InjectionOptions {
  std::string image;  // the allocguard image (carries the libraries and the binary)
  std::string allocator_dir = "/opt/allocguard/lib";  // where the image keeps the libraries
  // Which build the containers preload (ResolveLibc gives the pod's choice).
  api::Libc libc = api::Libc::kAuto;
  // Appended to the guard sidecar's arguments: the operator's --log-level
  // and --log-format when they are not the defaults.
  std::vector<std::string> guard_log_flags;
  // Preload the stats agent (api::kStatsAgentLibrary) after the allocator,
  // or alone for glibc: the init container installs it too, LD_PRELOAD gets
  // its build for options.libc (the same resolution as the allocator's), and
  // each selected container mounts the books volume (api::kBooksVolumeName,
  // an emptyDir) at api::kBooksMountPath with subPath <container name> and
  // gets ALLOCGUARD_STATS_DIR pointing there. Not where the allocator has no
  // build for the libc (tcmalloc on musl), nor in a container whose books
  // path holds another volume (a conflict says so). Requires the image to
  // ship the agent beside the allocators (StatsAgentShipped).
  bool stats_agent = false;
};

// Whether the image's library directory ships the stats agent's glibc build
// (<allocator_dir>/glibc/liballocguard_stats.so).
bool StatsAgentShipped(const std::string& allocator_dir);

// The libc a pod's containers preload for: the pod's allocguard.io/libc
// annotation when it names one (auto, glibc, musl), otherwise the policy's.
// An annotation with another value is ignored with a message in *conflicts
// (may be null). `annotations` are the pod's (or pod template's), read by
// api::ParseObjectMeta.
api::Libc ResolveLibc(api::Libc policy_libc, const std::map<std::string, std::string>& annotations,
                      std::vector<std::string>* conflicts);

// The library file name of an allocator ("libjemalloc.so.2"); empty for glibc.
std::string AllocatorLibraryFile(api::Allocator allocator);

// "jemalloc"; the value of api::kInjectedAnnotation.
std::string AllocatorLabel(api::Allocator allocator);

// The env vars that carry the allocator's tunables, in a stable order, e.g.
// {{"MALLOC_CONF", "background_thread:true"}}. Unset tunables are absent.
std::vector<std::pair<std::string, std::string>> AllocatorTunableEnv(
    const api::AllocatorSpec& allocator);

// The names of the containers InjectAllocator would select in `pod_spec`
// (see above), in pod order: spec.initContainers first, then spec.containers.
std::vector<std::string> SelectContainerNames(const api::PodSpec& pod_spec,
                                              const std::vector<std::string>& containers);
// The same over a PodSpec object (parsed with api::ParsePodSpec).
std::vector<std::string> SelectContainerNames(const nlohmann::json& pod_spec,
                                              const std::vector<std::string>& containers);

// The restricted security context of every container allocguard injects.
nlohmann::json RestrictedSecurityContext();

// Mutates `pod_spec` (a PodSpec object) in place as described above.
// With options.libc musl and an allocator that has no musl build (tcmalloc)
// no library is injected, only the tunables, and a message goes to *conflicts.
// Returns InvalidArgument, leaving pod_spec untouched, when pod_spec is not an
// object, its container lists are malformed, or options.image is empty for an
// allocator that needs the init container. Selecting no container is not an
// error: nothing is changed, and a message is appended to *conflicts when none
// of the names in `containers` is in the pod. `conflicts` may be null.
Status InjectAllocator(nlohmann::json& pod_spec, const api::AllocatorSpec& allocator,
                       const std::vector<std::string>& containers, const InjectionOptions& options,
                       std::vector<std::string>* conflicts);

}  // namespace allocguard::admission
