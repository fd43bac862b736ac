#include "operator/replay/allocator_books.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "allocators/stats_agent/allocator_books.h"

namespace allocguard::replay {
namespace {

struct FigureName {
  int index;
  const char* name;
  const char* source;
};

// The figures each allocator publishes, in the order of allocator_books.h.
std::vector<FigureName> FigureNames(BooksAllocator a) {
  switch (a) {
    case BooksAllocator::kGlibc:
      return {{AG_BOOKS_GLIBC_ARENA_BYTES, "arena_bytes", "mallinfo2().arena"},
              {AG_BOOKS_GLIBC_MMAP_BYTES, "mmap_bytes", "mallinfo2().hblkhd"},
              {AG_BOOKS_GLIBC_MMAP_CHUNKS, "mmap_chunks", "mallinfo2().hblks"},
              {AG_BOOKS_GLIBC_FREE_CHUNKS, "free_chunks", "mallinfo2().ordblks"},
              {AG_BOOKS_GLIBC_FASTBIN_BYTES, "fastbin_free_bytes", "mallinfo2().fsmblks"},
              {AG_BOOKS_GLIBC_TRIMMABLE_BYTES, "trimmable_bytes", "mallinfo2().keepcost"},
              {AG_BOOKS_GLIBC_ARENAS, "arenas", "malloc_info() heaps"}};
    case BooksAllocator::kJemalloc:
      return {{AG_BOOKS_JEMALLOC_ALLOCATED, "allocated_bytes", "stats.allocated"},
              {AG_BOOKS_JEMALLOC_ACTIVE, "active_bytes", "stats.active"},
              {AG_BOOKS_JEMALLOC_RESIDENT, "resident_bytes", "stats.resident"},
              {AG_BOOKS_JEMALLOC_RETAINED, "retained_virtual_bytes", "stats.retained"},
              {AG_BOOKS_JEMALLOC_MAPPED, "mapped_bytes", "stats.mapped"},
              {AG_BOOKS_JEMALLOC_METADATA, "metadata_bytes", "stats.metadata"},
              {AG_BOOKS_JEMALLOC_ARENAS, "arenas", "arenas.narenas"}};
    case BooksAllocator::kMimalloc:
      return {{AG_BOOKS_MIMALLOC_COMMIT, "commit_bytes", "mi_process_info() current_commit"},
              {AG_BOOKS_MIMALLOC_PEAK_COMMIT, "peak_commit_bytes", "mi_process_info() peak_commit"},
              {AG_BOOKS_MIMALLOC_RSS, "rss_bytes", "mi_process_info() current_rss"},
              {AG_BOOKS_MIMALLOC_PEAK_RSS, "peak_rss_bytes", "mi_process_info() peak_rss"},
              {AG_BOOKS_MIMALLOC_PAGE_FAULTS, "page_faults", "mi_process_info() page_faults"},
              {AG_BOOKS_MIMALLOC_VERSION, "version", "mi_version()"}};
    case BooksAllocator::kTcmalloc:
      return {
          {AG_BOOKS_TCMALLOC_ALLOCATED, "allocated_bytes", "generic.current_allocated_bytes"},
          {AG_BOOKS_TCMALLOC_HEAP_SIZE, "heap_size_bytes", "generic.heap_size"},
          {AG_BOOKS_TCMALLOC_PAGEHEAP_FREE, "pageheap_free_bytes", "tcmalloc.pageheap_free_bytes"},
          {AG_BOOKS_TCMALLOC_PAGEHEAP_UNMAPPED, "pageheap_unmapped_bytes",
           "tcmalloc.pageheap_unmapped_bytes"},
          {AG_BOOKS_TCMALLOC_CENTRAL_FREE, "central_cache_free_bytes",
           "tcmalloc.central_cache_free_bytes"},
          {AG_BOOKS_TCMALLOC_TRANSFER_FREE, "transfer_cache_free_bytes",
           "tcmalloc.transfer_cache_free_bytes"},
          {AG_BOOKS_TCMALLOC_THREAD_FREE, "thread_cache_free_bytes",
           "tcmalloc.thread_cache_free_bytes"}};
    case BooksAllocator::kUnknown:
      break;
  }
  return {};
}

std::string FlagsText(uint32_t flags) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%x", flags);
  return text;
}

// Reads at most `limit` bytes of a file (one more than a sample, so a longer
// file is noticed).
Result<std::string> ReadAtMost(const std::string& path, size_t limit) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    std::string m = path + ": " + std::strerror(e);
    return e == ENOENT ? NotFound(m) : Unavailable(m);
  }
  std::string out(limit, '\0');
  size_t got = 0;
  while (got < limit) {
    ssize_t n = read(fd, out.data() + got, limit - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      close(fd);
      return Unavailable(path + ": read: " + std::strerror(e));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  out.resize(got);
  return out;
}

}  // namespace

const char* BooksAllocatorName(BooksAllocator a) {
  switch (a) {
    case BooksAllocator::kGlibc:
      return "glibc";
    case BooksAllocator::kJemalloc:
      return "jemalloc";
    case BooksAllocator::kMimalloc:
      return "mimalloc";
    case BooksAllocator::kTcmalloc:
      return "tcmalloc";
    case BooksAllocator::kUnknown:
      break;
  }
  return "unknown";
}

Result<AllocatorBooks> ParseAllocatorBooks(std::string_view bytes, const std::string& what) {
  constexpr size_t kSize = sizeof(ag_books);
  if (bytes.size() < kSize) {
    return InvalidArgument(what + ": short file: " + std::to_string(bytes.size()) +
                           " bytes, a version " + std::to_string(AG_BOOKS_VERSION) +
                           " sample has " + std::to_string(kSize));
  }
  ag_books raw;
  std::memcpy(&raw, bytes.data(), kSize);
  if (std::memcmp(raw.magic, AG_BOOKS_MAGIC, sizeof raw.magic) != 0) {
    return InvalidArgument(what + ": magic: not an allocator books file (no \"" +
                           std::string(AG_BOOKS_MAGIC) + "\" at its start)");
  }
  if (raw.version != AG_BOOKS_VERSION) {
    return InvalidArgument(what + ": version: " + std::to_string(raw.version) +
                           ", this reader knows version " + std::to_string(AG_BOOKS_VERSION));
  }
  if (raw.size != kSize) {
    return InvalidArgument(what + ": size: the header says " + std::to_string(raw.size) +
                           " bytes, version " + std::to_string(AG_BOOKS_VERSION) + " has " +
                           std::to_string(kSize));
  }
  if (bytes.size() != kSize) {
    return InvalidArgument(what + ": long file: " + std::to_string(bytes.size()) +
                           " bytes, a version " + std::to_string(AG_BOOKS_VERSION) +
                           " sample has " + std::to_string(kSize));
  }
  if (ag_books_checksum(&raw) != raw.checksum) {
    return Unavailable(what +
                       ": checksum: the bytes do not match the sample's checksum (a torn "
                       "or corrupted copy)");
  }
  if (raw.allocator > AG_BOOKS_ALLOCATOR_TCMALLOC) {
    return InvalidArgument(what + ": allocator: unknown code " + std::to_string(raw.allocator));
  }
  if (raw.pid <= 0) {
    return InvalidArgument(what + ": pid: " + std::to_string(raw.pid) + " is not a process ID");
  }
  constexpr uint32_t kKnownFlags = AG_BOOKS_FLAG_NO_SPLIT | AG_BOOKS_FLAG_MALLINFO_INT |
                                   AG_BOOKS_FLAG_NO_ARENA_COUNT | AG_BOOKS_FLAG_THROTTLED;
  if ((raw.flags & ~kKnownFlags) != 0) {
    return InvalidArgument(what + ": flags: unknown bits in " + FlagsText(raw.flags));
  }
  if (std::memchr(raw.allocator_object, '\0', sizeof raw.allocator_object) == nullptr) {
    return InvalidArgument(what + ": allocator_object: not terminated");
  }

  AllocatorBooks b;
  b.pid = raw.pid;
  b.allocator = static_cast<BooksAllocator>(raw.allocator);
  b.allocator_object = raw.allocator_object;
  b.interval = std::chrono::milliseconds(raw.interval_ms);
  b.sequence = raw.sequence;
  b.sample_time = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::nanoseconds(raw.sample_unix_ns)));
  b.agent_cpu = std::chrono::nanoseconds(raw.agent_cpu_ns);
  if ((raw.flags & AG_BOOKS_FLAG_NO_SPLIT) == 0) {
    b.in_use_bytes = raw.in_use_bytes;
    b.retained_bytes = raw.retained_bytes;
  }
  b.held_bytes = raw.held_bytes;
  b.mallinfo_int = (raw.flags & AG_BOOKS_FLAG_MALLINFO_INT) != 0;
  b.throttled = (raw.flags & AG_BOOKS_FLAG_THROTTLED) != 0;
  for (const FigureName& f : FigureNames(b.allocator)) {
    std::string source = f.source;
    if (b.mallinfo_int && source.rfind("mallinfo2()", 0) == 0) {
      source.replace(0, 11, "mallinfo()");
    }
    if (b.allocator == BooksAllocator::kGlibc && f.index == AG_BOOKS_GLIBC_ARENAS) {
      if ((raw.flags & AG_BOOKS_FLAG_NO_ARENA_COUNT) != 0) continue;
      b.glibc_arenas = raw.figures[f.index];
    }
    b.figures.push_back({f.name, std::move(source), raw.figures[f.index]});
  }
  return b;
}

Result<AllocatorBooks> ReadAllocatorBooks(const std::string& path) {
  Result<AllocatorBooks> last = Unavailable(path + ": not read");
  for (int attempt = 0; attempt < 3; ++attempt) {
    AG_ASSIGN_OR_RETURN(std::string bytes, ReadAtMost(path, sizeof(ag_books) + 1));
    last = ParseAllocatorBooks(bytes, path);
    // Only a torn read (the agent was writing) is worth another; a wrong
    // format stays wrong.
    if (last.ok() || last.status().code() != StatusCode::kUnavailable) return last;
  }
  return last;
}

Result<std::vector<BooksFile>> ReadAllocatorBooksDirectory(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    int e = errno;
    std::string m = dir + ": " + std::strerror(e);
    return e == ENOENT ? NotFound(m) : Unavailable(m);
  }
  std::vector<std::pair<pid_t, std::string>> names;
  const std::string prefix = AG_BOOKS_FILE_PREFIX;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size() ||
        name.size() > prefix.size() + 9) {
      continue;
    }
    std::string digits = name.substr(prefix.size());
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    names.emplace_back(static_cast<pid_t>(std::stol(digits)), name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  std::vector<BooksFile> out;
  for (auto& [pid, name] : names) {
    std::string path = std::string(dir).append("/").append(name);
    Result<AllocatorBooks> books = ReadAllocatorBooks(path);
    // Removed since the listing: its process exited and the agent cleaned up.
    if (!books.ok() && books.status().code() == StatusCode::kNotFound) continue;
    if (books.ok() && books->pid != pid) {
      books = InvalidArgument(path + ": pid: the file says " + std::to_string(books->pid) +
                              ", its name " + std::to_string(pid));
    }
    out.push_back({std::move(path), pid, std::move(books)});
  }
  return out;
}

bool BooksAreStale(const AllocatorBooks& books, std::chrono::system_clock::time_point now) {
  auto interval = std::max(books.interval, std::chrono::milliseconds(10));
  return now - books.sample_time > 3 * interval;
}

BooksTotals SumFreshBooks(const std::vector<BooksFile>& files,
                          std::chrono::system_clock::time_point now) {
  BooksTotals totals;
  for (const BooksFile& f : files) {
    if (!f.books.ok() || BooksAreStale(*f.books, now)) continue;
    ++totals.processes;
    if (!f.books->in_use_bytes || !f.books->retained_bytes) continue;
    ++totals.split_processes;
    totals.in_use_bytes += *f.books->in_use_bytes;
    totals.retained_bytes += *f.books->retained_bytes;
  }
  return totals;
}

Result<std::vector<BooksFile>> ReadAllocatorBooksTree(const std::string& dir) {
  AG_ASSIGN_OR_RETURN(std::vector<BooksFile> files, ReadAllocatorBooksDirectory(dir));
  // Never throws: the error_code overloads only, increment included.
  std::error_code ec;
  std::vector<std::string> subdirs;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_directory(type_ec)) subdirs.push_back(it->path().string());
  }
  std::sort(subdirs.begin(), subdirs.end());
  for (const std::string& sub : subdirs) {
    auto more = ReadAllocatorBooksDirectory(sub);
    if (!more.ok()) continue;
    for (BooksFile& f : *more) files.push_back(std::move(f));
  }
  return files;
}

}  // namespace allocguard::replay
