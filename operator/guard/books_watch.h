#pragma once

// The guard's reading of the allocator's books: the files the stats agent
// (allocators/stats_agent/, docs/allocator-books.md) publishes per process
// in the injected volume, one subdirectory per container ("<dir>/<container>/
// books-<pid>"; PIDs are per container without a shared process namespace).
//
// Every sample it reads them with the typed reader (replay::
// ReadAllocatorBooksDirectory), sums the fresh files of each container (a
// stale file belongs to a killed process and is left out), keeps per-minute
// floors and the floor slope of in-use and retained bytes per container, and
// judges each slope against a rising rate:
//   rising  the slope interval's lower bound is above the rate,
//   flat    its upper bound is below the rate,
//   unknown otherwise (too few floors, or not enough evidence either way).
// AllocatorRetaining: retained rising while in-use is flat (the production
// form of the canary's AllocatorRetention). HeapGrowing: in-use rising (the
// production form of Leak). Not thread-safe: the guard's loop owns it.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "operator/guard/floor_window.h"
#include "operator/metrics/registry.h"

namespace allocguard::guard {

struct BooksWatchOptions {
  std::string dir;  // one subdirectory per container
  FloorWindowOptions floors;
  // A floor rising faster than this (bytes per hour) is rising; slower is flat.
  double rising_bytes_per_hour = 64.0 * 1024 * 1024;
  // At most this many containers and files per container are read per
  // sample; more are counted as skipped (a directory filled by something
  // else must not slow the loop down).
  int max_containers = 32;
  int max_files_per_container = 512;
};

enum class BooksTrend { kUnknown, kFlat, kRising };
const char* BooksTrendName(BooksTrend t);  // "unknown", "flat", "rising"

struct BooksSeries {
  std::optional<memory::MinuteFloor> floor;  // the last complete minute's
  FloorSlope slope;
  BooksTrend trend = BooksTrend::kUnknown;
};

struct ContainerBooks {
  std::string container;
  int published = 0;  // fresh files with in-use and retained
  int no_split = 0;   // fresh files without (mimalloc, musl's malloc, ...)
  int stale = 0;      // last sample older than three intervals: process killed
  int unreadable = 0;
  int skipped = 0;  // beyond max_files_per_container
  std::string last_error;
  // Sums over the published files; absent when there are none.
  std::optional<int64_t> in_use_bytes;
  std::optional<int64_t> retained_bytes;
  int64_t held_bytes = 0;  // over every fresh file
  // Allocators of the fresh files ("glibc": 2).
  std::map<std::string, int> allocators;
  // (allocator, figure) -> sum over the fresh files (the largest for
  // "version").
  std::map<std::pair<std::string, std::string>, double> figures;
  BooksSeries in_use;
  BooksSeries retained;
  bool retaining = false;     // retained rising, in-use flat
  bool heap_growing = false;  // in-use rising
};

struct BooksReading {
  bool dir_present = false;
  std::vector<ContainerBooks> containers;  // by name
  int skipped_containers = 0;
  // Pod-level: a condition is judged once some container's trends are known
  // (absent before); True when any container shows it. The messages name
  // each container and the figures behind the judgement.
  std::optional<bool> retaining;
  std::string retaining_message;
  std::optional<bool> heap_growing;
  std::string heap_growing_message;
};

class BooksWatch {
 public:
  // registry may be null (no metrics).
  BooksWatch(BooksWatchOptions options, metrics::Registry* registry);
  ~BooksWatch();

  // Reads the books. t_seconds: since the guard started (never decreasing);
  // now: the wall clock, for the files' staleness.
  BooksReading Step(double t_seconds, std::chrono::system_clock::time_point now);

 private:
  struct Windows {
    explicit Windows(const FloorWindowOptions& o) : in_use(o), retained(o) {}
    FloorWindow in_use;
    FloorWindow retained;
  };
  struct Gauges;
  void Export(const BooksReading& reading);

  BooksWatchOptions options_;
  std::map<std::string, Windows> windows_;
  std::unique_ptr<Gauges> gauges_;
};

}  // namespace allocguard::guard
