#include "operator/guard/guard.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

namespace allocguard::guard {
namespace {

std::string MiB(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

std::string PidList(const std::vector<pid_t>& pids) {
  std::string out;
  for (pid_t p : pids) out += (out.empty() ? "" : ", ") + std::to_string(p);
  return out;
}

constexpr GuardState kStates[] = {GuardState::kWaiting, GuardState::kWatching,
                                  GuardState::kBackpressure, GuardState::kRestarting};

}  // namespace

const char* GuardStateName(GuardState state) {
  switch (state) {
    case GuardState::kWaiting:
      return "waiting";
    case GuardState::kWatching:
      return "watching";
    case GuardState::kBackpressure:
      return "backpressure";
    case GuardState::kRestarting:
      return "restarting";
  }
  return "waiting";
}

struct Guard::Gauges {
  explicit Gauges(metrics::Registry& r)
      : anon(r.AddGauge("allocguard_guard_anon_bytes",
                        "Sum of RssAnon over the workload's processes.")),
        dirty(r.AddGauge("allocguard_guard_dirty_bytes",
                         "Dirty plus writeback page cache of the workload's memory cgroup (0 when "
                         "the cgroup is not visible).")),
        judged(r.AddGauge("allocguard_guard_judged_bytes",
                          "Anon plus dirty plus writeback: what the OOM killer counts and the "
                          "kernel cannot drop.")),
        pressure(r.AddGauge("allocguard_guard_pressure_ratio",
                            "Judged bytes as a fraction of the guard threshold or of the memory "
                            "limit.",
                            {"relative_to"})),
        threshold(r.AddGauge("allocguard_guard_threshold_bytes", "The guard threshold.")),
        limit(r.AddGauge("allocguard_guard_limit_bytes",
                         "The workload's memory limit (cgroup or --limit-bytes).")),
        floor(r.AddGauge("allocguard_guard_floor_bytes",
                         "The floor (lowest judged bytes) of the last complete minute.")),
        floors(r.AddGauge("allocguard_guard_floors", "Per-minute floors inside the slope window.")),
        slope(r.AddGauge("allocguard_guard_floor_slope_gib_per_hour",
                         "Slope of the per-minute floors over the window: least squares, its "
                         "interval bounds, and Theil-Sen.",
                         {"estimate"})),
        allocator(r.AddGauge("allocguard_guard_allocator_processes",
                             "Workload processes by the allocator they loaded (not_loaded when "
                             "none could be established).",
                             {"allocator"})),
        allocator_ok(r.AddGauge("allocguard_guard_allocator_loaded",
                                "1 when every workload process loaded the expected allocator.",
                                {"expected"})),
        state(r.AddGauge("allocguard_guard_state", "1 for the guard's current state.", {"state"})),
        processes(r.AddGauge("allocguard_guard_workload_processes",
                             "Workload processes the guard sees.")),
        samples(r.AddCounter("allocguard_guard_samples_total", "Samples taken.")),
        sample_errors(r.AddCounter("allocguard_guard_sample_errors_total",
                                   "Sampling attempts that found no workload or failed.")),
        lateness(r.AddGauge("allocguard_guard_sample_lateness_seconds",
                            "How late the last sample started against its schedule.")),
        actions(r.AddCounter("allocguard_guard_actions_total",
                             "Actions taken: backpressure_on, backpressure_off, sigterm.",
                             {"action"})) {}

  metrics::Gauge& anon;
  metrics::Gauge& dirty;
  metrics::Gauge& judged;
  metrics::Gauge& pressure;
  metrics::Gauge& threshold;
  metrics::Gauge& limit;
  metrics::Gauge& floor;
  metrics::Gauge& floors;
  metrics::Gauge& slope;
  metrics::Gauge& allocator;
  metrics::Gauge& allocator_ok;
  metrics::Gauge& state;
  metrics::Gauge& processes;
  metrics::Counter& samples;
  metrics::Counter& sample_errors;
  metrics::Gauge& lateness;
  metrics::Counter& actions;
};

Guard::Guard(GuardOptions options, WorkloadSource* source, AsyncReporter* reporter,
             metrics::Registry* registry, Clock* clock, std::function<void(const std::string&)> log)
    : options_(std::move(std::move(options))),
      source_(source),
      reporter_(reporter),
      clock_(clock),
      log_(std::move(log)),
      start_(clock->Now()),
      floors_(options_.floors) {
  if (options_.action == GuardAction::kBackpressure && options_.threshold_bytes) {
    gate_.emplace(*options_.threshold_bytes, options_.hysteresis);
  }
  if (registry != nullptr) {
    gauges_ = std::make_shared<Gauges>(*registry);
    if (options_.threshold_bytes) {
      gauges_->threshold.Set(static_cast<double>(*options_.threshold_bytes));
    }
    gauges_->actions.With({"backpressure_on"});
    gauges_->actions.With({"backpressure_off"});
    gauges_->actions.With({"sigterm"});
  }
  if (options_.books) books_ = std::make_unique<BooksWatch>(*options_.books, registry);
  Publish(nullptr);
}

void Guard::Step() {
  const Clock::TimePoint now = clock_->Now();
  auto reading = source_->Read();
  if (!reading.ok()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++snapshot_.sample_errors;
      snapshot_.state = GuardState::kWaiting;
      snapshot_.last.reset();
    }
    if (gauges_) gauges_->sample_errors.Inc();
    Publish(nullptr);
    return;
  }
  reading->sample.t_seconds = std::chrono::duration<double>(now - start_).count();
  const int64_t judged = reading->sample.JudgedBytes();
  if (reading->cgroup_note != cgroup_note_) {
    cgroup_note_ = reading->cgroup_note;
    Log(cgroup_note_.empty() ? "reading the workload's memory cgroup" : cgroup_note_);
  }
  floors_.Add(reading->sample);

  if (reading->pids != checked_pids_ || now >= next_allocator_check_) {
    checked_pids_ = reading->pids;
    next_allocator_check_ = now + options_.allocator_recheck;
    CheckAllocators(*reading);
  }
  if (options_.action == GuardAction::kBackpressure) Backpressure(*reading, judged);
  if (options_.action == GuardAction::kRestart) Restart(*reading, judged);
  std::optional<BooksReading> books;
  if (books_) {
    books = books_->Step(reading->sample.t_seconds, clock_->WallNow());
    ReportBooks(*books);
  }

  {
    std::lock_guard<std::mutex> lock(mu_);
    ++snapshot_.samples;
    snapshot_.last = *reading;
    snapshot_.floor = floors_.current_floor();
    snapshot_.slope = floors_.Slope();
    snapshot_.gate_open = !gate_ || gate_->open();
    snapshot_.allocator = last_check_;
    snapshot_.books = std::move(books);
    snapshot_.terminated.clear();
    for (const auto& entry : terminated_) snapshot_.terminated.insert(entry.first);
    GuardState state = GuardState::kWatching;
    if (!snapshot_.gate_open) state = GuardState::kBackpressure;
    for (pid_t pid : reading->main_pids) {
      if (terminated_.contains(pid)) state = GuardState::kRestarting;
    }
    snapshot_.state = state;
  }
  if (gauges_) gauges_->samples.Inc();
  Publish(&*reading);
}

void Guard::CheckAllocators(const WorkloadReading& reading) {
  std::vector<AllocatorObservation> observations;
  for (pid_t pid : reading.pids) {
    observations.push_back(source_->ObserveAllocator(pid));
    if (observations.back().loading) {
      // A process caught between exec and main: look again next sample.
      next_allocator_check_ = clock_->Now();
      return;
    }
  }
  AllocatorCheck check = guard::CheckAllocators(options_.expected_allocator, observations);
  if (gauges_) {
    std::map<std::string, int> counts = {{"not_loaded", 0}};
    for (auto a : {replay::Allocator::kGlibc, replay::Allocator::kJemalloc,
                   replay::Allocator::kMimalloc, replay::Allocator::kTcmalloc}) {
      counts[replay::AllocatorName(a)] = 0;
    }
    for (const auto& o : observations) {
      ++counts[o.allocator ? replay::AllocatorName(*o.allocator) : "not_loaded"];
    }
    for (const auto& [name, n] : counts) gauges_->allocator.With({name}).Set(n);
    gauges_->allocator_ok
        .With({options_.expected_allocator ? replay::AllocatorName(*options_.expected_allocator)
                                           : "any"})
        .Set(check.matches ? 1 : 0);
  }
  const bool changed = !last_check_ || last_check_->matches != check.matches ||
                       last_check_->reason != check.reason || last_check_->message != check.message;
  last_check_ = check;
  if (!changed) return;
  Log(std::string("allocator check: ") + (check.matches ? "ok" : "PROBLEM") + ": " + check.message);
  if (check.reason == "NoWorkloadProcesses") return;
  if (reporter_ != nullptr) {
    reporter_->SetCondition(
        {kAllocatorLoadedCondition, check.matches, check.reason, check.message});
    if (!check.matches) {
      reporter_->RecordEvent({true, check.reason, "CheckAllocator", check.message});
    }
  }
}

void Guard::Backpressure(const WorkloadReading& reading, int64_t judged) {
  (void)reading;
  if (!gate_) return;
  const bool changed = gate_->Observe(judged);
  if (!changed && gate_reported_) return;
  gate_reported_ = true;
  const bool open = gate_->open();
  const std::string message =
      open ? "anon + dirty " + MiB(judged) + " is at or below " + MiB(gate_->release_bytes()) +
                 " (release level of the " + MiB(gate_->threshold_bytes()) + " threshold)"
           : "anon + dirty " + MiB(judged) + " exceeds the guard threshold " +
                 MiB(gate_->threshold_bytes()) + "; the pod is taken out of its Services";
  if (changed) {
    Log(std::string(open ? "backpressure off: " : "backpressure ON: ") + message);
    if (gauges_) gauges_->actions.With({open ? "backpressure_off" : "backpressure_on"}).Inc();
  }
  if (reporter_ == nullptr) return;
  reporter_->SetCondition(
      {kMemoryHeadroomCondition, open, open ? "BelowThreshold" : "AboveThreshold", message});
  if (changed) {
    reporter_->RecordEvent({!open, open ? "MemoryBackpressureReleased" : "MemoryBackpressure",
                            "Backpressure", message});
  }
}

void Guard::Restart(const WorkloadReading& reading, int64_t judged) {
  const auto trigger =
      RestartTriggerBytes(options_.threshold_bytes, reading.limit_bytes, options_.restart);
  if (!trigger || judged < *trigger) return;
  const Clock::TimePoint now = clock_->Now();
  std::vector<pid_t> signalled;
  std::string failures;
  for (pid_t pid : reading.main_pids) {
    auto it = terminated_.find(pid);
    if (it != terminated_.end() && now - it->second < options_.restart_grace) continue;
    Status sent = source_->Terminate(pid);
    if (sent.ok()) {
      terminated_[pid] = now;
      signalled.push_back(pid);
      if (gauges_) gauges_->actions.With({"sigterm"}).Inc();
    } else {
      failures += (failures.empty() ? "" : "; ") + sent.message();
    }
  }
  if (signalled.empty() && failures.empty()) return;
  std::string note =
      "anon + dirty " + MiB(judged) + " reached the restart level " + MiB(*trigger) +
      (reading.limit_bytes ? " (memory limit " + MiB(*reading.limit_bytes) + ")" : std::string());
  if (!signalled.empty()) note += "; sent SIGTERM to process(es) " + PidList(signalled);
  if (!failures.empty()) note += "; could not signal: " + failures;
  Log("restart: " + note);
  if (reporter_ != nullptr) {
    reporter_->RecordEvent(
        {true, signalled.empty() ? "MemoryRestartFailed" : "MemoryRestart", "Restart", note});
  }
}

void Guard::ReportBooks(const BooksReading& books) {
  struct Judged {
    const char* type;
    std::optional<bool> now;
    const std::string& message;
    std::optional<bool>* last;
    const char* yes_reason;
    const char* no_reason;
    const char* event_reason;
  };
  for (const Judged& j :
       {Judged{kAllocatorRetainingCondition, books.retaining, books.retaining_message,
               &books_retaining_, "RetainedRisingInUseFlat", "NotRetaining", "AllocatorRetaining"},
        Judged{kHeapGrowingCondition, books.heap_growing, books.heap_growing_message,
               &books_heap_growing_, "InUseRising", "InUseNotRising", "HeapGrowing"}}) {
    // Reported when judged and changed; an unjudged sample keeps the last word.
    if (!j.now || j.now == *j.last) continue;
    *j.last = j.now;
    const std::string reason = *j.now ? j.yes_reason : j.no_reason;
    Log(std::string(j.type) + " " + (*j.now ? "True" : "False") + ": " + j.message);
    if (reporter_ == nullptr) continue;
    reporter_->SetCondition({j.type, *j.now, reason, j.message});
    if (*j.now) reporter_->RecordEvent({true, j.event_reason, "ReadAllocatorBooks", j.message});
  }
}

void Guard::Publish(const WorkloadReading* reading) {
  if (!gauges_) return;
  GuardSnapshot s = Snapshot();
  for (GuardState st : kStates) gauges_->state.With({GuardStateName(st)}).Set(st == s.state);
  if (reading == nullptr) {
    gauges_->processes.Set(0);
    return;
  }
  const auto judged = static_cast<double>(reading->sample.JudgedBytes());
  gauges_->processes.Set(static_cast<double>(reading->pids.size()));
  gauges_->anon.Set(static_cast<double>(reading->sample.anon_bytes));
  gauges_->dirty.Set(static_cast<double>(reading->sample.cgroup_dirty_bytes.value_or(0) +
                                         reading->sample.cgroup_writeback_bytes.value_or(0)));
  gauges_->judged.Set(judged);
  if (options_.threshold_bytes && *options_.threshold_bytes > 0) {
    gauges_->pressure.With({"threshold"})
        .Set(judged / static_cast<double>(*options_.threshold_bytes));
  }
  if (reading->limit_bytes && *reading->limit_bytes > 0) {
    gauges_->limit.Set(static_cast<double>(*reading->limit_bytes));
    gauges_->pressure.With({"limit"}).Set(judged / static_cast<double>(*reading->limit_bytes));
  }
  if (s.floor) gauges_->floor.Set(s.floor->floor_bytes);
  gauges_->floors.Set(s.slope.floors);
  if (s.slope.floors >= 2) {
    gauges_->slope.With({"least_squares"}).Set(s.slope.slope_gib_per_h);
    gauges_->slope.With({"theil_sen"}).Set(s.slope.theil_sen_gib_per_h);
  }
  if (s.slope.valid) {
    gauges_->slope.With({"low"}).Set(s.slope.low_gib_per_h);
    gauges_->slope.With({"high"}).Set(s.slope.high_gib_per_h);
  }
}

void Guard::Run() {
  // Scheduled on the real steady clock: the loop sleeps on a condition
  // variable so Stop() ends it at once.
  auto next = std::chrono::steady_clock::now();
  while (true) {
    const auto started = std::chrono::steady_clock::now();
    if (gauges_) gauges_->lateness.Set(std::chrono::duration<double>(started - next).count());
    Step();
    next += options_.interval;
    const auto after = std::chrono::steady_clock::now();
    if (next < after) {
      // A sample took longer than the interval: skip the missed slots rather
      // than bursting to catch up.
      while (next < after) next += options_.interval;
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (stop_cv_.wait_until(lock, next, [this] { return stop_; })) return;
  }
}

void Guard::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
}

GuardSnapshot Guard::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return snapshot_;
}

}  // namespace allocguard::guard
