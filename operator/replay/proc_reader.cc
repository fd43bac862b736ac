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
  pid_t ppid = 0;
  int64_t utime = 0, stime = 0, cutime = 0, cstime = 0;
  int threads = 0;
};

// /proc/<pid>/stat: the command name is in parentheses and may contain spaces
// or ')' itself, so fields are counted from the last ')'.
bool ParseStat(const std::string& text, StatFields* out) {
  auto close = text.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream in(text.substr(close + 1));
  std::vector<std::string> f;
  std::string tok;
  while (in >> tok) f.push_back(tok);
  // f[0] is field 3 (state); field N is f[N-3].
  if (f.size() < 18) return false;
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

std::vector<pid_t> ProcReader::ProcessTree(pid_t root) const {
  std::multimap<pid_t, pid_t> children;
  if (DIR* dir = opendir(root_.c_str())) {
    while (dirent* e = readdir(dir)) {
      char* end = nullptr;
      long pid = std::strtol(e->d_name, &end, 10);
      if (*end != '\0' || pid <= 0) continue;
      std::string text;
      StatFields st;
      if (ReadFile(root_ + "/" + e->d_name + "/stat", &text) && ParseStat(text, &st)) {
        children.emplace(st.ppid, static_cast<pid_t>(pid));
      }
    }
    closedir(dir);
  }
  std::vector<pid_t> out = {root};
  std::set<pid_t> seen = {root};
  for (size_t i = 0; i < out.size(); ++i) {
    auto [lo, hi] = children.equal_range(out[i]);
    for (auto it = lo; it != hi; ++it) {
      if (seen.insert(it->second).second) out.push_back(it->second);
    }
  }
  return out;
}

Result<ProcessTreeUsage> ProcReader::ReadUsage(pid_t root) const {
  ProcessTreeUsage u;
  static const double kTicks = static_cast<double>(sysconf(_SC_CLK_TCK));
  for (pid_t pid : ProcessTree(root)) {
    std::string base = root_ + "/" + std::to_string(pid);
    std::string stat_text, status_text;
    StatFields st;
    if (!ReadFile(base + "/stat", &stat_text) || !ParseStat(stat_text, &st) ||
        !ReadFile(base + "/status", &status_text)) {
      if (pid == root) return NotFound("process " + std::to_string(root) + " is gone");
      continue;
    }
    // A zombie has no memory left to count.
    ++u.processes;
    u.threads += st.threads;
    u.anon_bytes += StatusKiB(status_text, "RssAnon") * 1024;
    u.rss_bytes += StatusKiB(status_text, "VmRSS") * 1024;
    u.cpu_seconds += static_cast<double>(st.utime + st.stime) / kTicks;
    if (pid == root) u.cpu_seconds += static_cast<double>(st.cutime + st.cstime) / kTicks;
  }
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
