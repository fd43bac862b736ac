#include "operator/replay/allocator_variant.h"

#include <unistd.h>

#include <cstdlib>

namespace allocguard::replay {
namespace {

struct AllocatorInfo {
  Allocator allocator;
  const char* name;
  std::vector<const char*> files;  // in order of preference
  const char* package;
};

const std::vector<AllocatorInfo>& Allocators() {
  static const std::vector<AllocatorInfo> kInfo = {
      {Allocator::kGlibc, "glibc", {}, "libc6"},
      {Allocator::kJemalloc, "jemalloc", {"libjemalloc.so.2"}, "libjemalloc2"},
      {Allocator::kMimalloc, "mimalloc", {"libmimalloc.so.2", "libmimalloc.so"}, "libmimalloc2.0"},
      {Allocator::kTcmalloc,
       "tcmalloc",
       {"libtcmalloc_minimal.so.4", "libtcmalloc.so.4"},
       "libtcmalloc-minimal4"},
  };
  return kInfo;
}

const AllocatorInfo& Info(Allocator a) {
  for (const auto& i : Allocators()) {
    if (i.allocator == a) return i;
  }
  return Allocators().front();
}

}  // namespace

const char* AllocatorName(Allocator a) { return Info(a).name; }

Result<Allocator> ParseAllocator(const std::string& name) {
  for (const auto& i : Allocators()) {
    if (name == i.name) return i.allocator;
  }
  return InvalidArgument("unknown allocator \"" + name +
                         "\" (known: glibc, jemalloc, mimalloc, tcmalloc)");
}

Result<AllocatorVariant> ParseVariant(const std::string& text) {
  AllocatorVariant v;
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    parts.push_back(text.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  const std::string& head = parts[0];
  auto eq = head.find('=');
  v.name = head.substr(0, eq);
  std::string allocator = eq == std::string::npos ? v.name : head.substr(eq + 1);
  if (v.name.empty()) return InvalidArgument("variant \"" + text + "\": empty name");
  for (char c : v.name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return InvalidArgument("variant \"" + text +
                             "\": name may hold letters, digits, '-', '_' and '.' only");
    }
  }
  auto a = ParseAllocator(allocator);
  if (!a.ok()) return a.status().WithContext("variant \"" + text + "\"");
  v.allocator = *a;
  std::string last_key;
  for (size_t i = 1; i < parts.size(); ++i) {
    auto e = parts[i].find('=');
    if (e == std::string::npos && !last_key.empty()) {
      // A value with commas, such as MALLOC_CONF=background_thread:true,dirty_decay_ms:1000.
      v.env[last_key] += "," + parts[i];
      continue;
    }
    if (e == std::string::npos || e == 0) {
      return InvalidArgument("variant \"" + text + "\": \"" + parts[i] + "\" is not ENV=VALUE");
    }
    last_key = parts[i].substr(0, e);
    v.env[last_key] = parts[i].substr(e + 1);
  }
  return v;
}

Result<std::string> ResolveAllocatorLibrary(Allocator a,
                                            const std::vector<std::string>& search_dirs) {
  const AllocatorInfo& info = Info(a);
  if (info.files.empty()) return std::string();
  std::string tried;
  for (const std::string& dir : search_dirs) {
    for (const char* file : info.files) {
      std::string path = dir + "/" + file;
      if (access(path.c_str(), R_OK) == 0) return path;
      tried += (tried.empty() ? "" : ", ") + path;
    }
  }
  return NotFound(std::string(info.name) + " library not found (looked at " + tried +
                  "); install the Debian package " + info.package +
                  " or set ALLOCGUARD_ALLOCATOR_DIR");
}

std::vector<std::string> DefaultLibrarySearchDirs() {
  std::vector<std::string> dirs;
  if (const char* d = std::getenv("ALLOCGUARD_ALLOCATOR_DIR"); d && *d) {
    // The allocguard image keeps one build per C library under it
    // (operator/admission/library_layout.h); the replay's processes run on
    // the image's own glibc.
    dirs.push_back(std::string(d) + "/glibc");
    dirs.emplace_back(d);
  }
  for (const char* d : {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
                        "/usr/lib", "/usr/local/lib"}) {
    dirs.emplace_back(d);
  }
  return dirs;
}

std::map<std::string, std::string> VariantEnvironment(
    const AllocatorVariant& v, const std::map<std::string, std::string>& base) {
  std::map<std::string, std::string> env = base;
  for (const auto& [k, val] : v.env) env[k] = val;
  if (!v.library.empty()) {
    auto it = env.find("LD_PRELOAD");
    if (it == env.end() || it->second.empty()) {
      env["LD_PRELOAD"] = v.library;
    } else if (it->second.find(v.library) == std::string::npos) {
      it->second = v.library + ":" + it->second;
    }
  }
  return env;
}

}  // namespace allocguard::replay
