#include "operator/guard/workload_source.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "operator/replay/memory_cgroup.h"
#include "operator/replay/pod_processes.h"
#include "operator/replay/proc_reader.h"

namespace allocguard::guard {
namespace {

class ProcWorkloadSource final : public WorkloadSource {
 public:
  explicit ProcWorkloadSource(ProcWorkloadSourceOptions options)
      : options_(std::move(options)), reader_(options_.proc_root) {
    if (options_.self == 0) options_.self = getpid();
  }

  Result<WorkloadReading> Read() override {
    WorkloadReading r;
    std::vector<pid_t> roots;
    const std::vector<replay::ProcessInfo> listed = reader_.ListProcesses();
    if (!options_.pids.empty()) {
      // The given processes and their descendants, from one listing.
      std::map<pid_t, std::vector<pid_t>> children;
      std::set<pid_t> alive;
      for (const replay::ProcessInfo& p : listed) {
        if (p.state == 'Z' || p.state == 'X') continue;
        alive.insert(p.pid);
        children[p.ppid].push_back(p.pid);
      }
      std::set<pid_t> all;
      for (pid_t root : options_.pids) {
        if (!alive.contains(root)) continue;
        roots.push_back(root);
        std::vector<pid_t> stack = {root};
        while (!stack.empty()) {
          pid_t pid = stack.back();
          stack.pop_back();
          if (!all.insert(pid).second) continue;
          for (pid_t child : children[pid]) stack.push_back(child);
        }
      }
      r.pids.assign(all.begin(), all.end());
      r.main_pids = roots;
    } else {
      replay::PodProcessFilter filter;
      filter.self = options_.self;
      r.pids = replay::SelectWorkloadProcesses(listed, filter);
      const std::set<pid_t> in_workload(r.pids.begin(), r.pids.end());
      for (const replay::ProcessInfo& p : listed) {
        if (in_workload.contains(p.pid) && !in_workload.contains(p.ppid)) {
          r.main_pids.push_back(p.pid);
        }
      }
      std::sort(r.main_pids.begin(), r.main_pids.end());
      roots = r.main_pids;
    }
    if (roots.empty()) return NotFound("no workload process is running");
    auto usage = reader_.ReadUsage(roots);
    if (!usage.ok()) return usage.status();
    r.sample.anon_bytes = usage->anon_bytes;
    r.sample.rss_bytes = usage->rss_bytes;
    r.limit_bytes = options_.limit_bytes;
    if (!options_.read_cgroup) {
      r.cgroup_note = "cgroup reading is off (--cgroup none)";
      return r;
    }
    // Resolved once per first root: finding a cgroup reads mountinfo and is
    // the costliest part of a sample.
    if (cgroup_pid_ != roots.front()) {
      cgroup_.reset();
      cgroup_pid_ = roots.front();
      auto cgroup = replay::MemoryCgroup::OfProcess(cgroup_pid_, options_.fs_prefix);
      auto own = replay::MemoryCgroup::OfProcess(options_.self, options_.fs_prefix);
      if (cgroup.ok() && own.ok() && (*cgroup)->path() == (*own)->path()) {
        // Not the workload's own cgroup: its dirty pages and limit would be
        // everybody's (a guard run beside the workload on a host).
        cgroup_note_ = "the workload shares the guard's memory cgroup " + (*cgroup)->path() +
                       "; its figures are not the workload's";
      } else if (cgroup.ok()) {
        cgroup_ = std::move(*cgroup);
        cgroup_note_.clear();
      } else {
        cgroup_note_ = "the workload's memory cgroup is not visible: " + cgroup.status().message();
      }
    }
    if (cgroup_ == nullptr) {
      r.cgroup_note = cgroup_note_;
      return r;
    }
    auto stat = cgroup_->ReadStat();
    if (!stat.ok()) {
      r.cgroup_note = "reading " + cgroup_->path() + ": " + stat.status().message();
      cgroup_.reset();
      cgroup_pid_ = 0;  // look it up again next time
      return r;
    }
    r.sample.cgroup_anon_bytes = stat->anon_bytes;
    r.sample.cgroup_dirty_bytes = stat->dirty_bytes;
    r.sample.cgroup_writeback_bytes = stat->writeback_bytes;
    r.sample.cgroup_usage_bytes = stat->usage_bytes;
    if (auto limit = ReadCgroupLimit(cgroup_->path(), cgroup_->version())) {
      r.limit_bytes = r.limit_bytes ? std::min(*r.limit_bytes, *limit) : *limit;
    }
    return r;
  }

  AllocatorObservation ObserveAllocator(pid_t pid) override {
    return guard::ObserveAllocator(options_.proc_root, pid);
  }

  Status Terminate(pid_t pid) override {
    if (kill(pid, SIGTERM) != 0) {
      const int err = errno;
      return Status(err == EPERM ? StatusCode::kPermissionDenied : StatusCode::kNotFound,
                    "SIGTERM to process " + std::to_string(pid) + ": " + std::strerror(err) +
                        (err == EPERM ? " (the guard must run as the workload's user)" : ""));
    }
    return Status::Ok();
  }

 private:
  ProcWorkloadSourceOptions options_;
  replay::ProcReader reader_;
  std::unique_ptr<replay::MemoryCgroup> cgroup_;
  pid_t cgroup_pid_ = 0;
  std::string cgroup_note_;
};

}  // namespace

std::unique_ptr<WorkloadSource> NewProcWorkloadSource(ProcWorkloadSourceOptions options) {
  return std::make_unique<ProcWorkloadSource>(std::move(options));
}

std::optional<int64_t> ReadCgroupLimit(const std::string& cgroup_dir, int version) {
  std::ifstream in(cgroup_dir + (version == 1 ? "/memory.limit_in_bytes" : "/memory.max"));
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const auto v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || v <= 0) return std::nullopt;
  // cgroup v1 writes "unlimited" as the largest page-aligned long.
  if (v >= (1LL << 62)) return std::nullopt;
  return static_cast<int64_t>(v);
}

}  // namespace allocguard::guard
