#include "operator/replay/memory_cgroup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace allocguard::replay {
namespace {

Result<std::string> ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return PermissionDenied("cannot read " + path + ": " + std::strerror(errno));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  if (!out) return PermissionDenied("cannot open " + path + ": " + std::strerror(errno));
  out << text;
  out.flush();
  if (!out)
    return PermissionDenied("cannot write \"" + text + "\" to " + path + ": " +
                            std::strerror(errno));
  return Status::Ok();
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  return out;
}

struct Hierarchy {
  int version = 0;
  std::string mount_point;  // where the hierarchy is mounted
  std::string mount_root;   // which cgroup the mount shows at its top
};

// Finds the memory hierarchy in mountinfo: a v1 "cgroup" mount with the
// memory option, else the v2 mount.
Result<Hierarchy> FindMemoryHierarchy(const std::string& prefix) {
  AG_ASSIGN_OR_RETURN(std::string text, ReadText(prefix + "/proc/self/mountinfo"));
  std::optional<Hierarchy> v1;
  std::optional<Hierarchy> v2;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::vector<std::string> pre = Split(line.substr(0, dash), ' ');
    std::vector<std::string> post = Split(line.substr(dash + 3), ' ');
    if (pre.size() < 5 || post.size() < 3) continue;
    Hierarchy h;
    h.mount_root = pre[3];
    h.mount_point = pre[4];
    if (post[0] == "cgroup") {
      for (const std::string& opt : Split(post[2], ',')) {
        if (opt == "memory") {
          h.version = 1;
          v1 = h;
        }
      }
    } else if (post[0] == "cgroup2") {
      h.version = 2;
      v2 = h;
    }
  }
  if (v1) return *v1;
  if (v2) {
    // In hybrid mode a v2 hierarchy exists without the memory controller.
    auto controllers = ReadText(prefix + v2->mount_point + "/cgroup.controllers");
    if (controllers.ok() && controllers->find("memory") != std::string::npos) return *v2;
    return FailedPrecondition("the cgroup v2 hierarchy at " + v2->mount_point +
                              " has no memory controller and no v1 memory hierarchy is mounted");
  }
  return FailedPrecondition("no memory cgroup hierarchy is mounted (looked in " + prefix +
                            "/proc/self/mountinfo)");
}

// The path of `pid`'s cgroup in hierarchy h, relative to h's mount point.
Result<std::string> CgroupOf(const std::string& prefix, const std::string& pid,
                             const Hierarchy& h) {
  std::string file = prefix + "/proc/" + pid + "/cgroup";
  AG_ASSIGN_OR_RETURN(std::string text, ReadText(file));
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto a = line.find(':');
    auto b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    bool match = false;
    if (h.version == 2) {
      match = line.substr(0, a) == "0" && controllers.empty();
    } else {
      for (const std::string& c : Split(controllers, ',')) match = match || c == "memory";
    }
    if (!match) continue;
    // A mount of a sub-tree shows that cgroup at its top.
    if (h.mount_root != "/" && path.rfind(h.mount_root, 0) == 0) {
      path = path.substr(h.mount_root.size());
    }
    if (path.empty()) path = "/";
    return path;
  }
  return NotFound("no memory cgroup listed in " + file);
}

int64_t StatValue(const std::string& stat, const std::string& key, bool* found) {
  std::istringstream in(stat);
  std::string k;
  int64_t v = 0;
  while (in >> k >> v) {
    if (k == key) {
      *found = true;
      return v;
    }
  }
  return 0;
}

Result<int64_t> ParseBytes(const std::string& text, const std::string& file) {
  try {
    return static_cast<int64_t>(std::stoll(text));
  } catch (const std::exception&) {
    return Internal(file + " does not hold a number: \"" + text.substr(0, 40) + "\"");
  }
}

int64_t FirstStat(const std::string& stat, std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    bool found = false;
    int64_t v = StatValue(stat, key, &found);
    if (found) return v;
  }
  return 0;
}

}  // namespace

Result<std::unique_ptr<MemoryCgroup>> MemoryCgroup::Create(const std::string& name,
                                                           std::optional<int64_t> limit_bytes,
                                                           const std::string& fs_prefix) {
  AG_ASSIGN_OR_RETURN(Hierarchy h, FindMemoryHierarchy(fs_prefix));
  AG_ASSIGN_OR_RETURN(std::string own, CgroupOf(fs_prefix, "self", h));
  std::string parent = fs_prefix + h.mount_point + (own == "/" ? "" : own);
  if (h.version == 2) {
    // Children get the memory controller only when the parent delegates it.
    auto subtree = ReadText(parent + "/cgroup.subtree_control");
    if (!subtree.ok() || subtree->find("memory") == std::string::npos) {
      Status s = WriteText(parent + "/cgroup.subtree_control", "+memory");
      if (!s.ok()) {
        return FailedPrecondition(
            "cgroup v2: cannot enable the memory controller for children of " + parent + " (" +
            s.message() + "); a cgroup with processes cannot delegate controllers");
      }
    }
  }
  std::string path = parent + "/" + name;
  if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return PermissionDenied("cannot create cgroup " + path + ": " + std::strerror(errno));
  }
  std::unique_ptr<MemoryCgroup> cg(new MemoryCgroup(h.version, path, /*owned=*/true));
  if (limit_bytes) {
    std::string file = h.version == 1 ? "/memory.limit_in_bytes" : "/memory.max";
    AG_RETURN_IF_ERROR(WriteText(path + file, std::to_string(*limit_bytes)));
  }
  // Check that it is readable now rather than at the first sample.
  AG_RETURN_IF_ERROR(cg->ReadStat().status());
  return cg;
}

Result<std::unique_ptr<MemoryCgroup>> MemoryCgroup::OfProcess(pid_t pid,
                                                              const std::string& fs_prefix) {
  AG_ASSIGN_OR_RETURN(Hierarchy h, FindMemoryHierarchy(fs_prefix));
  AG_ASSIGN_OR_RETURN(std::string rel, CgroupOf(fs_prefix, std::to_string(pid), h));
  std::string path = fs_prefix + h.mount_point + (rel == "/" ? "" : rel);
  std::unique_ptr<MemoryCgroup> cg(new MemoryCgroup(h.version, path, /*owned=*/false));
  AG_RETURN_IF_ERROR(cg->ReadStat().status());
  return cg;
}

MemoryCgroup::~MemoryCgroup() {
  if (!owned_) return;
  for (int attempt = 0; attempt < 50; ++attempt) {
    if (rmdir(path_.c_str()) == 0 || errno == ENOENT) return;
    if (errno != EBUSY) return;
    auto procs = ReadText(path_ + "/cgroup.procs");
    if (procs.ok()) {
      std::istringstream in(*procs);
      pid_t pid;
      while (in >> pid) kill(pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Status MemoryCgroup::AddProcess(pid_t pid) {
  return WriteText(path_ + "/cgroup.procs", std::to_string(pid));
}

Result<CgroupMemoryStat> MemoryCgroup::ReadStat() const {
  auto stat = ReadText(path_ + "/memory.stat");
  if (!stat.ok()) return stat.status();
  CgroupMemoryStat out;
  if (version_ == 1) {
    // total_* are hierarchical (include child cgroups); plain keys are not.
    out.anon_bytes = FirstStat(*stat, {"total_rss", "rss"});
    out.dirty_bytes = FirstStat(*stat, {"total_dirty", "dirty"});
    out.writeback_bytes = FirstStat(*stat, {"total_writeback", "writeback"});
    AG_ASSIGN_OR_RETURN(std::string usage, ReadText(path_ + "/memory.usage_in_bytes"));
    AG_ASSIGN_OR_RETURN(out.usage_bytes, ParseBytes(usage, path_ + "/memory.usage_in_bytes"));
    auto oom = ReadText(path_ + "/memory.oom_control");
    if (oom.ok()) out.oom_kills = FirstStat(*oom, {"oom_kill"});
  } else {
    out.anon_bytes = FirstStat(*stat, {"anon"});
    out.dirty_bytes = FirstStat(*stat, {"file_dirty"});
    out.writeback_bytes = FirstStat(*stat, {"file_writeback"});
    AG_ASSIGN_OR_RETURN(std::string current, ReadText(path_ + "/memory.current"));
    AG_ASSIGN_OR_RETURN(out.usage_bytes, ParseBytes(current, path_ + "/memory.current"));
    auto events = ReadText(path_ + "/memory.events");
    if (events.ok()) out.oom_kills = FirstStat(*events, {"oom_kill"});
  }
  return out;
}

}  // namespace allocguard::replay
