#pragma once

// Books files as the stats agent writes them (allocators/stats_agent/
// allocator_books.h), for the guard's tests: real files in a directory.

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "allocators/stats_agent/allocator_books.h"

namespace allocguard::guard::testing {

struct FakeBooks {
  int32_t pid = 10;
  uint32_t allocator = AG_BOOKS_ALLOCATOR_GLIBC;
  uint32_t flags = 0;
  uint32_t interval_ms = 2000;
  uint64_t in_use = 0;
  uint64_t retained = 0;
  uint64_t held = 0;
  std::chrono::system_clock::time_point sampled;
  uint64_t figures[AG_BOOKS_MAX_FIGURES] = {};
};

// Writes <dir>/books-<pid>, creating dir.
inline void WriteBooks(const std::filesystem::path& dir, const FakeBooks& f) {
  ag_books b;
  std::memset(&b, 0, sizeof b);
  std::memcpy(b.magic, AG_BOOKS_MAGIC, sizeof b.magic);
  b.version = AG_BOOKS_VERSION;
  b.size = sizeof b;
  b.pid = f.pid;
  b.allocator = f.allocator;
  b.flags = f.flags;
  b.interval_ms = f.interval_ms;
  b.sequence = 1;
  b.sample_unix_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(f.sampled.time_since_epoch()).count();
  b.in_use_bytes = f.in_use;
  b.retained_bytes = f.retained;
  b.held_bytes = f.held;
  std::memcpy(b.figures, f.figures, sizeof b.figures);
  std::strcpy(b.allocator_object, "libc.so.6");
  b.checksum = ag_books_checksum(&b);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / ("books-" + std::to_string(f.pid)), std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(&b), sizeof b);
}

}  // namespace allocguard::guard::testing
