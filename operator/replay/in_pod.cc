#include "operator/replay/in_pod.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "operator/memory/verdict.h"
#include "operator/replay/pod_processes.h"
#include "operator/replay/replay_runner.h"

namespace allocguard::replay {

namespace {

Status WriteTerminationLog(const std::string& path, const CanaryResult& result) {
  std::ofstream out(path, std::ios::trunc);
  out << EncodeCanaryResult(result);
  out.flush();
  if (!out) return PermissionDenied("cannot write the termination log " + path);
  return Status::Ok();
}

// Writes a Failed result saying `status`, and returns `status`.
Status FailSetup(const InPodOptions& options, const Status& status) {
  CanaryResult r;
  r.variant = options.variant;
  r.allocator = options.allocator;
  r.verdict = Verdict::kFailed;
  r.anon_only = true;
  // Nothing was measured: no slope (a 0 would read as "+0.00 GiB/h").
  r.slope_gib_per_hour = r.slope_low = r.slope_high = std::nan("");
  r.message = "driver setup failed: " + status.message();
  Status written = WriteTerminationLog(options.termination_log, r);
  if (!written.ok()) return written.WithContext(status.message());
  return status;
}

}  // namespace

Result<LoadSpec> ParseInPodLoad(const std::string& text, std::optional<int> port) {
  if (!port) return ParseLoadSpec(text);
  if (*port < 1 || *port > 65535) return InvalidArgument("--port must be within 1..65535");
  std::string with_url = text;
  try {
    YAML::Node root = YAML::Load(text);
    if (root.IsMap()) {
      root["base_url"] = "http://127.0.0.1:" + std::to_string(*port);
      YAML::Emitter out;
      out << root;
      with_url = out.c_str();
    }
  } catch (const YAML::Exception&) {
    // ParseLoadSpec reports the syntax error with its line.
  }
  return ParseLoadSpec(with_url);
}

CanaryResult ToCanaryResult(const VariantResult& v, bool anon_only) {
  CanaryResult r;
  r.variant = v.variant;
  r.allocator = v.allocator;
  r.verdict = v.verdict.verdict;
  for (const auto& f : v.floors) r.floors_mib.push_back(f.floor_bytes / memory::kBytesPerMiB);
  r.slope_gib_per_hour = v.judgement.slope_gib_per_h;
  r.slope_low = v.judgement.slope_low_gib_per_h;
  r.slope_high = v.judgement.slope_high_gib_per_h;
  r.peak_mib = v.peak_bytes / memory::kBytesPerMiB;
  if (v.floor_level_bytes > 0) r.floor_level_mib = v.floor_level_bytes / memory::kBytesPerMiB;
  if (v.cpu_seconds > 0) r.cpu_seconds = v.cpu_seconds;
  if (v.p99_ms) r.p99_ms = *v.p99_ms;
  r.requests = v.requests_completed;
  r.errors = v.unexpected_responses;
  r.late = v.requests_late;
  r.workload_exited = v.exit_minute.has_value();
  r.exit_minute = v.exit_minute.value_or(-1);
  r.anon_only = anon_only;
  r.minutes = static_cast<int>(std::floor(v.duration_seconds / 60));
  r.message = v.verdict.explanation;
  if (v.books) {
    r.books_reading = v.books->reading;
    for (const auto& f : v.books->in_use.floors) {
      r.in_use_floors_mib.push_back(f.floor_bytes / memory::kBytesPerMiB);
    }
    for (const auto& f : v.books->retained.floors) {
      r.retained_floors_mib.push_back(f.floor_bytes / memory::kBytesPerMiB);
    }
    r.in_use_slope_gib_per_hour = v.books->in_use.slope_gib_per_h;
    r.retained_slope_gib_per_hour = v.books->retained.slope_gib_per_h;
  }
  return r;
}

Result<CanaryResult> RunInPod(const InPodOptions& options, Clock* clock) {
  auto load = ParseInPodLoad(options.load_text, options.port);
  if (!load.ok()) return FailSetup(options, load.status().WithContext("load"));
  std::error_code ec;
  std::filesystem::create_directories(options.out_dir, ec);
  if (ec) {
    return FailSetup(options,
                     PermissionDenied("cannot create " + options.out_dir + ": " + ec.message()));
  }

  ReplayOptions replay;
  replay.load = *load;
  replay.duration = options.duration;
  replay.judge = options.judge;
  replay.use_cgroup = false;
  replay.books_dir = options.books_dir;
  replay.out_dir = options.out_dir;
  replay.attach_name = options.variant;
  replay.attach_allocator = options.allocator;
  replay.progress = options.progress;
  replay.env = options.env ? options.env : ReplayEnv::Default();
  PodProcessFilter filter{.self = getpid(),
                          .target_comm = options.target_comm,
                          .pod_pids_for_test = options.pod_pids_for_test};
  replay.attach_processes = [filter, env = replay.env]() {
    return SelectWorkloadProcesses(env->ListProcesses(), filter);
  };
  auto summary = RunReplay(replay, clock);
  if (!summary.ok()) return FailSetup(options, summary.status());
  CanaryResult result = ToCanaryResult(summary->variants.front(), /*anon_only=*/true);
  AG_RETURN_IF_ERROR(WriteTerminationLog(options.termination_log, result));
  return result;
}

}  // namespace allocguard::replay
