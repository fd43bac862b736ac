#include "operator/replay/replay_runner.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <mutex>

#include "operator/common/rfc3339.h"
#include "operator/common/version.h"
#include "operator/replay/sample_csv.h"
#include "operator/replay/workload_process.h"
#include "operator/replay/workload_target.h"

namespace allocguard::replay {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

namespace {

// Waits until GET ready.path answers 2xx, the workload exits, or `deadline`.
Status WaitReady(const LoadSpec& load, WorkloadTarget* target, Clock::TimePoint deadline,
                 ReplayEnv* env, Clock* clock) {
  Status last = Unavailable("no answer yet");
  while (clock->Now() < deadline) {
    if (auto how = target->ExitedBeforeReady()) {
      return FailedPrecondition("the workload exited before it was ready (" + *how + ")");
    }
    auto client = env->NewHttpClient({.base_url = load.base_url,
                                      .connect_timeout = milliseconds(1000),
                                      .read_timeout = milliseconds(5000),
                                      .keep_alive = false});
    if (!client.ok()) return client.status();
    auto res = (*client)->Send({.method = "GET", .path = load.ready.path});
    if (res.ok() && res->status >= 200 && res->status < 300) return Status::Ok();
    last = res.ok()
               ? Unavailable("GET " + load.ready.path + " answered " + std::to_string(res->status))
               : res.status();
    clock->SleepUntil(clock->Now() + milliseconds(200));
  }
  return DeadlineExceeded(
      "not ready after " +
      std::to_string(duration_cast<milliseconds>(load.ready.timeout).count() / 1000.0) +
      " s: " + last.message());
}

// Where and when, for the report's run metadata: the start (UTC), the release
// that recorded it, the machine and its CPU count (glibc's default arena
// limit is 8 per CPU).
void AddRunMetadata(CsvHeader* header) {
  header->push_back({"started", FormatRfc3339(std::chrono::system_clock::now(), false)});
  header->push_back({"allocguard_version", std::string(Version())});
  utsname host{};
  header->push_back({"host", uname(&host) == 0 ? host.nodename : ""});
  header->push_back({"cpus", std::to_string(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)))});
}

SampleRow MakeRow(double t_seconds, const ProcessTreeUsage& usage,
                  const std::optional<CgroupMemoryStat>& cgroup, const LoadStats& stats) {
  SampleRow row;
  row.memory.t_seconds = t_seconds;
  row.memory.anon_bytes = usage.anon_bytes;
  row.memory.rss_bytes = usage.rss_bytes;
  row.cpu_seconds = usage.cpu_seconds;
  row.processes = usage.processes;
  row.threads = usage.threads;
  if (cgroup) {
    row.memory.cgroup_anon_bytes = cgroup->anon_bytes;
    row.memory.cgroup_dirty_bytes = cgroup->dirty_bytes;
    row.memory.cgroup_writeback_bytes = cgroup->writeback_bytes;
    row.memory.cgroup_usage_bytes = cgroup->usage_bytes;
    row.oom_kills = cgroup->oom_kills;
  }
  row.released = stats.released;
  row.sent = stats.sent;
  row.completed = stats.completed;
  row.late = stats.late;
  row.errors = stats.errors;
  row.in_flight = stats.in_flight;
  return row;
}

// One variant's run (or the one run of an attached workload): set up, start,
// wait until ready, drive the load while sampling and judging, stop.
class VariantRun {
 public:
  VariantRun(const ReplayOptions& options, ReplayEnv* env, Clock* clock)
      : options_(options), env_(env), clock_(clock) {}

  // REQUIRES: target was made with Context().
  VariantResult Run(std::unique_ptr<WorkloadTarget> target);

  // What a target gets of this run.
  TargetContext Context() {
    return {.options = &options_,
            .env = env_,
            .clock = clock_,
            .progress = [this](const std::string& line) { Progress(line); },
            .event = [this](const RunEvent& e) { Event(e); }};
  }

 private:
  void Progress(const std::string& line) { options_.progress(name_ + ": " + line); }
  void Event(const RunEvent& e) {
    run_.events.push_back(e);
    if (csv_) {
      Status s = csv_->AppendEvent(e);
      (void)s;  // a full disk shows in the next Append, which stops the run
    }
  }
  CsvHeader Header(const std::string& cgroup) const;
  Status StartWorkload();
  std::string FailureOfProcess(const std::string& what) const;
  void DriveAndSample();
  void SampleUntilDone();
  bool TakeSample(Clock::TimePoint t0);
  void RecordBooks(SampleRow* row) const;
  void RecordEnd(int minute);
  bool OomKilled(const std::optional<CgroupMemoryStat>& stat) const;
  std::optional<CgroupMemoryStat> ReadCgroup() const;
  bool JudgeIfMinuteEnded();
  VariantResult Finish();
  void ReportMinute(const VariantResult& r, const LoadStats& stats);

  const ReplayOptions& options_;
  ReplayEnv* const env_;
  Clock* const clock_;
  std::unique_ptr<WorkloadTarget> target_;
  std::string name_;
  LoadSpec load_;
  CsvRun run_;
  std::optional<SampleCsvWriter> csv_;
  std::mutex errors_mu_;
  std::ofstream errors_;             // <name>.errors: the unexpected responses
  std::unique_ptr<RunLoad> driver_;  // destroyed first: its threads write errors_
  LoadStats stats_;                  // at the last sample
  int64_t initial_oom_kills_ = 0;
  size_t floors_reported_ = 0;
};

VariantResult VariantRun::Run(std::unique_ptr<WorkloadTarget> target) {
  target_ = std::move(target);
  name_ = target_->name();
  load_ = options_.load;
  target_->PrepareLoad(&load_);
  // The cgroup first: its outcome goes into the CSV header.
  const std::string cgroup = target_->OpenCgroup();
  if (!target_->cgroup()) {
    Progress("no memory cgroup (" + cgroup.substr(6) +
             "); sampling /proc only: dirty and writeback pages and OOM kills are not seen");
  }
  run_.header = Header(cgroup);
  auto writer = SampleCsvWriter::Open(options_.out_dir + "/" + name_ + ".csv", run_.header);
  if (!writer.ok()) {
    run_.events.push_back(RunEvent::Failed(writer.status().message()));
    return Finish();
  }
  csv_.emplace(std::move(writer).value());
  if (Status started = StartWorkload(); !started.ok()) {
    Event(RunEvent::Failed(started.message()));
    return Finish();
  }
  DriveAndSample();
  return Finish();
}

CsvHeader VariantRun::Header(const std::string& cgroup) const {
  CsvHeader header = {{"variant", name_}};
  target_->DescribeIn(&header);
  header.push_back({"base_url", load_.base_url});
  header.push_back({"rate", std::to_string(load_.rate)});
  header.push_back({"workers", std::to_string(load_.workers)});
  header.push_back({"seed", std::to_string(load_.seed)});
  header.push_back({"duration_s", std::to_string(options_.duration.count())});
  header.push_back({"cgroup", cgroup});
  if (!options_.books_dir.empty()) header.push_back({"books_dir", options_.books_dir});
  for (const auto& kv : options_.judge.ToHeader()) header.push_back(kv);
  AddRunMetadata(&header);
  return header;
}

// Starts (or finds) the workload and waits until it is ready for the load.
// A failure's message is the run's failure.
Status VariantRun::StartWorkload() {
  AG_RETURN_IF_ERROR(target_->Start());
  const auto ready_deadline = clock_->Now() + load_.ready.timeout;
  AG_RETURN_IF_ERROR(target_->AwaitProcesses(ready_deadline));
  Status ready = WaitReady(load_, target_.get(), ready_deadline, env_, clock_);
  if (!ready.ok()) {
    return FailedPrecondition(FailureOfProcess("workload not ready: " + ready.message()));
  }
  return target_->VerifyAllocator();
}

// `what`, with the last lines the workload wrote to stderr when it wrote any.
std::string VariantRun::FailureOfProcess(const std::string& what) const {
  std::string tail = TailOfFile(options_.out_dir + "/" + name_ + ".stderr", 5);
  return what + (tail.empty() ? "" : "; last stderr lines: " + tail);
}

void VariantRun::DriveAndSample() {
  errors_.open(options_.out_dir + "/" + name_ + ".errors");
  errors_ << "t_s,request,method,path,status,detail\n";
  errors_.flush();
  driver_ = env_->NewLoad(
      load_,
      [this]() {
        return env_->NewHttpClient({.base_url = load_.base_url,
                                    .read_timeout = load_.request_timeout,
                                    .write_timeout = load_.request_timeout});
      },
      clock_,
      [this](const UnexpectedResponse& u) {
        std::lock_guard<std::mutex> lock(errors_mu_);
        errors_ << u.t_seconds << "," << u.request_name << "," << u.method << "," << u.path << ","
                << u.status << "," << u.detail << "\n";
        errors_.flush();
      });
  Status started = driver_->Start();
  if (!started.ok()) {
    Event(RunEvent::Failed(started.message()));
    return;
  }
  SampleUntilDone();
  driver_->Stop();
  LoadStats final_stats = driver_->Snapshot();
  Event(RunEvent::Latency(final_stats.p50_ms, final_stats.p99_ms, final_stats.max_ms));
  target_->Stop();
}

// Samples every interval until the duration is over, the judge decided, or
// the workload ended.
void VariantRun::SampleUntilDone() {
  const auto interval = duration_cast<Clock::Duration>(
      std::chrono::duration<double>(options_.judge.sample_interval_seconds));
  const auto t0 = clock_->Now();
  const auto end = t0 + options_.duration;
  if (auto stat = ReadCgroup()) initial_oom_kills_ = stat->oom_kills;
  for (int64_t i = 0;; ++i) {
    if (!TakeSample(t0) || JudgeIfMinuteEnded()) return;
    auto next = t0 + interval * (i + 1);
    if (next > end) return;
    clock_->SleepUntil(next);
  }
}

std::optional<CgroupMemoryStat> VariantRun::ReadCgroup() const {
  if (!target_->cgroup()) return std::nullopt;
  auto stat = target_->cgroup()->ReadStat();
  if (!stat.ok()) return std::nullopt;
  return *stat;
}

bool VariantRun::OomKilled(const std::optional<CgroupMemoryStat>& stat) const {
  return stat && stat->oom_kills > initial_oom_kills_;
}

// Reads and records one sample. False when the run must end (an OOM kill,
// the workload gone, the CSV unwritable), with the event saying why.
bool VariantRun::TakeSample(Clock::TimePoint t0) {
  const double t = std::chrono::duration<double>(clock_->Now() - t0).count();
  const int minute = static_cast<int>(t / 60);
  // The cgroup first: a workload the OOM killer ended is OOMKilled, not Failed.
  std::optional<CgroupMemoryStat> cgroup = ReadCgroup();
  if (OomKilled(cgroup)) {
    Event(RunEvent::Oom(minute));
    return false;
  }
  auto usage = env_->ReadUsage(target_->Processes());
  if (!usage.ok() || target_->Ended()) {
    RecordEnd(minute);
    return false;
  }
  stats_ = driver_->Snapshot();
  run_.rows.push_back(MakeRow(t, *usage, cgroup, stats_));
  RecordBooks(&run_.rows.back());
  Status appended = csv_->Append(run_.rows.back());
  if (!appended.ok()) {
    Event(RunEvent::Failed(appended.message()));
    return false;
  }
  return true;
}

// The books of the workload's processes that publish them, when the run
// reads books. A missing or unreadable directory records nothing.
void VariantRun::RecordBooks(SampleRow* row) const {
  if (options_.books_dir.empty()) return;
  auto files = env_->ReadBooks(options_.books_dir);
  if (!files.ok()) return;
  const BooksTotals totals = SumFreshBooks(*files, std::chrono::system_clock::now());
  row->books_processes = totals.processes;
  if (totals.split_processes == 0) return;
  row->books_in_use_bytes = static_cast<int64_t>(totals.in_use_bytes);
  row->books_retained_bytes = static_cast<int64_t>(totals.retained_bytes);
}

// The workload is gone during the run, in `minute`.
void VariantRun::RecordEnd(int minute) {
  const std::string how = target_->HowItEnded();
  // The OOM killer may have struck between the cgroup read and now.
  if (OomKilled(ReadCgroup())) {
    Event(RunEvent::Oom(minute));
    return;
  }
  Event(RunEvent::Exited(minute));
  Event(RunEvent::Failed(FailureOfProcess("the workload died during the run in minute " +
                                          std::to_string(minute) + " (" + how + ")")));
}

// Floors change only when a minute completes (within one interval of its end,
// as ComputeMinuteFloors counts it): analyzes then, reports the minute, and
// says whether the judge decided (the run stops).
bool VariantRun::JudgeIfMinuteEnded() {
  const double t = run_.rows.back().memory.t_seconds;
  const double next_minute_end =
      60.0 * (options_.judge.warmup_minutes + static_cast<double>(floors_reported_) + 1);
  if (t + options_.judge.sample_interval_seconds + 1e-9 < next_minute_end) return false;
  VariantResult live = AnalyzeRun(run_, options_.judge, /*finished=*/false);
  if (live.floors.size() <= floors_reported_) return false;
  floors_reported_ = live.floors.size();
  ReportMinute(live, stats_);
  // --no-early-stop: the run lasts its duration whatever the judge says
  // on the way (the verdict is the finished run's).
  if (!live.decided_at_minute || !options_.judge.early_stop) return false;
  Event(RunEvent::Decided(memory::FloorDecisionName(live.judgement.decision),
                          *live.decided_at_minute));
  return true;
}

VariantResult VariantRun::Finish() {
  VariantResult r = AnalyzeRun(run_, options_.judge, /*finished=*/true);
  std::ofstream json(options_.out_dir + "/" + name_ + ".json");
  json << ToJsonText(r) << "\n";
  return r;
}

void VariantRun::ReportMinute(const VariantResult& r, const LoadStats& stats) {
  char line[512];
  std::snprintf(line, sizeof line, "%s  sent %lld  late %lld  errors %lld  in flight %lld",
                FormatMinuteProgress(r).c_str(), static_cast<long long>(stats.sent),
                static_cast<long long>(stats.late), static_cast<long long>(stats.errors),
                static_cast<long long>(stats.in_flight));
  Progress(line);
}

// The run of an attached workload: the Pod's processes, else a pid.
VariantResult RunAttached(const ReplayOptions& options, ReplayEnv* env, Clock* clock) {
  VariantRun run(options, env, clock);
  if (options.attach_processes) {
    return run.Run(NewPodProcessesTarget(run.Context(), options.attach_processes));
  }
  return run.Run(NewAttachedPidTarget(run.Context(), *options.attach_pid));
}

}  // namespace

Result<ReplaySummary> RunReplay(const ReplayOptions& options, Clock* clock) {
  if (access(options.out_dir.c_str(), W_OK) != 0) {
    return PermissionDenied("output directory " + options.out_dir + " is not writable");
  }
  ReplayEnv* env = options.env ? options.env : ReplayEnv::Default();
  std::vector<VariantResult> results;
  if (options.attach_pid || options.attach_processes) {
    results.push_back(RunAttached(options, env, clock));
  } else {
    if (options.command.empty()) return InvalidArgument("no workload command and no --pid");
    if (options.variants.empty()) return InvalidArgument("no allocator variant to run");
    for (const AllocatorVariant& v : options.variants) {
      VariantRun run(options, env, clock);
      VariantResult r = run.Run(NewLocalProcessTarget(run.Context(), &v));
      options.progress(v.name + ": " + memory::VerdictName(r.verdict.verdict) + " — " +
                       r.verdict.explanation);
      results.push_back(std::move(r));
    }
  }
  ReplaySummary summary = Summarize(std::move(results));
  std::ofstream json(options.out_dir + "/summary.json");
  json << ToJsonText(summary) << "\n";
  return summary;
}

}  // namespace allocguard::replay
