#pragma once

// The guard's sampling loop: every interval it reads the workload's memory,
// keeps per-minute floors and the floor slope, checks the allocator the
// processes loaded, and acts (Backpressure, Restart) as its policy says.
//
// The loop never waits for anything but its own /proc and cgroup reads: what
// must reach the API server goes to an AsyncReporter (its own thread, bounded
// queue), and /metrics reads the gauges the loop sets. A slow or unreachable
// API server delays reports, never a sample (seed 003).

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "operator/common/clock.h"
#include "operator/guard/actions.h"
#include "operator/guard/allocator_check.h"
#include "operator/guard/books_watch.h"
#include "operator/guard/floor_window.h"
#include "operator/guard/pod_reporter.h"
#include "operator/guard/workload_source.h"
#include "operator/metrics/registry.h"

namespace allocguard::guard {

struct GuardOptions {
  Clock::Duration interval = std::chrono::seconds(2);
  FloorWindowOptions floors;
  GuardAction action = GuardAction::kNone;
  // anon + dirty + writeback above which Backpressure closes the gate (and
  // below which Restart acts, when lower than the limit's margin).
  std::optional<int64_t> threshold_bytes;
  HysteresisOptions hysteresis;
  RestartOptions restart;
  // A process that got SIGTERM is not signalled again for this long.
  Clock::Duration restart_grace = std::chrono::seconds(60);
  // The allocator the policy preloads; nullopt: report what is loaded only.
  std::optional<replay::Allocator> expected_allocator;
  // The allocator check runs when the workload's processes change and at
  // least this often.
  Clock::Duration allocator_recheck = std::chrono::seconds(60);
  // The stats agent's books (books_watch.h); nullopt: not read.
  std::optional<BooksWatchOptions> books;
};

enum class GuardState { kWaiting, kWatching, kBackpressure, kRestarting };
const char* GuardStateName(GuardState state);  // "waiting", "watching", ...

// What the loop last saw; for tests, logs and /metrics.
struct GuardSnapshot {
  int64_t samples = 0;
  int64_t sample_errors = 0;
  GuardState state = GuardState::kWaiting;
  std::optional<WorkloadReading> last;
  std::optional<memory::MinuteFloor> floor;
  FloorSlope slope;
  bool gate_open = true;
  std::optional<AllocatorCheck> allocator;
  std::set<pid_t> terminated;         // processes that got SIGTERM
  std::optional<BooksReading> books;  // with GuardOptions::books
};

class Guard {
 public:
  // source and clock must outlive the guard; reporter and registry may be
  // null (local use without Kubernetes, no metrics). log receives one line per
  // noteworthy happening.
  Guard(GuardOptions options, WorkloadSource* source, AsyncReporter* reporter,
        metrics::Registry* registry, Clock* clock, std::function<void(const std::string&)> log);

  // Takes one sample and acts on it. Never calls the API server.
  void Step();

  // Calls Step() every interval (on the real clock) until Stop().
  void Run();
  void Stop();

  GuardSnapshot Snapshot() const;

 private:
  void CheckAllocators(const WorkloadReading& reading);
  void Backpressure(const WorkloadReading& reading, int64_t judged);
  void Restart(const WorkloadReading& reading, int64_t judged);
  void ReportBooks(const BooksReading& books);
  void Publish(const WorkloadReading* reading);
  void Log(const std::string& line) const {
    if (log_) log_(line);
  }

  GuardOptions options_;
  WorkloadSource* source_;
  AsyncReporter* reporter_;
  Clock* clock_;
  std::function<void(const std::string&)> log_;
  Clock::TimePoint start_;
  FloorWindow floors_;
  std::optional<BackpressureGate> gate_;
  bool gate_reported_ = false;
  std::vector<pid_t> checked_pids_;
  Clock::TimePoint next_allocator_check_{};
  std::optional<AllocatorCheck> last_check_;
  std::string cgroup_note_;
  std::map<pid_t, Clock::TimePoint> terminated_;
  std::unique_ptr<BooksWatch> books_;
  std::optional<bool> books_retaining_, books_heap_growing_;  // last reported

  mutable std::mutex mu_;  // guards snapshot_ and stop_
  GuardSnapshot snapshot_;
  std::condition_variable stop_cv_;
  bool stop_ = false;

  struct Gauges;
  std::shared_ptr<Gauges> gauges_;  // null without a registry
};

}  // namespace allocguard::guard
