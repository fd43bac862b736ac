#include "operator/replay/proc_reader.h"

#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace allocguard::replay {
namespace {

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

struct StatFields {
  std::string comm;
  char state = '?';
  pid_t ppid = 0;
  int64_t utime = 0, stime = 0, cutime = 0, cstime = 0;
  int threads = 0;
};

// /proc/<pid>/stat: the command name is in parentheses and may contain spaces
// or ')' itself, so fields are counted from the last ')'.
bool ParseStat(const std::string& text, StatFields* out) {
  auto close = text.rfind(')');
  auto open = text.find('(');
  if (close == std::string::npos || open == std::string::npos || open > close) return false;
  out->comm = text.substr(open + 1, close - open - 1);
  std::istringstream in(text.substr(close + 1));
  std::vector<std::string> f;
  std::string tok;
  while (in >> tok) f.push_back(tok);
  // f[0] is field 3 (state); field N is f[N-3].
  if (f.size() < 18) return false;
  out->state = f[0].empty() ? '?' : f[0][0];
  try {
    out->ppid = std::stoi(f[1]);
    out->utime = std::stoll(f[11]);
    out->stime = std::stoll(f[12]);
    out->cutime = std::stoll(f[13]);
    out->cstime = std::stoll(f[14]);
    out->threads = std::stoi(f[17]);
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

int64_t StatusKiB(const std::string& status, const std::string& key) {
  auto pos = status.find("\n" + key + ":");
  if (pos == std::string::npos) return 0;
  std::istringstream in(status.substr(pos + key.size() + 2));
  int64_t kib = 0;
  in >> kib;
  return kib;
}

}  // namespace

std::vector<ProcessInfo> ProcReader::ListProcesses() const {
  std::vector<ProcessInfo> out;
  if (DIR* dir = opendir(root_.c_str())) {
    while (dirent* e = readdir(dir)) {
      char* end = nullptr;
      const int64_t pid = std::strtoll(e->d_name, &end, 10);
      if (*end != '\0' || pid <= 0) continue;
      std::string text;
      StatFields st;
      if (ReadFile(root_ + "/" + e->d_name + "/stat", &text) && ParseStat(text, &st)) {
        out.push_back({.pid = static_cast<pid_t>(pid),
                       .ppid = st.ppid,
                       .comm = std::move(st.comm),
                       .state = st.state});
      }
    }
    closedir(dir);
  }
  return out;
}

namespace {

// The roots and all their descendants, roots first, each once.
std::vector<pid_t> Descendants(const std::vector<ProcessInfo>& all,
                               const std::vector<pid_t>& roots) {
  std::multimap<pid_t, pid_t> children;
  for (const ProcessInfo& p : all) children.emplace(p.ppid, p.pid);
  std::vector<pid_t> out;
  std::set<pid_t> seen;
  for (pid_t r : roots) {
    if (seen.insert(r).second) out.push_back(r);
  }
  for (size_t i = 0; i < out.size(); ++i) {
    auto [lo, hi] = children.equal_range(out[i]);
    for (auto it = lo; it != hi; ++it) {
      if (seen.insert(it->second).second) out.push_back(it->second);
    }
  }
  return out;
}

}  // namespace

std::vector<pid_t> ProcReader::ProcessTree(pid_t root) const {
  return Descendants(ListProcesses(), {root});
}

Result<ProcessTreeUsage> ProcReader::ReadUsage(pid_t root) const {
  auto u = ReadUsage(std::vector<pid_t>{root});
  if (!u.ok()) return NotFound("process " + std::to_string(root) + " is gone");
  return u;
}

Result<ProcessTreeUsage> ProcReader::ReadUsage(const std::vector<pid_t>& roots) const {
  ProcessTreeUsage u;
  static const auto kTicks = static_cast<double>(sysconf(_SC_CLK_TCK));
  std::set<pid_t> root_set(roots.begin(), roots.end());
  bool any_root = false;
  for (pid_t pid : Descendants(ListProcesses(), roots)) {
    std::string base = root_ + "/" + std::to_string(pid);
    std::string stat_text;
    std::string status_text;
    StatFields st;
    if (!ReadFile(base + "/stat", &stat_text) || !ParseStat(stat_text, &st) ||
        !ReadFile(base + "/status", &status_text)) {
      continue;  // exited between listing and reading
    }
    const bool is_root = root_set.contains(pid);
    any_root = any_root || is_root;
    // A zombie has no memory left to count.
    ++u.processes;
    u.threads += st.threads;
    u.anon_bytes += StatusKiB(status_text, "RssAnon") * 1024;
    u.rss_bytes += StatusKiB(status_text, "VmRSS") * 1024;
    u.cpu_seconds += static_cast<double>(st.utime + st.stime) / kTicks;
    if (is_root) u.cpu_seconds += static_cast<double>(st.cutime + st.cstime) / kTicks;
  }
  if (!any_root) return NotFound("none of the measured processes is alive");
  return u;
}

Result<std::vector<std::string>> ProcReader::MappedLibraries(pid_t pid) const {
  std::string text;
  if (!ReadFile(root_ + "/" + std::to_string(pid) + "/maps", &text)) {
    return NotFound("cannot read maps of process " + std::to_string(pid));
  }
  std::vector<std::string> out;
  std::set<std::string> seen;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    if (path.find(".so") == std::string::npos) continue;
    if (seen.insert(path).second) out.push_back(path);
  }
  return out;
}

}  // namespace allocguard::replay
