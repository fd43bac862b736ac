#pragma once

// Reading the allocator's books: the files the stats agent
// (allocators/stats_agent/, docs/allocator-books.md) publishes per process,
// "books-<pid>" in its output directory, in the fixed layout of
// allocators/stats_agent/allocator_books.h.
//
// The readers never throw. A file that is not a whole current sample is an
// error that names what is wrong: too short or too long (with both sizes),
// bad magic, an unknown version, a size field that disagrees, an unknown
// allocator, a checksum mismatch (a read that caught the agent's in-place
// write half done, or a corrupted copy; ReadAllocatorBooks reads up to three
// times before reporting it).

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "operator/common/status.h"

namespace allocguard::replay {

enum class BooksAllocator { kUnknown, kGlibc, kJemalloc, kMimalloc, kTcmalloc };

// "glibc", "jemalloc", "mimalloc", "tcmalloc", or "unknown".
const char* BooksAllocatorName(BooksAllocator a);

// One allocator-specific figure, named as the metrics name it
// ("arenas", "resident_bytes", ...) with the allocator API it came from.
struct BooksFigure {
  std::string name;
  std::string source;  // "mallinfo2().keepcost", "stats.resident", ...
  uint64_t value = 0;
};

struct AllocatorBooks {
  pid_t pid = 0;
  BooksAllocator allocator = BooksAllocator::kUnknown;
  std::string allocator_object;           // the file name of the object serving malloc
  std::chrono::milliseconds interval{0};  // in force (longer than requested when throttled)
  // The agent's CPU budget stretched the interval: a sample cost more than a
  // quarter of one percent of a core at the requested interval.
  bool throttled = false;
  uint64_t sequence = 0;  // 1 for the agent's first sample in the process
  std::chrono::system_clock::time_point sample_time;
  std::chrono::nanoseconds agent_cpu{0};  // the publisher thread's CPU so far
  // Bytes the program allocated and has not freed, and bytes the allocator
  // holds resident but free; both absent when the allocator's public API
  // does not tell them apart (mimalloc release builds, musl's malloc).
  std::optional<uint64_t> in_use_bytes;
  std::optional<uint64_t> retained_bytes;
  uint64_t held_bytes = 0;  // everything the allocator holds
  // glibc < 2.33: the figures come from mallinfo()'s int fields, each the
  // true value modulo 4 GiB.
  bool mallinfo_int = false;
  std::optional<uint64_t> glibc_arenas;  // absent when malloc_info failed
  std::vector<BooksFigure> figures;      // the allocator's own, in file order
};

// Parses one file's bytes. `what` names the source in errors (a path).
Result<AllocatorBooks> ParseAllocatorBooks(std::string_view bytes, const std::string& what);

// Reads and parses one file; on a checksum mismatch reads it again, three
// reads in all.
// kNotFound when the file does not exist (the process exited).
Result<AllocatorBooks> ReadAllocatorBooks(const std::string& path);

struct BooksFile {
  std::string path;
  pid_t pid_in_name = 0;
  Result<AllocatorBooks> books;
};

// Every "books-<pid>" file of a directory, in PID order; other names
// (the agent's ".books-<pid>.tmp") are skipped, and so is a file removed
// between listing and reading (its process exited). A file whose PID field
// differs from its name is reported as an error in its entry. kNotFound when
// the directory does not exist.
Result<std::vector<BooksFile>> ReadAllocatorBooksDirectory(const std::string& dir);

// True when the sample is older than three of its intervals at `now`: its
// process was killed, or its publisher stopped.
bool BooksAreStale(const AllocatorBooks& books, std::chrono::system_clock::time_point now);

// A workload's books at one moment: sums over the files that parsed and are
// fresh (not BooksAreStale at `now`). Unreadable and stale files are left out.
struct BooksTotals {
  int processes = 0;        // fresh files
  int split_processes = 0;  // of which report in-use and retained
  // Sums over split_processes.
  uint64_t in_use_bytes = 0;
  uint64_t retained_bytes = 0;
};
BooksTotals SumFreshBooks(const std::vector<BooksFile>& files,
                          std::chrono::system_clock::time_point now);

// The books of `dir` and of each of its subdirectories (the injected books
// volume holds one per container), in that order. kNotFound when `dir` does
// not exist; an unreadable subdirectory is left out.
Result<std::vector<BooksFile>> ReadAllocatorBooksTree(const std::string& dir);

}  // namespace allocguard::replay
