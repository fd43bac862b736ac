#include "operator/guard/books_watch.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "operator/memory/slope_interval.h"
#include "operator/replay/allocator_books.h"

namespace allocguard::guard {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::string MiBText(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f MiB", bytes / kMiB);
  return buf;
}

std::string RateText(double gib_per_h) {
  char buf[32];
  double mib_per_h = gib_per_h * 1024.0;
  if (std::fabs(mib_per_h) < 0.5) mib_per_h = 0;  // no "-0"
  std::snprintf(buf, sizeof buf, "%+.0f MiB/h", mib_per_h);
  return buf;
}

// "in-use floor 120 MiB, slope +3 MiB/h [-1 MiB/h, +7 MiB/h] (flat)"
std::string SeriesText(const char* what, const BooksSeries& s) {
  std::string out = std::string(what) + " floor " +
                    (s.floor ? MiBText(s.floor->floor_bytes) : std::string("none yet"));
  if (s.slope.valid) {
    out += ", slope " + RateText(s.slope.slope_gib_per_h) + " [" + RateText(s.slope.low_gib_per_h) +
           ", " + RateText(s.slope.high_gib_per_h) + "]";
  }
  return out + " (" + BooksTrendName(s.trend) + ")";
}

BooksTrend Judge(const FloorSlope& slope, double rising_bytes_per_hour) {
  if (!slope.valid) return BooksTrend::kUnknown;
  const double rate_gib_per_h = rising_bytes_per_hour / memory::kBytesPerGiB;
  if (slope.low_gib_per_h > rate_gib_per_h) return BooksTrend::kRising;
  if (slope.high_gib_per_h < rate_gib_per_h) return BooksTrend::kFlat;
  return BooksTrend::kUnknown;
}

// Subdirectories of dir, by name; nullopt when dir does not exist.
std::optional<std::vector<std::string>> Containers(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return std::nullopt;
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.empty() || name[0] == '.') continue;
    struct stat st;
    if (stat(std::string(dir).append("/").append(name).c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      continue;
    names.push_back(std::move(name));
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// Tracks which label sets a gauge family got this round, and removes the
// ones it got last round but not this one (a container or allocator gone).
class Tracked {
 public:
  explicit Tracked(metrics::Gauge& g) : g_(g) {}
  void Set(const std::vector<std::string>& labels, double v) {
    g_.With(labels).Set(v);
    now_.insert(labels);
  }
  void Flush() {
    for (const auto& labels : last_) {
      if (!now_.contains(labels)) g_.Remove(labels);
    }
    last_ = std::move(now_);
    now_.clear();
  }

 private:
  metrics::Gauge& g_;
  std::set<std::vector<std::string>> last_, now_;
};

}  // namespace

const char* BooksTrendName(BooksTrend t) {
  switch (t) {
    case BooksTrend::kUnknown:
      return "unknown";
    case BooksTrend::kFlat:
      return "flat";
    case BooksTrend::kRising:
      return "rising";
  }
  return "unknown";
}

struct BooksWatch::Gauges {
  explicit Gauges(metrics::Registry& r)
      : in_use(r.AddGauge("allocguard_allocator_in_use_bytes",
                          "Bytes the program allocated and has not freed, by the allocator's "
                          "books, summed over the container's processes that report it.",
                          {"container"})),
        retained(r.AddGauge("allocguard_allocator_retained_bytes",
                            "Bytes the allocator holds, resident, but not in use (freed by the "
                            "program, not given back), summed over the container's processes.",
                            {"container"})),
        held(r.AddGauge("allocguard_allocator_held_bytes",
                        "Everything the allocators of the container's processes hold.",
                        {"container"})),
        figure(r.AddGauge("allocguard_allocator_figure",
                          "An allocator's own figure (docs/allocator-books.md), summed over the "
                          "container's processes with that allocator.",
                          {"container", "allocator", "figure"})),
        processes(r.AddGauge("allocguard_allocator_books_processes",
                             "The container's books files: published (in use and retained), "
                             "no_split, stale (process killed), unreadable, skipped.",
                             {"container", "state"})),
        floor(r.AddGauge("allocguard_allocator_floor_bytes",
                         "Floor (lowest figure) of the last complete minute of in-use or "
                         "retained bytes.",
                         {"container", "books"})),
        slope(r.AddGauge("allocguard_allocator_floor_slope_gib_per_hour",
                         "Slope of the per-minute floors of in-use or retained bytes over the "
                         "window: least squares, its interval bounds, and Theil-Sen.",
                         {"container", "books", "estimate"})),
        condition(r.AddGauge("allocguard_allocator_condition",
                             "1 while the container shows the condition (AllocatorRetaining, "
                             "HeapGrowing), 0 while it does not; absent until judged.",
                             {"container", "condition"})) {}

  Tracked in_use, retained, held, figure, processes, floor, slope, condition;
  void Flush() {
    for (Tracked* t :
         {&in_use, &retained, &held, &figure, &processes, &floor, &slope, &condition}) {
      t->Flush();
    }
  }
};

BooksWatch::BooksWatch(BooksWatchOptions options, metrics::Registry* registry)
    : options_(std::move(options)) {
  if (registry != nullptr) gauges_ = std::make_unique<Gauges>(*registry);
}

BooksWatch::~BooksWatch() = default;

BooksReading BooksWatch::Step(double t_seconds, std::chrono::system_clock::time_point now) {
  BooksReading reading;
  auto names = Containers(options_.dir);
  reading.dir_present = names.has_value();
  if (!names) names.emplace();
  if (static_cast<int>(names->size()) > options_.max_containers) {
    reading.skipped_containers = static_cast<int>(names->size()) - options_.max_containers;
    names->resize(static_cast<size_t>(options_.max_containers));
  }
  std::set<std::string> seen;
  for (const std::string& name : *names) {
    ContainerBooks c;
    c.container = name;
    auto files = replay::ReadAllocatorBooksDirectory(options_.dir + "/" + name);
    if (!files.ok()) {
      // Removed between the listing and the read: nothing to say about it.
      if (files.status().code() == StatusCode::kNotFound) continue;
      c.last_error = files.status().ToString();
      ++c.unreadable;
      reading.containers.push_back(std::move(c));
      continue;
    }
    int read = 0;
    for (const replay::BooksFile& f : *files) {
      if (read++ >= options_.max_files_per_container) {
        ++c.skipped;
        continue;
      }
      if (!f.books.ok()) {
        ++c.unreadable;
        c.last_error = f.books.status().ToString();
        continue;
      }
      const replay::AllocatorBooks& b = *f.books;
      if (replay::BooksAreStale(b, now)) {
        ++c.stale;
        continue;
      }
      const std::string allocator = replay::BooksAllocatorName(b.allocator);
      ++c.allocators[allocator];
      c.held_bytes += static_cast<int64_t>(b.held_bytes);
      for (const replay::BooksFigure& fig : b.figures) {
        double& v = c.figures[{allocator, fig.name}];
        v = fig.name == "version" ? std::max(v, static_cast<double>(fig.value))
                                  : v + static_cast<double>(fig.value);
      }
      if (b.in_use_bytes && b.retained_bytes) {
        ++c.published;
        c.in_use_bytes = c.in_use_bytes.value_or(0) + static_cast<int64_t>(*b.in_use_bytes);
        c.retained_bytes = c.retained_bytes.value_or(0) + static_cast<int64_t>(*b.retained_bytes);
      } else {
        ++c.no_split;
      }
    }
    // Floors and slopes of the container's in-use and retained bytes.
    auto it = windows_.find(name);
    if (c.in_use_bytes) {
      if (it == windows_.end()) it = windows_.emplace(name, Windows(options_.floors)).first;
      memory::MemorySample in_use{.t_seconds = t_seconds, .anon_bytes = *c.in_use_bytes};
      memory::MemorySample retained{.t_seconds = t_seconds, .anon_bytes = *c.retained_bytes};
      it->second.in_use.Add(in_use);
      it->second.retained.Add(retained);
    }
    if (it != windows_.end()) {
      seen.insert(name);
      c.in_use.floor = it->second.in_use.current_floor();
      c.in_use.slope = it->second.in_use.Slope();
      c.in_use.trend = Judge(c.in_use.slope, options_.rising_bytes_per_hour);
      c.retained.floor = it->second.retained.current_floor();
      c.retained.slope = it->second.retained.Slope();
      c.retained.trend = Judge(c.retained.slope, options_.rising_bytes_per_hour);
      c.heap_growing = c.in_use.trend == BooksTrend::kRising;
      c.retaining = c.in_use.trend == BooksTrend::kFlat && c.retained.trend == BooksTrend::kRising;
    }
    reading.containers.push_back(std::move(c));
  }
  // A container gone from the volume (or that stopped publishing a split)
  // keeps its floors only while its directory is there.
  for (auto it = windows_.begin(); it != windows_.end();) {
    it = seen.contains(it->first) ? std::next(it) : windows_.erase(it);
  }

  // Pod-level conditions, judged once some container's trends are known.
  std::string retaining_yes;
  std::string retaining_no;
  std::string growing_yes;
  std::string growing_no;
  for (const ContainerBooks& c : reading.containers) {
    const std::string text = "container " + c.container + ": " + SeriesText("in-use", c.in_use) +
                             "; " + SeriesText("retained", c.retained);
    if (c.in_use.trend != BooksTrend::kUnknown) {
      std::string& to = c.heap_growing ? growing_yes : growing_no;
      to += (to.empty() ? "" : "; ") + text;
      // Retaining is judged where in-use is flat and retained is known, or
      // where in-use rises (then it is not retention: it is the heap).
      if (c.retained.trend != BooksTrend::kUnknown || c.heap_growing) {
        std::string& r = c.retaining ? retaining_yes : retaining_no;
        r += (r.empty() ? "" : "; ") + text;
      }
    }
  }
  if (!growing_yes.empty() || !growing_no.empty()) {
    reading.heap_growing = !growing_yes.empty();
    reading.heap_growing_message = growing_yes.empty() ? growing_no : growing_yes;
  }
  if (!retaining_yes.empty() || !retaining_no.empty()) {
    reading.retaining = !retaining_yes.empty();
    reading.retaining_message = retaining_yes.empty() ? retaining_no : retaining_yes;
  }
  Export(reading);
  return reading;
}

void BooksWatch::Export(const BooksReading& reading) {
  if (!gauges_) return;
  Gauges& g = *gauges_;
  for (const ContainerBooks& c : reading.containers) {
    const std::string& n = c.container;
    if (c.in_use_bytes) g.in_use.Set({n}, static_cast<double>(*c.in_use_bytes));
    if (c.retained_bytes) g.retained.Set({n}, static_cast<double>(*c.retained_bytes));
    g.held.Set({n}, static_cast<double>(c.held_bytes));
    for (const auto& [key, v] : c.figures) g.figure.Set({n, key.first, key.second}, v);
    g.processes.Set({n, "published"}, c.published);
    g.processes.Set({n, "no_split"}, c.no_split);
    g.processes.Set({n, "stale"}, c.stale);
    g.processes.Set({n, "unreadable"}, c.unreadable);
    g.processes.Set({n, "skipped"}, c.skipped);
    for (const auto& [books, s] :
         {std::pair<const char*, const BooksSeries*>{"in_use", &c.in_use},
          std::pair<const char*, const BooksSeries*>{"retained", &c.retained}}) {
      if (s->floor) g.floor.Set({n, books}, s->floor->floor_bytes);
      if (s->slope.floors >= 2) {
        g.slope.Set({n, books, "least_squares"}, s->slope.slope_gib_per_h);
        g.slope.Set({n, books, "theil_sen"}, s->slope.theil_sen_gib_per_h);
      }
      if (s->slope.valid) {
        g.slope.Set({n, books, "low"}, s->slope.low_gib_per_h);
        g.slope.Set({n, books, "high"}, s->slope.high_gib_per_h);
      }
    }
    if (c.in_use.trend != BooksTrend::kUnknown) {
      g.condition.Set({n, "HeapGrowing"}, c.heap_growing ? 1 : 0);
      if (c.retained.trend != BooksTrend::kUnknown || c.heap_growing) {
        g.condition.Set({n, "AllocatorRetaining"}, c.retaining ? 1 : 0);
      }
    }
  }
  g.Flush();
}

}  // namespace allocguard::guard
