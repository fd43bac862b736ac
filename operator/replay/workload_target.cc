#include "operator/replay/workload_target.h"

#include <unistd.h>

#include "operator/common/subprocess.h"
#include "operator/replay/replay_runner.h"

namespace allocguard::replay {

using std::chrono::milliseconds;

std::string WorkloadTarget::Keep(Result<std::unique_ptr<RunCgroup>> cgroup) {
  if (!cgroup.ok()) return "none: " + cgroup.status().message();
  cgroup_ = std::move(cgroup).value();
  return cgroup_->Describe();
}

namespace {

std::string Joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

// A workload the run starts with one allocator variant.
class LocalProcessTarget final : public WorkloadTarget {
 public:
  LocalProcessTarget(TargetContext context, const AllocatorVariant* variant)
      : WorkloadTarget(std::move(context)), variant_(*variant), argv_(context_.options->command) {
    for (const auto& [k, v] : variant_.env)
      env_text_.append(env_text_.empty() ? "" : " ").append(k).append("=").append(v);
  }

  std::string name() const override { return variant_.name; }

  // "{port}" in the command or the load's URL: a free port for this run.
  void PrepareLoad(LoadSpec* load) override {
    bool wants_port = load->base_url.find("{port}") != std::string::npos;
    for (const auto& a : argv_) wants_port = wants_port || a.find("{port}") != std::string::npos;
    if (!wants_port) return;
    auto port = context_.env->PickFreePort();
    if (!port.ok()) return;
    for (auto& a : argv_) a = ReplaceAll(a, "{port}", std::to_string(*port));
    load->base_url = ReplaceAll(load->base_url, "{port}", std::to_string(*port));
  }

  std::string OpenCgroup() override {
    const ReplayOptions& o = *context_.options;
    if (!o.use_cgroup) return "none: disabled by --no-cgroup";
    return Keep(context_.env->CreateCgroup("allocguard-" + name() + "-" + std::to_string(getpid()),
                                           o.memory_limit_bytes));
  }

  void DescribeIn(CsvHeader* header) const override {
    header->push_back({"allocator", AllocatorName(variant_.allocator)});
    header->push_back({"env", env_text_});
    header->push_back({"library", variant_.library});
    header->push_back({"command", Joined(argv_)});
  }

  Status Start() override {
    const std::string base = context_.options->out_dir + "/" + name();
    WorkloadLaunch launch;
    launch.argv = argv_;
    launch.env = VariantEnvironment(variant_, CurrentEnvironment());
    launch.stdout_path = base + ".stdout";
    launch.stderr_path = base + ".stderr";
    if (cgroup_) launch.cgroup_procs_path = cgroup_->ProcsPath();
    auto started = context_.env->StartWorkload(launch);
    if (!started.ok()) return started.status();
    process_ = std::move(started).value();
    context_.progress("started pid " + std::to_string(process_->pid()) + " (" +
                      AllocatorName(variant_.allocator) +
                      (env_text_.empty() ? "" : ", " + env_text_) + ")");
    return Status::Ok();
  }

  std::optional<std::string> ExitedBeforeReady() override {
    if (Ended()) return process_->Poll().Describe();
    return std::nullopt;
  }

  // LD_PRELOAD is silently ignored by static binaries, setuid programs and
  // musl loaders given a glibc library: check the library is really mapped.
  // maps shows the resolved file (libtcmalloc_minimal.so.4.5.10 for the .so.4
  // link), so compare canonical paths.
  Status VerifyAllocator() override {
    if (variant_.library.empty()) return Status::Ok();
    ReplayEnv* env = context_.env;
    auto wanted = env->CanonicalPath(variant_.library);
    auto libs = env->MappedLibraries(process_->pid());
    bool loaded = false;
    if (libs.ok() && wanted.ok()) {
      for (const auto& l : *libs) {
        auto mapped = env->CanonicalPath(l);
        loaded = loaded || (mapped.ok() && *mapped == *wanted);
      }
    }
    if (!loaded) {
      return FailedPrecondition(variant_.library +
                                " is not mapped into the workload: LD_PRELOAD was ignored (static "
                                "binary, setuid program, or a loader that cannot load this "
                                "library)");
    }
    context_.event(RunEvent::AllocatorLoaded(variant_.library));
    return Status::Ok();
  }

  std::vector<pid_t> Processes() override { return {process_->pid()}; }
  bool Ended() override { return process_->Poll().exited; }
  std::string HowItEnded() override { return process_->Poll().Describe(); }

  void Stop() override {
    WorkloadExit exit = process_->Stop(std::chrono::seconds(5));
    context_.progress("stopped (" + exit.Describe() + ")");
  }

 private:
  const AllocatorVariant& variant_;
  std::vector<std::string> argv_;
  std::string env_text_;  // "K=V K=V"
  std::unique_ptr<RunProcess> process_;
};

// A process that already runs, measured in the cgroup it is in.
class AttachedPidTarget final : public WorkloadTarget {
 public:
  AttachedPidTarget(TargetContext context, pid_t pid)
      : WorkloadTarget(std::move(context)), pid_(pid) {}

  std::string name() const override { return context_.options->attach_name; }
  std::string OpenCgroup() override { return Keep(context_.env->CgroupOfProcess(pid_)); }
  void DescribeIn(CsvHeader* header) const override {
    header->push_back({"allocator", context_.options->attach_allocator});
    header->push_back({"attached_pid", std::to_string(pid_)});
  }
  std::optional<std::string> ExitedBeforeReady() override { return std::nullopt; }
  std::vector<pid_t> Processes() override { return {pid_}; }
  std::string HowItEnded() override { return "process is gone"; }

 private:
  const pid_t pid_;
};

// The workload processes of the Pod the in-pod driver runs in.
class PodProcessesTarget final : public WorkloadTarget {
 public:
  PodProcessesTarget(TargetContext context, std::function<std::vector<pid_t>()> list)
      : WorkloadTarget(std::move(context)), list_(std::move(list)) {}

  std::string name() const override { return context_.options->attach_name; }
  std::string OpenCgroup() override {
    return "none: the workload's cgroup is not visible from the driver; RssAnon only";
  }
  void DescribeIn(CsvHeader* header) const override {
    header->push_back({"allocator", context_.options->attach_allocator});
    header->push_back({"attached_pid", "processes of the pod"});
  }

  // The workload's container may start after the driver's.
  Status AwaitProcesses(Clock::TimePoint deadline) override {
    Clock* clock = context_.clock;
    for (Processes(); pids_.empty() && clock->Now() < deadline; Processes()) {
      clock->SleepUntil(clock->Now() + milliseconds(200));
    }
    if (pids_.empty()) {
      return DeadlineExceeded("no workload process appeared in the pod within the ready timeout");
    }
    std::string pids;
    for (pid_t p : pids_) pids += (pids.empty() ? "" : " ") + std::to_string(p);
    context_.progress("measuring pid " + pids);
    return Status::Ok();
  }

  std::optional<std::string> ExitedBeforeReady() override {
    if (Processes().empty()) return std::string("its processes are gone");
    return std::nullopt;
  }

  // Asked again at every sample: a workload may fork or re-exec.
  std::vector<pid_t> Processes() override {
    pids_ = list_();
    return pids_;
  }
  std::string HowItEnded() override {
    return "its processes are gone: exited or killed by the OOM killer";
  }

 private:
  std::function<std::vector<pid_t>()> list_;
  std::vector<pid_t> pids_;
};

}  // namespace

std::unique_ptr<WorkloadTarget> NewLocalProcessTarget(TargetContext context,
                                                      const AllocatorVariant* variant) {
  return std::make_unique<LocalProcessTarget>(std::move(context), variant);
}

std::unique_ptr<WorkloadTarget> NewAttachedPidTarget(TargetContext context, pid_t pid) {
  return std::make_unique<AttachedPidTarget>(std::move(context), pid);
}

std::unique_ptr<WorkloadTarget> NewPodProcessesTarget(TargetContext context,
                                                      std::function<std::vector<pid_t>()> list) {
  return std::make_unique<PodProcessesTarget>(std::move(context), std::move(list));
}

}  // namespace allocguard::replay
