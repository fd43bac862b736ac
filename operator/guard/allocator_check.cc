#include "operator/guard/allocator_check.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

namespace allocguard::guard {
namespace {

std::string BaseName(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

struct Ids {
  int64_t real = 0;
  int64_t effective = 0;
};

// The real and effective ids from /proc/<pid>/status ("Uid:\t0\t1000\t..."),
// nullopt when the file cannot be read.
std::optional<Ids> ReadIds(const std::string& status_path, const char* key) {
  std::ifstream in(status_path);
  std::string line;
  while (std::getline(in, line)) {
    if (!StartsWith(line, key)) continue;
    std::istringstream fields(line.substr(std::strlen(key)));
    Ids ids;
    if (fields >> ids.real >> ids.effective) return ids;
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

AllocatorObservation ClassifyMappedLibraries(pid_t pid, const std::vector<std::string>& libraries) {
  AllocatorObservation o;
  o.pid = pid;
  std::string libc;
  std::string musl;
  bool loader = false;
  for (const std::string& path : libraries) {
    const std::string base = BaseName(path);
    std::optional<replay::Allocator> found;
    if (StartsWith(base, "libjemalloc")) found = replay::Allocator::kJemalloc;
    if (StartsWith(base, "libmimalloc")) found = replay::Allocator::kMimalloc;
    if (StartsWith(base, "libtcmalloc")) found = replay::Allocator::kTcmalloc;
    if (found) {
      // The first one mapped wins symbol resolution, as ld.so binds it first.
      o.allocator = found;
      o.library = path;
      return o;
    }
    if (libc.empty() && StartsWith(base, "libc.so")) libc = path;
    if (StartsWith(base, "ld-linux")) loader = true;
    if (musl.empty() && (StartsWith(base, "ld-musl") || StartsWith(base, "libc.musl"))) {
      musl = path;
    }
  }
  if (!libc.empty()) {
    o.allocator = replay::Allocator::kGlibc;
    o.library = libc;
  } else if (!musl.empty()) {
    o.library = musl;
    o.not_loaded_reason =
        "musl libc (" + musl + ") without a preloaded allocator: the process uses musl's malloc";
  } else if (loader) {
    o.loading = true;
    o.not_loaded_reason = "the dynamic loader is still loading the process's libraries";
  } else {
    o.not_loaded_reason =
        "static binary: no shared libraries are mapped, so LD_PRELOAD was ignored and the "
        "process uses the allocator it was linked with; no allocator books either (the stats "
        "agent is preloaded the same way)";
  }
  return o;
}

AllocatorObservation ObserveAllocator(const std::string& proc_root, pid_t pid) {
  const std::string dir = proc_root + "/" + std::to_string(pid);
  AllocatorObservation o;
  o.pid = pid;
  // The loader ignores LD_PRELOAD (outside the system directories) when it
  // runs a setuid or setgid program.
  const std::optional<Ids> uid = ReadIds(dir + "/status", "Uid:");
  const std::optional<Ids> gid = ReadIds(dir + "/status", "Gid:");
  if (uid && gid && (uid->real != uid->effective || gid->real != gid->effective)) {
    o.not_loaded_reason = "setuid/setgid program (real uid " + std::to_string(uid->real) +
                          ", effective uid " + std::to_string(uid->effective) +
                          "): the loader ignored LD_PRELOAD (secure execution)";
    return o;
  }
  // ProcReader reads maps through a stream, which turns a refused read into
  // an empty file; check that the file really reads first, so a process the
  // guard may not inspect is not mistaken for a static binary.
  const std::string maps = dir + "/maps";
  int fd = open(maps.c_str(), O_RDONLY | O_CLOEXEC);
  char byte;
  ssize_t n = fd < 0 ? -1 : read(fd, &byte, 1);
  const int err = errno;
  if (fd >= 0) close(fd);
  if (n <= 0) {
    o.not_loaded_reason =
        "cannot read " + maps + ": " +
        (n < 0 ? std::string(std::strerror(err)) : std::string("empty (process exiting)")) +
        (n < 0 && (err == EACCES || err == EPERM)
             ? " (the guard must run as the workload's user, and the process must be dumpable)"
             : "");
    return o;
  }
  replay::ProcReader reader(proc_root);
  auto libraries = reader.MappedLibraries(pid);
  if (!libraries.ok()) {
    o.not_loaded_reason = libraries.status().message();
    return o;
  }
  return ClassifyMappedLibraries(pid, *libraries);
}

AllocatorCheck CheckAllocators(std::optional<replay::Allocator> expected,
                               const std::vector<AllocatorObservation>& observations) {
  AllocatorCheck check;
  if (observations.empty()) {
    check.reason = "NoWorkloadProcesses";
    check.message = "no workload process is running";
    return check;
  }
  std::string problems;
  bool not_loaded = false;
  for (const AllocatorObservation& o : observations) {
    std::string problem;
    if (!o.allocator) {
      not_loaded = true;
      problem =
          "process " + std::to_string(o.pid) + ": allocator not loaded: " + o.not_loaded_reason;
    } else if (expected && *o.allocator != *expected) {
      problem = "process " + std::to_string(o.pid) + " runs on " +
                replay::AllocatorName(*o.allocator) + " (" + o.library + "), not " +
                replay::AllocatorName(*expected);
    }
    if (!problem.empty()) problems += (problems.empty() ? "" : "; ") + problem;
  }
  if (problems.empty()) {
    check.matches = true;
    check.reason = "AllocatorLoaded";
    const std::string name = expected ? replay::AllocatorName(*expected)
                                      : replay::AllocatorName(*observations.front().allocator);
    check.message =
        "every workload process (" + std::to_string(observations.size()) + ") runs on " + name;
    return check;
  }
  check.reason = not_loaded ? "AllocatorNotLoaded" : "AllocatorMismatch";
  check.message = problems;
  return check;
}

}  // namespace allocguard::guard
