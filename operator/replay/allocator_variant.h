#pragma once

// Allocator variants: which malloc a replay run preloads into the workload.
//
// A variant is written on the command line as
//   NAME[=ALLOCATOR][,ENV=VALUE...]
// e.g. "glibc", "jemalloc", "arena2=glibc,MALLOC_ARENA_MAX=2",
// "glibc512=glibc,MALLOC_ARENA_MAX=512". Without "=ALLOCATOR" the name is the
// allocator. glibc is the system allocator and needs no library. A part
// without "=" continues the value before it, so a value may hold commas:
// "jemalloc,MALLOC_CONF=background_thread:true,dirty_decay_ms:1000".

#include <map>
#include <string>
#include <vector>

#include "operator/common/status.h"

namespace allocguard::replay {

enum class Allocator { kGlibc, kJemalloc, kMimalloc, kTcmalloc };

const char* AllocatorName(Allocator a);
Result<Allocator> ParseAllocator(const std::string& name);

struct AllocatorVariant {
  std::string name;
  Allocator allocator = Allocator::kGlibc;
  std::map<std::string, std::string> env;
  // The library to preload; empty for glibc.
  std::string library;
};

Result<AllocatorVariant> ParseVariant(const std::string& text);

// Finds the shared library of an allocator. Looks in each of search_dirs for
// the file names Debian installs; the error names every path it tried and the
// Debian package that provides the library.
Result<std::string> ResolveAllocatorLibrary(Allocator a,
                                            const std::vector<std::string>& search_dirs);

// The default search path: $ALLOCGUARD_ALLOCATOR_DIR/glibc and
// $ALLOCGUARD_ALLOCATOR_DIR (if set; the image sets /opt/allocguard/lib), then
// the Debian/Ubuntu multiarch directory, then the usual library directories.
std::vector<std::string> DefaultLibrarySearchDirs();

// The environment to launch a workload with: `base` (the caller's
// environment) plus the variant's env, with the library merged into an
// existing LD_PRELOAD (first, so it wins symbol resolution), never replacing it.
std::map<std::string, std::string> VariantEnvironment(
    const AllocatorVariant& v, const std::map<std::string, std::string>& base);

}  // namespace allocguard::replay
