#include "operator/replay/workload_process.h"

#include <deque>
#include <fstream>

namespace allocguard::replay {

Result<WorkloadProcess> WorkloadProcess::Start(const WorkloadLaunch& launch) {
  if (launch.argv.empty()) return InvalidArgument("no workload command given");
  SubprocessOptions options;
  options.argv = launch.argv;
  options.env = launch.env;
  options.stdout_path = launch.stdout_path;
  options.stderr_path = launch.stderr_path;
  options.new_process_group = true;
  // The workload must not outlive the replay that measures it.
  options.die_with_parent = true;
  options.cgroup_procs_path = launch.cgroup_procs_path;
  auto process = Subprocess::Spawn(options);
  if (!process.ok() && process.status().code() == StatusCode::kFailedPrecondition) {
    return FailedPrecondition("cannot start workload \"" + launch.argv[0] +
                              "\": " + process.status().message());
  }
  if (!process.ok()) return process.status();
  return WorkloadProcess(std::move(process).value());
}

WorkloadProcess::WorkloadProcess(WorkloadProcess&& other) noexcept
    : process_(std::move(other.process_)) {}

// A moved-from process has no child left to stop.
WorkloadProcess::~WorkloadProcess() { Stop(std::chrono::milliseconds(2000)); }

WorkloadExit WorkloadProcess::Poll() { return process_.Poll(); }

WorkloadExit WorkloadProcess::Stop(std::chrono::milliseconds grace) { return process_.Stop(grace); }

std::string TailOfFile(const std::string& path, int lines) {
  std::ifstream in(path);
  std::deque<std::string> tail;
  std::string line;
  while (std::getline(in, line)) {
    tail.push_back(line);
    if (static_cast<int>(tail.size()) > lines) tail.pop_front();
  }
  std::string out;
  for (const auto& l : tail) out += (out.empty() ? "" : "\n") + l;
  return out;
}

}  // namespace allocguard::replay
