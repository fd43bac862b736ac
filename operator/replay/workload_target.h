#pragma once

// What a replay run measures, one strategy per kind of workload:
//
//   NewLocalProcessTarget  a workload the run starts itself, with one
//                          allocator variant, in a memory cgroup of its own
//                          (`allocguard replay -- cmd`);
//   NewAttachedPidTarget   a process that already runs, in the cgroup it is
//                          in (`allocguard replay --pid`);
//   NewPodProcessesTarget  the processes of the canary Pod the in-pod driver
//                          sits in, re-listed at every sample; no cgroup is
//                          visible from there (RssAnon only).
//
// The runner (replay_runner.cc) asks a target, in this order: PrepareLoad,
// OpenCgroup, DescribeIn, Start, AwaitProcesses, then ExitedBeforeReady while
// it waits for readiness, VerifyAllocator, then Processes and Ended at every
// sample, HowItEnded when the workload is gone, and Stop at the end. The
// sampling, judging and files are the runner's and the same for every target.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "operator/common/clock.h"
#include "operator/common/status.h"
#include "operator/replay/allocator_variant.h"
#include "operator/replay/load_spec.h"
#include "operator/replay/replay_env.h"
#include "operator/replay/run_event.h"

namespace allocguard::replay {

struct ReplayOptions;

// What a target may use of its run. The pointers outlive the target.
struct TargetContext {
  const ReplayOptions* options = nullptr;
  ReplayEnv* env = nullptr;
  Clock* clock = nullptr;
  // A line for the person watching, prefixed with the run's name.
  std::function<void(const std::string&)> progress;
  // Records an event of the run (in the CSV and the result).
  std::function<void(const RunEvent&)> event;
};

using CsvHeader = std::vector<std::pair<std::string, std::string>>;

class WorkloadTarget {
 public:
  virtual ~WorkloadTarget() = default;

  // The run's name: the variant's, or the attached workload's.
  virtual std::string name() const = 0;
  // Adjusts the run's copy of the load before anything starts.
  virtual void PrepareLoad(LoadSpec* /*load*/) {}
  // Creates or finds the memory cgroup. Returns the CSV header's "cgroup":
  // "v1 /sys/fs/cgroup/memory/..." or "none: <why>" (then cgroup() is null).
  virtual std::string OpenCgroup() = 0;
  // The cgroup OpenCgroup found, or null. Owned by the target.
  RunCgroup* cgroup() const { return cgroup_.get(); }
  // Appends the header lines that say what is measured (allocator, ...).
  virtual void DescribeIn(CsvHeader* header) const = 0;
  // Starts the workload when the target starts one. A failure's message is
  // the run's failure.
  virtual Status Start() { return Status::Ok(); }
  // Waits, until `deadline`, for processes to measure to exist.
  virtual Status AwaitProcesses(Clock::TimePoint /*deadline*/) { return Status::Ok(); }
  // While waiting for readiness: how the workload ended, or nullopt.
  virtual std::optional<std::string> ExitedBeforeReady() = 0;
  // Once ready: checks the variant's allocator is really in the workload.
  virtual Status VerifyAllocator() { return Status::Ok(); }
  // The processes to measure now (their descendants count too).
  virtual std::vector<pid_t> Processes() = 0;
  // True when the workload is known to have ended, even if /proc still
  // shows its processes.
  virtual bool Ended() { return false; }
  // How the workload ended, for the run's failure.
  virtual std::string HowItEnded() = 0;
  // Stops what Start started.
  virtual void Stop() {}

 protected:
  explicit WorkloadTarget(TargetContext context) : context_(std::move(context)) {}
  // Keeps `cgroup` as cgroup() and returns its header text, or "none: ...".
  std::string Keep(Result<std::unique_ptr<RunCgroup>> cgroup);

  TargetContext context_;
  std::unique_ptr<RunCgroup> cgroup_;
};

// REQUIRES: variant outlives the target.
std::unique_ptr<WorkloadTarget> NewLocalProcessTarget(TargetContext context,
                                                      const AllocatorVariant* variant);
std::unique_ptr<WorkloadTarget> NewAttachedPidTarget(TargetContext context, pid_t pid);
// `list` returns the Pod's workload processes (ReplayOptions::attach_processes).
std::unique_ptr<WorkloadTarget> NewPodProcessesTarget(TargetContext context,
                                                      std::function<std::vector<pid_t>()> list);

}  // namespace allocguard::replay
