#include "operator/replay/pod_processes.h"

#include <algorithm>
#include <map>
#include <set>

namespace allocguard::replay {

std::vector<pid_t> SelectWorkloadProcesses(const std::vector<ProcessInfo>& all,
                                           const PodProcessFilter& filter) {
  std::map<pid_t, const ProcessInfo*> by_pid;
  for (const ProcessInfo& p : all) by_pid[p.pid] = &p;
  const std::set<pid_t> pod(filter.pod_pids_for_test.begin(), filter.pod_pids_for_test.end());

  // True when `pid` or one of its ancestors satisfies `pred`.
  auto self_or_ancestor = [&](pid_t pid, auto pred) {
    std::set<pid_t> seen;
    for (auto it = by_pid.find(pid); it != by_pid.end() && seen.insert(pid).second;
         it = by_pid.find(pid)) {
      if (pred(*it->second)) return true;
      pid = it->second->ppid;
    }
    return false;
  };

  std::vector<pid_t> out;
  for (const ProcessInfo& p : all) {
    if (p.state == 'Z' || p.state == 'X') continue;
    if (pod.empty()) {
      if (p.pid == 1) continue;  // the pause process
    } else if (!self_or_ancestor(p.pid, [&](const ProcessInfo& a) { return pod.count(a.pid); })) {
      continue;
    }
    if (self_or_ancestor(p.pid, [&](const ProcessInfo& a) {
          return a.pid == filter.self || a.comm == kAllocguardComm;
        })) {
      continue;
    }
    if (!filter.target_comm.empty() && !self_or_ancestor(p.pid, [&](const ProcessInfo& a) {
          return a.comm == filter.target_comm;
        })) {
      continue;
    }
    out.push_back(p.pid);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace allocguard::replay
