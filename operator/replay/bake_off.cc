#include "operator/replay/bake_off.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <tuple>

#include "operator/common/bake_off_matrix.h"
#include "operator/common/verdict.h"

namespace allocguard::replay {
namespace {

using memory::Verdict;

constexpr double kBytesPerMiB = 1024.0 * 1024.0;

// Flat first; runs whose floor was judged next, the undecided before the
// climbing; runs that measured nothing usable last.
int VerdictGroup(Verdict v) {
  switch (v) {
    case Verdict::kFlat:
      return 0;
    case Verdict::kInconclusive:
      return 1;
    case Verdict::kRatchet:
    case Verdict::kAllocatorRetention:
    case Verdict::kLeak:
      return 2;
    case Verdict::kOOMKilled:
    case Verdict::kErrors:
    case Verdict::kFailed:
      return 3;
  }
  return 3;
}

std::optional<double> CpuMsPerRequest(const VariantResult& v) {
  if (v.requests_completed <= 0 || v.cpu_seconds <= 0) return std::nullopt;
  return v.cpu_seconds * 1000.0 / static_cast<double>(v.requests_completed);
}

// Steps of kBakeOffTieFraction up from `lowest`: values in one step tie.
int TieStep(double value, double lowest) {
  if (!(lowest > 0) || !(value > lowest)) return 0;
  return static_cast<int>(std::floor(std::log(value / lowest) / std::log1p(kBakeOffTieFraction)));
}

std::optional<double> Change(std::optional<double> value, std::optional<double> base) {
  if (!value || !base || !(*base > 0)) return std::nullopt;
  return *value / *base - 1.0;
}

std::optional<double> Positive(double v) { return v > 0 ? std::optional<double>(v) : std::nullopt; }

std::string Percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.0f %%", fraction * 100.0);
  return buf;
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// "K=V K=V" (VariantResult::env) as a map.
std::map<std::string, std::string> EnvOf(const VariantResult& v) {
  std::map<std::string, std::string> env;
  std::istringstream in(v.env);
  std::string item;
  while (in >> item) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    env[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return env;
}

bool AllDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::vector<std::string> DefaultBakeOffMatrix() {
  std::vector<std::string> specs;
  for (const BakeOffMatrixEntry& entry : BakeOffMatrix()) {
    std::string spec = entry.name == entry.allocator && entry.env.empty()
                           ? entry.name
                           : entry.name + "=" + entry.allocator;
    for (const auto& [key, value] : entry.env)
      spec.append(",").append(key).append("=").append(value);
    specs.push_back(std::move(spec));
  }
  return specs;
}

std::string PolicySnippet(const VariantResult& variant) {
  const std::string allocator = variant.allocator.empty() ? "glibc" : variant.allocator;
  std::string yaml = "allocator:\n  name: " + allocator + "\n";
  std::string tuning;
  std::string comments;
  std::map<std::string, std::string> mimalloc_options;
  for (const auto& [key, value] : EnvOf(variant)) {
    if (allocator == "glibc" && key == "MALLOC_ARENA_MAX" && AllDigits(value)) {
      tuning += "    arenaMax: " + value + "\n";
    } else if (allocator == "glibc" && key == "MALLOC_TRIM_THRESHOLD_" && AllDigits(value)) {
      tuning += "    trimThreshold: \"" + value + "\"\n";
    } else if (allocator == "glibc" && key == "MALLOC_MMAP_THRESHOLD_" && AllDigits(value)) {
      tuning += "    mmapThreshold: \"" + value + "\"\n";
    } else if (allocator == "jemalloc" && key == "MALLOC_CONF") {
      tuning += "    mallocConf: \"" + value + "\"\n";
    } else if (allocator == "mimalloc" && key.rfind("MIMALLOC_", 0) == 0 && key.size() > 9) {
      mimalloc_options[Lower(key.substr(9))] = value;
    } else if (allocator == "tcmalloc" && key == "TCMALLOC_RELEASE_RATE") {
      tuning += "    releaseRate: " + value + "\n";
    } else if (allocator == "tcmalloc" && key == "TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES" &&
               AllDigits(value)) {
      tuning += "    maxTotalThreadCacheBytes: \"" + value + "\"\n";
    } else {
      comments.append("# ").append(key).append("=").append(value);
      comments += ": no policy field sets it; set it in the pod\n";
    }
  }
  if (!mimalloc_options.empty()) {
    tuning += "    options:\n";
    for (const auto& [option, value] : mimalloc_options) {
      tuning.append("      ").append(option).append(": \"").append(value).append("\"\n");
    }
  }
  if (!tuning.empty()) yaml += "  " + allocator + ":\n" + tuning;
  return comments + yaml;
}

Result<BakeOff> RankBakeOff(const ReplaySummary& summary) {
  if (summary.variants.empty()) return InvalidArgument("the bake-off ran no variant");
  BakeOff out;
  const VariantResult& current = summary.variants.front();
  out.current = current.variant;

  std::vector<BakeOffEntry> entries;
  for (const VariantResult& v : summary.variants) {
    BakeOffEntry e;
    e.result = &v;
    e.cpu_ms_per_request = CpuMsPerRequest(v);
    e.floor_change = Change(Positive(v.floor_level_bytes), Positive(current.floor_level_bytes));
    e.cpu_change = Change(e.cpu_ms_per_request, CpuMsPerRequest(current));
    e.p99_change = Change(v.p99_ms, current.p99_ms);
    entries.push_back(e);
  }
  // The lowest floor and CPU cost of each verdict group, where the tie steps
  // start.
  std::map<int, double> lowest_floor;
  std::map<int, double> lowest_cpu;
  for (const BakeOffEntry& e : entries) {
    const int group = VerdictGroup(e.result->verdict.verdict);
    if (e.result->floor_level_bytes > 0 &&
        (!lowest_floor.contains(group) || e.result->floor_level_bytes < lowest_floor[group])) {
      lowest_floor[group] = e.result->floor_level_bytes;
    }
    if (e.cpu_ms_per_request &&
        (!lowest_cpu.contains(group) || *e.cpu_ms_per_request < lowest_cpu[group])) {
      lowest_cpu[group] = *e.cpu_ms_per_request;
    }
  }
  auto key = [&](const BakeOffEntry& e) {
    const int group = VerdictGroup(e.result->verdict.verdict);
    const double floor = e.result->floor_level_bytes;
    const int floor_step = floor > 0 ? TieStep(floor, lowest_floor[group]) : 1 << 20;
    const int cpu_step =
        e.cpu_ms_per_request ? TieStep(*e.cpu_ms_per_request, lowest_cpu[group]) : 1 << 20;
    const double p99 = e.result->p99_ms.value_or(HUGE_VAL);
    return std::make_tuple(group, floor_step, cpu_step, p99);
  };
  std::stable_sort(entries.begin(), entries.end(),
                   [&](const BakeOffEntry& a, const BakeOffEntry& b) { return key(a) < key(b); });
  for (size_t i = 0; i < entries.size(); ++i) entries[i].rank = static_cast<int>(i) + 1;
  out.ranked = std::move(entries);

  const BakeOffEntry& best = out.ranked.front();
  if (best.result->verdict.verdict != Verdict::kFlat) {
    int undecided = 0;
    int climbing = 0;
    for (const BakeOffEntry& e : out.ranked) {
      const int group = VerdictGroup(e.result->verdict.verdict);
      undecided += group == 1 ? 1 : 0;
      climbing += group == 2 ? 1 : 0;
    }
    out.recommendation = "No variant was shown Flat, so none is recommended.";
    if (climbing > 0) {
      out.recommendation += " " + std::to_string(climbing) + " of " +
                            std::to_string(out.ranked.size()) +
                            " climb: if every allocator's floor climbs, the program itself "
                            "holds the memory (a leak), and no allocator is the answer.";
    }
    if (undecided > 0) {
      out.recommendation +=
          " " + std::to_string(undecided) + " of " + std::to_string(out.ranked.size()) +
          " are Inconclusive: run longer (--max-duration) or with a quieter load.";
    }
    return out;
  }
  out.recommended = 0;
  out.policy_snippet = PolicySnippet(*best.result);
  if (best.result == &current) {
    out.recommendation = "Keep " + current.variant +
                         ": it stayed Flat and ranks first (lowest floor, then CPU per request, "
                         "then p99, ties within " +
                         Fixed(kBakeOffTieFraction * 100, 0) + " %).";
    return out;
  }
  out.recommendation = "Switch from " + current.variant + " to " + best.result->variant + " (" +
                       memory::VerdictName(best.result->verdict.verdict);
  const std::string costs = FormatBakeOffCosts(best);
  if (!costs.empty()) out.recommendation += ", " + costs;
  int current_rank = 0;
  for (const BakeOffEntry& e : out.ranked) {
    if (e.result == &current) current_rank = e.rank;
  }
  out.recommendation += ") — " + current.variant + " is " +
                        memory::VerdictName(current.verdict.verdict) + " on this load and ranks " +
                        std::to_string(current_rank) + " of " + std::to_string(out.ranked.size()) +
                        ".";
  return out;
}

std::string FormatBakeOffCosts(const BakeOffEntry& entry) {
  std::vector<std::string> parts;
  if (entry.floor_change) parts.push_back("floor " + Percent(*entry.floor_change));
  if (entry.cpu_change) parts.push_back("CPU " + Percent(*entry.cpu_change));
  if (entry.p99_change) parts.push_back("p99 " + Percent(*entry.p99_change));
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

std::string FormatBakeOff(const BakeOff& bake_off) {
  std::string out = "bake-off, costs against " + bake_off.current + ":\n";
  char line[512];
  std::snprintf(line, sizeof line, "%4s  %-22s %-12s %10s %14s %9s  %s\n", "rank", "variant",
                "verdict", "floor", "CPU ms/req", "p99 ms", "against the current");
  out += line;
  for (const BakeOffEntry& e : bake_off.ranked) {
    const VariantResult& v = *e.result;
    std::snprintf(line, sizeof line, "%4d  %-22s %-12s %6.0f MiB %14s %9s  %s\n", e.rank,
                  v.variant.c_str(), memory::VerdictName(v.verdict.verdict),
                  v.floor_level_bytes / kBytesPerMiB,
                  e.cpu_ms_per_request ? Fixed(*e.cpu_ms_per_request, 3).c_str() : "-",
                  v.p99_ms ? Fixed(*v.p99_ms, 1).c_str() : "-",
                  v.variant == bake_off.current ? "(current)" : FormatBakeOffCosts(e).c_str());
    out += line;
  }
  out += "\n" + bake_off.recommendation + "\n";
  if (!bake_off.policy_snippet.empty()) {
    out += "\nAllocatorPolicy spec for it:\n";
    std::istringstream in(bake_off.policy_snippet);
    std::string l;
    while (std::getline(in, l)) out += "  " + l + "\n";
  }
  return out;
}

nlohmann::json ToJson(const BakeOff& bake_off) {
  nlohmann::json ranked = nlohmann::json::array();
  for (const BakeOffEntry& e : bake_off.ranked) {
    const VariantResult& v = *e.result;
    nlohmann::json row = {{"rank", e.rank},
                          {"variant", v.variant},
                          {"allocator", v.allocator},
                          {"env", v.env},
                          {"verdict", memory::VerdictName(v.verdict.verdict)},
                          {"floorMiB", v.floor_level_bytes / kBytesPerMiB},
                          {"cpuSeconds", v.cpu_seconds},
                          {"requestsCompleted", v.requests_completed}};
    if (e.cpu_ms_per_request) row["cpuMsPerRequest"] = *e.cpu_ms_per_request;
    if (v.p99_ms) row["p99Ms"] = *v.p99_ms;
    if (e.floor_change) row["floorChange"] = *e.floor_change;
    if (e.cpu_change) row["cpuChange"] = *e.cpu_change;
    if (e.p99_change) row["p99Change"] = *e.p99_change;
    ranked.push_back(std::move(row));
  }
  nlohmann::json out = {{"current", bake_off.current},
                        {"ranked", std::move(ranked)},
                        {"recommendation", bake_off.recommendation}};
  if (bake_off.recommended) {
    out["recommended"] = bake_off.ranked[*bake_off.recommended].result->variant;
    out["policySnippet"] = bake_off.policy_snippet;
  }
  return out;
}

}  // namespace allocguard::replay
