#pragma once

// Runs a replay: for each allocator variant in turn (never in parallel: on a
// small machine they disturb each other), start the workload in a memory
// cgroup of its own with the variant's allocator, wait until it is ready,
// drive the identical load, sample memory every interval into <variant>.csv,
// judge the floors minute by minute, stop, and write <variant>.json. Then
// classify the variants side by side and write summary.json.
//
// What is measured is a WorkloadTarget (workload_target.h): a process the run
// starts, a running pid, or the processes of the in-pod driver's Pod. All the
// outside world (/proc, cgroups, processes, HTTP) is reached through
// options.env, so the engine runs against replay_env_for_test.h in tests.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "operator/common/clock.h"
#include "operator/replay/allocator_variant.h"
#include "operator/replay/load_spec.h"
#include "operator/replay/replay_env.h"
#include "operator/replay/variant_result.h"

namespace allocguard::replay {

struct ReplayOptions {
  // The workload's command; "{port}" in any argument (and in the load's
  // base_url) is replaced with a free port chosen for each variant.
  std::vector<std::string> command;
  // Instead of starting a workload, measure this running process (one run,
  // named by attach_name; variants do not apply).
  std::optional<pid_t> attach_pid;
  // Instead of starting a workload, measure the processes this returns (with
  // their descendants), asked again at every sample since a workload may
  // fork or re-exec. Used by the in-pod driver, which cannot see the
  // workload's cgroup: the figure is RssAnon only. The run waits (within the
  // ready timeout) for the processes to appear; once they are all gone, the
  // workload has exited and the run ends with the minute it happened in.
  std::function<std::vector<pid_t>()> attach_processes;
  std::string attach_name = "attached";      // the run's name when attached
  std::string attach_allocator = "unknown";  // recorded in the result when attached
  std::vector<AllocatorVariant> variants;    // candidate first
  LoadSpec load;
  std::chrono::seconds duration{900};
  JudgeSettings judge;
  std::optional<int64_t> memory_limit_bytes;
  bool use_cgroup = true;
  // The stats agent's books (docs/allocator-books.md): read at every sample
  // (options.env->ReadBooks) and recorded beside the memory figures; their
  // floors and trends explain the verdict (books_floors.h). Empty: not read.
  std::string books_dir;
  std::string out_dir = ".";
  // Receives one human-readable line per event and per minute.
  std::function<void(const std::string&)> progress = [](const std::string&) {};
  // The machine the run measures; nullptr: ReplayEnv::Default(). Not owned.
  ReplayEnv* env = nullptr;
};

// Fails only when the replay could not be set up (unwritable output
// directory, bad options). A workload that fails is a verdict, not an error.
Result<ReplaySummary> RunReplay(const ReplayOptions& options, Clock* clock);

}  // namespace allocguard::replay
