#include "operator/replay/replay_runner.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "operator/common/rfc3339.h"
#include "operator/common/subprocess.h"
#include "operator/common/version.h"
#include "operator/net/http.h"
#include "operator/replay/load_driver.h"
#include "operator/replay/memory_cgroup.h"
#include "operator/replay/proc_reader.h"
#include "operator/replay/sample_csv.h"
#include "operator/replay/workload_process.h"

namespace allocguard::replay {

using memory::kBytesPerMiB;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

namespace {

// A port that was free a moment ago. The workload binds it next; the window
// in which another process could take it is small and only costs a Failed run.
Result<int> PickFreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Unavailable("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return Unavailable("cannot find a free port");
  }
  close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

// Says how the workload ended, or nullopt while it runs.
using ExitCheck = std::function<std::optional<std::string>()>;

// Waits until GET ready.path answers 2xx, the workload exits, or `deadline`.
Status WaitReady(const LoadSpec& load, const ExitCheck& exited, Clock::TimePoint deadline,
                 Clock* clock) {
  Status last = Unavailable("no answer yet");
  while (clock->Now() < deadline) {
    if (auto how = exited()) {
      return FailedPrecondition("the workload exited before it was ready (" + *how + ")");
    }
    auto client = net::NewHttpClient({.base_url = load.base_url,
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

class VariantRun {
 public:
  VariantRun(const ReplayOptions& options, const AllocatorVariant* variant, Clock* clock)
      : options_(options), variant_(variant), clock_(clock) {}

  VariantResult Run();

 private:
  void Progress(const std::string& line) { options_.progress(name_ + ": " + line); }
  void Event(const RunEvent& e) {
    run_.events.push_back(e);
    if (csv_) {
      Status s = csv_->AppendEvent(e);
      (void)s;  // a full disk shows in the next Append, which stops the run
    }
  }
  VariantResult Finish(bool finished);
  void ReportMinute(const VariantResult& r, const LoadStats& stats);

  const ReplayOptions& options_;
  const AllocatorVariant* variant_;  // null when attached
  Clock* clock_;
  std::string name_;
  CsvRun run_;
  std::optional<SampleCsvWriter> csv_;
  std::unique_ptr<MemoryCgroup> cgroup_;
};

VariantResult VariantRun::Finish(bool finished) {
  VariantResult r = AnalyzeRun(run_, options_.judge, finished);
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

VariantResult VariantRun::Run() {
  name_ = variant_ ? variant_->name : options_.attach_name;
  LoadSpec load = options_.load;
  std::vector<std::string> argv = options_.command;
  if (variant_) {
    bool wants_port = load.base_url.find("{port}") != std::string::npos;
    for (const auto& a : argv) wants_port = wants_port || a.find("{port}") != std::string::npos;
    if (wants_port) {
      auto port = PickFreePort();
      if (port.ok()) {
        for (auto& a : argv) a = ReplaceAll(a, "{port}", std::to_string(*port));
        load.base_url = ReplaceAll(load.base_url, "{port}", std::to_string(*port));
      }
    }
  }

  // The cgroup first: its outcome goes into the CSV header.
  std::string cgroup_desc;
  if (options_.attach_processes) {
    cgroup_desc =
        "none: the workload's cgroup is not visible from the driver; "
        "RssAnon only";
  } else if (options_.attach_pid) {
    auto cg = MemoryCgroup::OfProcess(*options_.attach_pid);
    if (cg.ok()) cgroup_ = std::move(cg).value();
    cgroup_desc = cg.ok() ? "v" + std::to_string(cgroup_->version()) + " " + cgroup_->path()
                          : "none: " + cg.status().message();
  } else if (options_.use_cgroup) {
    auto cg = MemoryCgroup::Create("allocguard-" + name_ + "-" + std::to_string(getpid()),
                                   options_.memory_limit_bytes);
    if (cg.ok()) cgroup_ = std::move(cg).value();
    cgroup_desc = cg.ok() ? "v" + std::to_string(cgroup_->version()) + " " + cgroup_->path()
                          : "none: " + cg.status().message();
  } else {
    cgroup_desc = "none: disabled by --no-cgroup";
  }
  if (!cgroup_) {
    Progress("no memory cgroup (" + cgroup_desc.substr(6) +
             "); sampling /proc only: dirty and writeback pages and OOM kills "
             "are not seen");
  }

  std::vector<std::pair<std::string, std::string>> header = {{"variant", name_}};
  std::string env_text;
  if (variant_) {
    for (const auto& [k, v] : variant_->env)
      env_text += (env_text.empty() ? "" : " ") + k + "=" + v;
    header.push_back({"allocator", AllocatorName(variant_->allocator)});
    header.push_back({"env", env_text});
    header.push_back({"library", variant_->library});
    std::string cmd;
    for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    header.push_back({"command", cmd});
  } else {
    header.push_back({"allocator", options_.attach_allocator});
    header.push_back({"attached_pid", options_.attach_processes
                                          ? std::string("processes of the pod")
                                          : std::to_string(*options_.attach_pid)});
  }
  header.push_back({"base_url", load.base_url});
  header.push_back({"rate", std::to_string(load.rate)});
  header.push_back({"workers", std::to_string(load.workers)});
  header.push_back({"seed", std::to_string(load.seed)});
  header.push_back({"duration_s", std::to_string(options_.duration.count())});
  header.push_back({"cgroup", cgroup_desc});
  for (const auto& kv : options_.judge.ToHeader()) header.push_back(kv);
  // Where and when, for the report's run metadata: the start (UTC), the
  // release that recorded it, the machine and its CPU count (glibc's default
  // arena limit is 8 per CPU).
  header.push_back({"started", FormatRfc3339(std::chrono::system_clock::now(), false)});
  header.push_back({"allocguard_version", std::string(Version())});
  utsname host{};
  header.push_back({"host", uname(&host) == 0 ? host.nodename : ""});
  header.push_back({"cpus", std::to_string(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)))});
  run_.header = header;
  auto writer = SampleCsvWriter::Open(options_.out_dir + "/" + name_ + ".csv", header);
  if (!writer.ok()) {
    run_.events.push_back(RunEvent::Failed(writer.status().message()));
    return Finish(true);
  }
  csv_.emplace(std::move(writer).value());

  // Start the workload.
  std::optional<WorkloadProcess> process;
  pid_t root = 0;
  std::string stderr_path = options_.out_dir + "/" + name_ + ".stderr";
  if (variant_) {
    WorkloadLaunch launch;
    launch.argv = argv;
    launch.env = VariantEnvironment(*variant_, CurrentEnvironment());
    launch.stdout_path = options_.out_dir + "/" + name_ + ".stdout";
    launch.stderr_path = stderr_path;
    if (cgroup_) launch.cgroup_procs_path = cgroup_->path() + "/cgroup.procs";
    auto started = WorkloadProcess::Start(launch);
    if (!started.ok()) {
      Event(RunEvent::Failed(started.status().message()));
      return Finish(true);
    }
    process.emplace(std::move(started).value());
    root = process->pid();
    Progress("started pid " + std::to_string(root) + " (" + AllocatorName(variant_->allocator) +
             (env_text.empty() ? "" : ", " + env_text) + ")");
  } else if (options_.attach_pid) {
    root = *options_.attach_pid;
  }

  auto failure_of_process = [&](const std::string& what) {
    std::string tail = TailOfFile(stderr_path, 5);
    return what + (tail.empty() ? "" : "; last stderr lines: " + tail);
  };

  // The processes measured: the started or attached root, or the pod's.
  std::vector<pid_t> targets;
  auto find_targets = [&]() {
    if (options_.attach_processes) {
      targets = options_.attach_processes();
    } else {
      targets = {root};
    }
  };
  find_targets();
  const auto ready_deadline = clock_->Now() + load.ready.timeout;
  if (options_.attach_processes) {
    // The workload's container may start after the driver's.
    for (; targets.empty() && clock_->Now() < ready_deadline; find_targets()) {
      clock_->SleepUntil(clock_->Now() + milliseconds(200));
    }
    if (targets.empty()) {
      Event(RunEvent::Failed("no workload process appeared in the pod within the ready timeout"));
      return Finish(true);
    }
    std::string pids;
    for (pid_t p : targets) pids += (pids.empty() ? "" : " ") + std::to_string(p);
    Progress("measuring pid " + pids);
  }
  ExitCheck exited = [&]() -> std::optional<std::string> {
    if (process && process->Poll().exited) return process->Poll().Describe();
    if (options_.attach_processes) {
      find_targets();
      if (targets.empty()) return std::string("its processes are gone");
    }
    return std::nullopt;
  };

  Status ready = WaitReady(load, exited, ready_deadline, clock_);
  if (!ready.ok()) {
    Event(RunEvent::Failed(failure_of_process("workload not ready: " + ready.message())));
    return Finish(true);
  }
  if (variant_ && !variant_->library.empty()) {
    // LD_PRELOAD is silently ignored by static binaries, setuid programs and
    // musl loaders given a glibc library: check the library is really mapped.
    // maps shows the resolved file (libtcmalloc_minimal.so.4.5.10 for the
    // .so.4 link), so compare canonical paths.
    std::error_code ec;
    auto wanted = std::filesystem::canonical(variant_->library, ec);
    ProcReader proc;
    auto libs = proc.MappedLibraries(root);
    bool loaded = false;
    if (libs.ok() && !ec) {
      for (const auto& l : *libs) {
        auto mapped = std::filesystem::canonical(l, ec);
        loaded = loaded || (!ec && mapped == wanted);
      }
    }
    if (!loaded) {
      Event(RunEvent::Failed(variant_->library +
                             " is not mapped into the workload: LD_PRELOAD was ignored (static "
                             "binary, setuid program, or a loader that cannot load this "
                             "library)"));
      return Finish(true);
    }
    Event(RunEvent::AllocatorLoaded(variant_->library));
  }

  // Drive the load and sample.
  std::mutex errors_mu;
  std::ofstream errors(options_.out_dir + "/" + name_ + ".errors");
  errors << "t_s,request,method,path,status,detail\n";
  errors.flush();
  LoadDriver driver(
      load,
      [&load]() {
        return net::NewHttpClient({.base_url = load.base_url,
                                   .read_timeout = load.request_timeout,
                                   .write_timeout = load.request_timeout});
      },
      clock_,
      [&](const UnexpectedResponse& u) {
        std::lock_guard<std::mutex> lock(errors_mu);
        errors << u.t_seconds << "," << u.request_name << "," << u.method << "," << u.path << ","
               << u.status << "," << u.detail << "\n";
        errors.flush();
      });
  Status started = driver.Start();
  if (!started.ok()) {
    Event(RunEvent::Failed(started.message()));
    return Finish(true);
  }
  ProcReader proc;
  const auto interval = duration_cast<Clock::Duration>(
      std::chrono::duration<double>(options_.judge.sample_interval_seconds));
  const auto t0 = clock_->Now();
  const auto end = t0 + options_.duration;
  size_t floors_reported = 0;
  int64_t initial_oom_kills = 0;
  if (cgroup_) {
    auto st = cgroup_->ReadStat();
    if (st.ok()) initial_oom_kills = st->oom_kills;
  }
  bool finished = true;
  for (int64_t i = 0;; ++i) {
    auto now = clock_->Now();
    SampleRow row;
    row.memory.t_seconds = std::chrono::duration<double>(now - t0).count();
    // The cgroup first: a workload the OOM killer ended is OOMKilled, not
    // Failed.
    std::optional<CgroupMemoryStat> cg_stat;
    if (cgroup_) {
      auto st = cgroup_->ReadStat();
      if (st.ok()) cg_stat = *st;
      if (cg_stat && cg_stat->oom_kills > initial_oom_kills) {
        Event(
            RunEvent::Oom(static_cast<int>(std::chrono::duration<double>(now - t0).count() / 60)));
        break;
      }
    }
    if (options_.attach_processes) find_targets();
    auto usage = proc.ReadUsage(targets);
    if (!usage.ok() || (process && process->Poll().exited)) {
      std::string how = process ? process->Poll().Describe()
                                : (options_.attach_processes ? "its processes are gone: exited or "
                                                               "killed by the OOM killer"
                                                             : "process is gone");
      const int minute = static_cast<int>(row.memory.t_seconds / 60);
      // The OOM killer may have struck between the cgroup read above and now.
      if (cgroup_) {
        auto st = cgroup_->ReadStat();
        if (st.ok() && st->oom_kills > initial_oom_kills) {
          Event(RunEvent::Oom(minute));
          break;
        }
      }
      Event(RunEvent::Exited(minute));
      Event(RunEvent::Failed(failure_of_process("the workload died during the run in minute " +
                                                std::to_string(minute) + " (" + how + ")")));
      break;
    }
    row.memory.anon_bytes = usage->anon_bytes;
    row.memory.rss_bytes = usage->rss_bytes;
    row.cpu_seconds = usage->cpu_seconds;
    row.processes = usage->processes;
    row.threads = usage->threads;
    if (cg_stat) {
      row.memory.cgroup_anon_bytes = cg_stat->anon_bytes;
      row.memory.cgroup_dirty_bytes = cg_stat->dirty_bytes;
      row.memory.cgroup_writeback_bytes = cg_stat->writeback_bytes;
      row.memory.cgroup_usage_bytes = cg_stat->usage_bytes;
      row.oom_kills = cg_stat->oom_kills;
    }
    LoadStats stats = driver.Snapshot();
    row.released = stats.released;
    row.sent = stats.sent;
    row.completed = stats.completed;
    row.late = stats.late;
    row.errors = stats.errors;
    row.in_flight = stats.in_flight;
    run_.rows.push_back(row);
    Status appended = csv_->Append(row);
    if (!appended.ok()) {
      Event(RunEvent::Failed(appended.message()));
      break;
    }
    // Floors change only when a minute completes (within one interval of its
    // end, as ComputeMinuteFloors counts it); analyze only then.
    const double next_minute_end =
        60.0 * (options_.judge.warmup_minutes + static_cast<double>(floors_reported) + 1);
    if (row.memory.t_seconds + options_.judge.sample_interval_seconds + 1e-9 < next_minute_end) {
      auto next = t0 + interval * (i + 1);
      if (next > end) break;
      clock_->SleepUntil(next);
      continue;
    }
    VariantResult live = AnalyzeRun(run_, options_.judge, /*finished=*/false);
    if (live.floors.size() > floors_reported) {
      floors_reported = live.floors.size();
      ReportMinute(live, stats);
      if (live.decided_at_minute) {
        Event(RunEvent::Decided(memory::FloorDecisionName(live.judgement.decision),
                                *live.decided_at_minute));
        finished = true;
        break;
      }
    }
    auto next = t0 + interval * (i + 1);
    if (next > end) break;
    clock_->SleepUntil(next);
  }
  driver.Stop();
  LoadStats final_stats = driver.Snapshot();
  Event(RunEvent::Latency(final_stats.p50_ms, final_stats.p99_ms, final_stats.max_ms));
  if (process) {
    WorkloadExit exit = process->Stop(std::chrono::seconds(5));
    Progress("stopped (" + exit.Describe() + ")");
  }
  return Finish(finished);
}

}  // namespace

Result<ReplaySummary> RunReplay(const ReplayOptions& options, Clock* clock) {
  if (access(options.out_dir.c_str(), W_OK) != 0) {
    return PermissionDenied("output directory " + options.out_dir + " is not writable");
  }
  std::vector<VariantResult> results;
  if (options.attach_pid || options.attach_processes) {
    results.push_back(VariantRun(options, nullptr, clock).Run());
  } else {
    if (options.command.empty()) return InvalidArgument("no workload command and no --pid");
    if (options.variants.empty()) return InvalidArgument("no allocator variant to run");
    for (const AllocatorVariant& v : options.variants) {
      VariantResult r = VariantRun(options, &v, clock).Run();
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
