#pragma once

// A scripted ReplayEnv for tests of the replay engine: no processes, no
// cgroups, no sockets. The test sets what the workload's memory does over
// time, when it exits or the OOM killer strikes, whether it answers its
// readiness probe and which libraries it maps; the fake answers the runner
// from that script on the test's FakeClock, and records what the runner did
// (launches, stops, cgroups created).
//
// Time `t` in the scripts is seconds since the workload was started (or,
// for attached targets, since the fake was made). Not thread-safe: its load
// starts no threads, so a run over it has one thread, the test's.

#include <csignal>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "operator/common/clock.h"
#include "operator/memory/memory_sample.h"
#include "operator/replay/replay_env.h"

namespace allocguard::replay {

class FakeReplayEnv final : public ReplayEnv {
 public:
  explicit FakeReplayEnv(Clock* clock) : clock_(clock), start_(clock->Now()) {}

  // ---- The script.
  // RssAnon of the workload (and the cgroup's anon) at t.
  std::function<int64_t(double t)> anon_bytes = [](double) {
    return static_cast<int64_t>(200 * memory::kBytesPerMiB);
  };
  // The workload exits (with exit_code) at this t.
  std::optional<double> exit_at;
  int exit_code = 3;
  // What the workload writes to its stderr file when started.
  std::string stderr_text;
  // The OOM killer kills the workload at this t (the cgroup counts it).
  std::optional<double> oom_at;
  // When set, creating or finding a cgroup fails with this reason.
  std::optional<std::string> cgroup_error;
  // The readiness probe answers 503 this many times before 200.
  int not_ready_answers = 0;
  // The libraries the workload maps; nullopt: the one in its LD_PRELOAD.
  std::optional<std::vector<std::string>> mapped_libraries;
  // The stats agent's books at t (ReadBooks answers with them, their sample
  // time the wall clock's now); nullopt: the books directory does not exist.
  std::function<std::optional<std::vector<AllocatorBooks>>(double t)> books = [](double) {
    return std::optional<std::vector<AllocatorBooks>>();
  };
  std::vector<std::string> books_dirs_read;
  // Processes ListProcesses() returns (the in-pod driver's view).
  std::vector<ProcessInfo> processes;
  // The pids that ReadUsage answers for; empty: any.
  std::vector<pid_t> live_pids;
  // Every request of the load: sent and answered at the rate of the load,
  // `late_fraction` of them late, `errors` in all unexpected.
  double late_fraction = 0;
  int64_t errors = 0;

  // ---- What the runner did.
  std::vector<WorkloadLaunch> launches;
  std::vector<std::string> cgroups_created;
  int stops = 0;
  int ready_probes = 0;

  double Elapsed() const { return std::chrono::duration<double>(clock_->Now() - start_).count(); }
  bool Oomed() const { return oom_at && Elapsed() >= *oom_at; }
  bool Exited() const { return exit_at && Elapsed() >= *exit_at; }

  // ---- ReplayEnv.
  Result<ProcessTreeUsage> ReadUsage(const std::vector<pid_t>& roots) override {
    bool alive = !roots.empty() && !Oomed() && !Exited();
    if (!live_pids.empty()) {
      alive =
          alive && std::find(live_pids.begin(), live_pids.end(), roots.front()) != live_pids.end();
    }
    if (!alive) return NotFound("none of the measured processes is alive");
    ProcessTreeUsage u;
    u.processes = static_cast<int>(roots.size());
    u.threads = 4;
    u.anon_bytes = anon_bytes(Elapsed());
    u.rss_bytes = u.anon_bytes + 10 * static_cast<int64_t>(memory::kBytesPerMiB);
    u.cpu_seconds = Elapsed() / 10;
    return u;
  }
  std::vector<ProcessInfo> ListProcesses() override { return processes; }
  Result<std::vector<std::string>> MappedLibraries(pid_t) override {
    if (mapped_libraries) return *mapped_libraries;
    std::vector<std::string> libs = {"/lib/x86_64-linux-gnu/libc.so.6"};
    if (!launches.empty() && launches.back().env.contains("LD_PRELOAD")) {
      libs.push_back(launches.back().env.at("LD_PRELOAD"));
    }
    return libs;
  }
  Result<std::string> CanonicalPath(const std::string& path) override { return path; }
  Result<std::vector<BooksFile>> ReadBooks(const std::string& dir) override {
    books_dirs_read.push_back(dir);
    std::optional<std::vector<AllocatorBooks>> now = books(Elapsed());
    if (!now) return NotFound(dir + ": No such file or directory");
    std::vector<BooksFile> files;
    for (AllocatorBooks& b : *now) {
      b.sample_time = std::chrono::system_clock::now();
      if (b.interval.count() == 0) b.interval = std::chrono::milliseconds(2000);
      files.push_back({dir + "/books-" + std::to_string(b.pid), b.pid, b});
    }
    return files;
  }

  Result<std::unique_ptr<RunCgroup>> CreateCgroup(const std::string& name,
                                                  std::optional<int64_t>) override {
    if (cgroup_error) return PermissionDenied(*cgroup_error);
    cgroups_created.push_back(name);
    return std::unique_ptr<RunCgroup>(std::make_unique<Cgroup>(this, "/fake/cgroup/" + name));
  }
  Result<std::unique_ptr<RunCgroup>> CgroupOfProcess(pid_t pid) override {
    if (cgroup_error) return NotFound(*cgroup_error);
    return std::unique_ptr<RunCgroup>(
        std::make_unique<Cgroup>(this, "/fake/cgroup/of-" + std::to_string(pid)));
  }

  Result<std::unique_ptr<RunProcess>> StartWorkload(const WorkloadLaunch& launch) override {
    launches.push_back(launch);
    start_ = clock_->Now();
    std::ofstream(launch.stderr_path) << stderr_text;
    return std::unique_ptr<RunProcess>(std::make_unique<Process>(this));
  }
  Result<int> PickFreePort() override { return 40000 + static_cast<int>(launches.size()); }

  Result<std::unique_ptr<net::HttpClient>> NewHttpClient(const net::HttpClientOptions&) override {
    return std::unique_ptr<net::HttpClient>(std::make_unique<ReadyClient>(this));
  }
  std::unique_ptr<RunLoad> NewLoad(const LoadSpec& spec, HttpClientFactory, Clock*,
                                   UnexpectedResponseSink) override {
    return std::make_unique<Load>(this, spec.rate);
  }

 private:
  class Cgroup final : public RunCgroup {
   public:
    Cgroup(FakeReplayEnv* env, std::string path) : env_(env), path_(std::move(path)) {}
    std::string Describe() const override { return "v2 " + path_; }
    std::string ProcsPath() const override { return path_ + "/cgroup.procs"; }
    Result<CgroupMemoryStat> ReadStat() const override {
      CgroupMemoryStat s;
      s.anon_bytes = env_->anon_bytes(env_->Elapsed());
      s.usage_bytes = s.anon_bytes + 20 * static_cast<int64_t>(memory::kBytesPerMiB);
      s.oom_kills = env_->Oomed() ? 1 : 0;
      return s;
    }

   private:
    FakeReplayEnv* env_;
    std::string path_;
  };

  class Process final : public RunProcess {
   public:
    explicit Process(FakeReplayEnv* env) : env_(env) {}
    pid_t pid() const override { return 4242; }
    WorkloadExit Poll() override {
      if (!exit_.exited && env_->Oomed()) exit_ = {.exited = true, .signal = SIGKILL};
      if (!exit_.exited && env_->Exited()) exit_ = {.exited = true, .exit_code = env_->exit_code};
      return exit_;
    }
    WorkloadExit Stop(std::chrono::milliseconds) override {
      ++env_->stops;
      if (!Poll().exited) exit_ = {.exited = true, .signal = SIGTERM};
      return exit_;
    }

   private:
    FakeReplayEnv* env_;
    WorkloadExit exit_;
  };

  class ReadyClient final : public net::HttpClient {
   public:
    explicit ReadyClient(FakeReplayEnv* env) : env_(env) {}
    Result<net::HttpResponse> Send(const net::HttpRequest&) override {
      ++env_->ready_probes;
      net::HttpResponse res;
      res.status = env_->ready_probes > env_->not_ready_answers ? 200 : 503;
      return res;
    }

   private:
    FakeReplayEnv* env_;
  };

  // Every request answered at once, at the load's rate from its start.
  class Load final : public RunLoad {
   public:
    Load(FakeReplayEnv* env, double rate) : env_(env), rate_(rate) {}
    Status Start() override {
      started_ = env_->Elapsed();
      return Status::Ok();
    }
    void Stop() override {}
    LoadStats Snapshot() const override {
      LoadStats s;
      s.released = s.sent = s.completed =
          static_cast<int64_t>((env_->Elapsed() - started_) * rate_);
      s.late = static_cast<int64_t>(static_cast<double>(s.completed) * env_->late_fraction);
      s.errors = env_->errors;
      s.p50_ms = 1.5;
      s.p99_ms = 9.25;
      s.max_ms = 20;
      return s;
    }

   private:
    FakeReplayEnv* env_;
    double rate_;
    double started_ = 0;
  };

  Clock* clock_;
  Clock::TimePoint start_;
};

}  // namespace allocguard::replay
