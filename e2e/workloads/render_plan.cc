#include "e2e/workloads/render_plan.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

#include "operator/net/http.h"

namespace allocguard::workloads {
namespace {

constexpr uint64_t kMiB = uint64_t{1024} * 1024;
constexpr uint64_t kMinBufferBytes = 4096;
constexpr uint64_t kMaxBufferBytes = 32 * kMiB;
constexpr int kMaxWidth = 8192;
constexpr size_t kMaxKeyBytes = 128;

uint64_t Fnv1a(uint64_t h, const std::string& s) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// splitmix64: small, fast, and identical on every platform (unlike the
// distributions of <random>, whose output is implementation-defined).
class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1].
  double Unit() { return (static_cast<double>(Next() >> 11) + 1.0) / 9007199254740992.0; }
  // Uniform integer in [lo, hi].
  int Between(int lo, int hi) {
    if (hi <= lo) return lo;
    return lo + static_cast<int>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }
  // Pareto with scale xm and shape alpha, capped at cap.
  double Pareto(double xm, double alpha, double cap) {
    return std::min(cap, xm / std::pow(Unit(), 1.0 / alpha));
  }

 private:
  uint64_t state_;
};

struct SizeClass {
  const char* name;
  uint64_t min_bytes;
  uint64_t max_bytes;
};
constexpr SizeClass kSizeClasses[] = {
    {"small", uint64_t{64} * 1024, 1 * kMiB},
    {"medium", uint64_t{256} * 1024, 4 * kMiB},
    {"large", 1 * kMiB, 8 * kMiB},
};

const SizeClass* FindSizeClass(const std::string& name) {
  for (const auto& c : kSizeClasses) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

// Decoded query parameters; a name given without "=" maps to "".
std::map<std::string, std::string> ParseQuery(const std::string& path_and_query) {
  std::map<std::string, std::string> out;
  auto q = path_and_query.find('?');
  if (q == std::string::npos) return out;
  std::string query = path_and_query.substr(q + 1);
  size_t pos = 0;
  while (pos < query.size()) {
    size_t amp = std::min(query.find('&', pos), query.size());
    std::string pair = query.substr(pos, amp - pos);
    auto eq = pair.find('=');
    std::string name = net::UrlDecode(pair.substr(0, eq));
    std::string value = eq == std::string::npos ? "" : net::UrlDecode(pair.substr(eq + 1));
    if (!name.empty()) out.emplace(std::move(name), std::move(value));
    pos = amp + 1;
  }
  return out;
}

}  // namespace

Result<RenderParams> ParseRenderQuery(const std::string& path_and_query) {
  const auto query = ParseQuery(path_and_query);
  auto param = [&query](const char* name) -> const std::string* {
    auto it = query.find(name);
    return it == query.end() ? nullptr : &it->second;
  };
  RenderParams params;
  if (const std::string* key = param("key")) params.key = *key;
  if (params.key.empty()) return InvalidArgument("key: required");
  if (params.key.size() > kMaxKeyBytes) {
    return InvalidArgument("key: longer than " + std::to_string(kMaxKeyBytes) + " bytes");
  }
  if (const std::string* size = param("size")) {
    params.size = *size;
    if (FindSizeClass(params.size) == nullptr) {
      return InvalidArgument("size: \"" + params.size + "\" is not small, medium or large");
    }
  }
  if (const std::string* w_text = param("w")) {
    const std::string& w = *w_text;
    int value = 0;
    auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), value);
    if (ec != std::errc() || end != w.data() + w.size() || value < 1 || value > kMaxWidth) {
      return InvalidArgument("w: \"" + w + "\" is not a width in 1.." + std::to_string(kMaxWidth));
    }
    params.width = value;
  }
  return params;
}

uint64_t RenderPlan::TotalBufferBytes() const {
  uint64_t total = 0;
  for (const auto& t : threads) {
    for (const auto& s : t.steps) total += s.buffer_bytes;
  }
  return total;
}

uint64_t RenderPlan::TotalPinBytes() const {
  uint64_t total = 0;
  for (const auto& t : threads) {
    for (const auto& s : t.steps) {
      for (const auto& p : s.pins) total += p.bytes;
    }
  }
  return total;
}

RenderPlan PlanRender(const RenderParams& params, const PlanOptions& options) {
  const SizeClass* size_class = FindSizeClass(params.size);
  if (size_class == nullptr) size_class = &kSizeClasses[2];

  RenderPlan plan;
  plan.seed = Fnv1a(0xcbf29ce484222325ULL, params.key);
  plan.seed = Fnv1a(plan.seed, "|" + params.size + "|" + std::to_string(params.width));
  SplitMix rng(plan.seed);

  int threads =
      static_cast<int>(rng.Pareto(options.min_threads, options.burst_alpha, options.max_threads));
  threads = std::clamp(threads, 1, std::max(1, options.max_threads));
  const double log_min = std::log(static_cast<double>(size_class->min_bytes));
  const double log_max = std::log(static_cast<double>(size_class->max_bytes));
  const double width_scale = params.width > 0 ? params.width / 1024.0 : 1.0;

  plan.threads.resize(threads);
  for (auto& thread : plan.threads) {
    thread.steps.resize(rng.Between(options.min_steps, options.max_steps));
    for (auto& step : thread.steps) {
      double base = std::exp(log_min + (log_max - log_min) * rng.Unit());
      double bytes = base * (0.5 + rng.Unit()) * width_scale;
      step.buffer_bytes =
          std::clamp(static_cast<uint64_t>(bytes), kMinBufferBytes, kMaxBufferBytes);
      step.pins.resize(options.pins_per_step);
      for (auto& pin : step.pins) {
        pin.bytes =
            static_cast<uint32_t>(rng.Between(options.pin_min_bytes, options.pin_max_bytes));
        double life_s =
            rng.Pareto(options.pin_life_min_s, options.pin_life_alpha, options.pin_life_max_s);
        pin.lifetime_ms = static_cast<uint32_t>(life_s * 1000.0);
      }
    }
  }
  return plan;
}

Status ValidatePlanOptions(const PlanOptions& o) {
  if (o.min_threads < 1) return InvalidArgument("--min-threads must be at least 1");
  if (o.max_threads < o.min_threads) {
    return InvalidArgument("--max-threads must be at least --min-threads");
  }
  if (o.max_threads > 1000) return InvalidArgument("--max-threads must be at most 1000");
  if (!(o.burst_alpha > 0)) return InvalidArgument("--burst-alpha must be positive");
  if (o.min_steps < 1 || o.max_steps < o.min_steps) {
    return InvalidArgument("--min-steps must be at least 1 and at most --max-steps");
  }
  if (o.temporaries_per_step < 0) return InvalidArgument("--temporaries must not be negative");
  if (o.pins_per_step < 0) return InvalidArgument("--pins-per-step must not be negative");
  if (o.pin_min_bytes < 1 || o.pin_max_bytes < o.pin_min_bytes) {
    return InvalidArgument("--pin-min-bytes must be at least 1 and at most --pin-max-bytes");
  }
  if (!(o.pin_life_min_s > 0) || !(o.pin_life_max_s >= o.pin_life_min_s)) {
    return InvalidArgument("--pin-life-min-s must be positive and at most --pin-life-max-s");
  }
  if (!(o.pin_life_alpha > 0)) return InvalidArgument("--pin-life-alpha must be positive");
  return Status::Ok();
}

}  // namespace allocguard::workloads
