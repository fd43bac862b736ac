#pragma once

// Where the allocator libraries live, in the allocguard image and in the
// library volume of a governed pod, and how one LD_PRELOAD entry reaches the
// build that matches each container's C library.
//
// The image keeps one build per C library (Dockerfile, allocators/):
//   <image dir>/glibc/libjemalloc.so.2   built against the oldest glibc served
//   <image dir>/musl/libjemalloc.so.2    built with musl-gcc (no tcmalloc)
//
// The injection's init container (`allocguard install-allocator`) lays the
// pod's library volume out as
//   <mount>/glibc/<lib>, <mount>/musl/<lib>          copies of the image's builds
//   <mount>/lib/x86_64-linux-gnu/<lib> -> ../../glibc/<lib>
//   <mount>/lib64/<lib>                -> ../glibc/<lib>
//   <mount>/lib/<lib>                  -> ../glibc/<lib>
//   <mount>/$LIB/<lib>                 -> ../musl/<lib>   (a directory named "$LIB")
// and libc "auto" preloads <mount>/$LIB/<lib>. glibc's loader expands the
// dynamic string token $LIB in LD_PRELOAD to its own library directory name
// (lib/x86_64-linux-gnu on Debian and Ubuntu, lib64 on RHEL, Fedora and
// Amazon Linux, lib on distributions without either), which leads to the glibc
// build; musl's loader does not expand tokens and opens the directory named
// "$LIB", which leads to the musl build. Each process thereby loads the build
// for the C library it really runs on, decided by the loader itself.
// A loader that finds no file there (a glibc with another $LIB, or musl with
// tcmalloc, which has no musl build) skips the entry with a warning and the
// process runs on its own malloc; the guard reports it as not loaded.

#include <string>
#include <vector>

#include "operator/api/types.h"
#include "operator/common/status.h"

namespace allocguard::admission {

// The subdirectory of a libc's build ("glibc", "musl"); empty for kAuto.
std::string LibcDirectory(api::Libc libc);

// The directories glibc's $LIB may expand to, relative to the mount, for the
// architecture allocguard was built for.
std::vector<std::string> GlibcLibDirectories();

// The LD_PRELOAD entry for `library` under `mount`: <mount>/glibc/<lib>,
// <mount>/musl/<lib>, or <mount>/$LIB/<lib> for kAuto.
std::string PreloadPath(const std::string& mount, api::Libc libc, const std::string& library);

// Installs `library` from the image's directory `from` into the volume
// directory `to` as laid out above. The glibc build must exist; the musl build
// is installed when the image has one. Files are written under a temporary
// name and renamed, so a restarted init container never leaves half a
// library. Appends one line per file or link made to *installed (may be null).
Status InstallAllocatorLibrary(const std::string& from, const std::string& to,
                               const std::string& library, std::vector<std::string>* installed);

}  // namespace allocguard::admission
