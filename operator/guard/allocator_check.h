#pragma once

// Which allocator a workload process really loaded, read from the libraries
// mapped into it (/proc/<pid>/maps), and whether that is the one its policy
// expects.
//
// LD_PRELOAD is silently ignored by static binaries, by setuid/setgid
// programs (the loader's secure-execution mode) and by musl's loader given a
// glibc-built library; the process then runs on whatever malloc it was built
// with. Only the mapped libraries tell.

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "operator/replay/allocator_variant.h"
#include "operator/replay/proc_reader.h"

namespace allocguard::guard {

struct AllocatorObservation {
  pid_t pid = 0;
  // The allocator whose shared library is mapped; glibc when libc.so.6 is
  // mapped and no other allocator is. Absent when none could be established.
  std::optional<replay::Allocator> allocator;
  // The mapped file that decided (e.g. /usr/lib/x86_64-linux-gnu/libjemalloc.so.2).
  std::string library;
  // Why `allocator` is absent, for people: "static binary: ...", "setuid
  // program: ...", "cannot read /proc/<pid>/maps: ...".
  std::string not_loaded_reason;
  // The dynamic loader is mapped but libc is not yet: the process is still
  // starting, so nothing can be said; ask again.
  bool loading = false;
};

// Pure: classifies one process's mapped shared objects (in maps order).
AllocatorObservation ClassifyMappedLibraries(pid_t pid, const std::vector<std::string>& libraries);

// Reads /proc/<pid>/maps (and /proc/<pid>/status for setuid programs) below
// the reader's proc root and classifies them. A process whose real and
// effective ids differ is reported as a setuid program even when its maps are
// readable, since the loader ignored LD_PRELOAD for it.
AllocatorObservation ObserveAllocator(const std::string& proc_root, pid_t pid);

struct AllocatorCheck {
  bool matches = false;
  // For a condition: "AllocatorLoaded", "AllocatorMismatch", "AllocatorNotLoaded",
  // "NoWorkloadProcesses".
  std::string reason;
  // One sentence naming every process that does not match and why.
  std::string message;
};

// Pure: compares every observation with the expected allocator. With no
// expectation (nullopt) every process that loaded any allocator matches.
AllocatorCheck CheckAllocators(std::optional<replay::Allocator> expected,
                               const std::vector<AllocatorObservation>& observations);

}  // namespace allocguard::guard
