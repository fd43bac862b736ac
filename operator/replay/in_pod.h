#pragma once

// The in-pod driver mode of `allocguard replay`: run as a container beside
// the workload in a canary Pod that shares its process namespace, measure the
// workload container's processes (found by SelectWorkloadProcesses), drive
// the load over localhost, and write the compact result (canary_result.h) to
// the container's termination message, where the operator reads it.
//
// The driver does not start, stop or signal the workload. The figure is the
// RssAnon of the workload's processes only: another container's cgroup (its
// dirty and writeback pages, its OOM kills) is not visible from the driver.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "operator/common/clock.h"
#include "operator/replay/canary_result.h"
#include "operator/replay/load_spec.h"
#include "operator/replay/replay_env.h"
#include "operator/replay/variant_result.h"

namespace allocguard::replay {

struct InPodOptions {
  std::string load_text;    // a load file's text, YAML or JSON
  std::optional<int> port;  // when set, the load goes to http://127.0.0.1:<port>
  std::chrono::seconds duration{900};
  JudgeSettings judge;
  std::string variant = "candidate";
  std::string allocator = "unknown";
  std::string termination_log = "/dev/termination-log";
  std::string target_comm;  // only processes with this comm (and their descendants)
  // The stats agent's books of the measured containers (the injection's
  // books volume, one subdirectory per container); empty: not read.
  std::string books_dir;
  // The run's CSV, errors and JSON; created when missing.
  std::string out_dir = "/tmp/allocguard-replay";
  // See PodProcessFilter::pod_pids_for_test.
  std::vector<pid_t> pod_pids_for_test;
  std::function<void(const std::string&)> progress = [](const std::string&) {};
  // The machine the driver measures; nullptr: ReplayEnv::Default(). Not owned.
  ReplayEnv* env = nullptr;
};

// Parses the load; with a port, its base_url is replaced (or supplied, since
// the operator's load has none) by http://127.0.0.1:<port>.
Result<LoadSpec> ParseInPodLoad(const std::string& text, std::optional<int> port);

// Pure: the compact result of one analyzed run.
CanaryResult ToCanaryResult(const VariantResult& v, bool anon_only);

// Runs the replay and writes EncodeCanaryResult of its result to
// options.termination_log. A setup error (a bad load, an unusable output
// directory) is written there too, as a Failed result whose message says
// why, and returned. Fails with nothing written only when the termination
// log itself cannot be written.
Result<CanaryResult> RunInPod(const InPodOptions& options, Clock* clock);

}  // namespace allocguard::replay
