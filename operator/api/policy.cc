#include "operator/api/policy.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <exception>
#include <limits>
#include <set>

#include "operator/api/json_fields.h"
#include "operator/api/names.h"
#include "operator/api/pod_template.h"
#include "operator/api/quantity.h"
#include "operator/common/bake_off_matrix.h"
#include "operator/common/duration.h"
#include "operator/replay/load_spec.h"

namespace allocguard::api {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// Paths, messages and member reads shared with the status parser
// (json_fields.h).
const auto& Field = json_fields::Path;
using json_fields::AsInt;
using json_fields::Dump;
using json_fields::Item;
using json_fields::Member;

Status Err(const std::string& path, const std::string& what) {
  return InvalidArgument(path + ": " + what);
}

// Reads an optional integer member within [min, max] into *out.
Status ReadInt(const json& obj, const char* key, const std::string& base, int64_t min, int64_t max,
               int64_t* out) {
  const json* v = Member(obj, key);
  if (v == nullptr) return Status::Ok();
  const std::string path = Field(base, key);
  AG_ASSIGN_OR_RETURN(int64_t n, AsInt(*v, path));
  if (n < min || n > max) {
    return Err(path, "must be between " + std::to_string(min) + " and " + std::to_string(max) +
                         ", got " + std::to_string(n));
  }
  *out = n;
  return Status::Ok();
}

template <typename Int>
Status ReadIntAs(const json& obj, const char* key, const std::string& base, int64_t min,
                 int64_t max, Int* out) {
  auto n = static_cast<int64_t>(*out);
  AG_RETURN_IF_ERROR(ReadInt(obj, key, base, min, max, &n));
  *out = static_cast<Int>(n);
  return Status::Ok();
}

template <typename Int>
Status ReadOptionalInt(const json& obj, const char* key, const std::string& base, int64_t min,
                       int64_t max, std::optional<Int>* out) {
  if (Member(obj, key) == nullptr) return Status::Ok();
  int64_t n = 0;
  AG_RETURN_IF_ERROR(ReadInt(obj, key, base, min, max, &n));
  *out = static_cast<Int>(n);
  return Status::Ok();
}

// Reads an optional number; `positive` refuses zero and below.
Status ReadNumber(const json& obj, const char* key, const std::string& base, double min,
                  bool min_exclusive, double max, double* out) {
  const json* v = Member(obj, key);
  if (v == nullptr) return Status::Ok();
  const std::string path = Field(base, key);
  if (!v->is_number()) return Err(path, "must be a number, got " + Dump(*v));
  double d = v->get<double>();
  if (!std::isfinite(d)) return Err(path, "must be a finite number");
  if (min_exclusive ? !(d > min) : !(d >= min)) {
    return Err(path, min_exclusive && min == 0
                         ? "must be positive, got " + Dump(*v)
                         : "must be at least " + Dump(json(min)) + ", got " + Dump(*v));
  }
  if (d > max) return Err(path, "must be at most " + Dump(json(max)) + ", got " + Dump(*v));
  *out = d;
  return Status::Ok();
}

Status ReadString(const json& obj, const char* key, const std::string& base, std::string* out) {
  const json* v = Member(obj, key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_string()) return Err(Field(base, key), "must be a string, got " + Dump(*v));
  *out = v->get<std::string>();
  return Status::Ok();
}

Status ReadRequiredString(const json& obj, const char* key, const std::string& base,
                          std::string* out) {
  const json* v = Member(obj, key);
  if (v == nullptr || (v->is_string() && v->get_ref<const std::string&>().empty())) {
    return Err(Field(base, key), "is required");
  }
  return ReadString(obj, key, base, out);
}

Status ReadBool(const json& obj, const char* key, const std::string& base, bool* out) {
  const json* v = Member(obj, key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_boolean()) return Err(Field(base, key), "must be true or false, got " + Dump(*v));
  *out = v->get<bool>();
  return Status::Ok();
}

// An optional object member: *out is nullptr when absent.
Status ReadObject(const json& obj, const char* key, const std::string& base, const json** out) {
  *out = Member(obj, key);
  if (*out != nullptr && !(*out)->is_object()) {
    return Err(Field(base, key), "must be an object, got " + Dump(**out));
  }
  return Status::Ok();
}

Status ReadArray(const json& obj, const char* key, const std::string& base, size_t max_items,
                 const json** out) {
  *out = Member(obj, key);
  if (*out == nullptr) return Status::Ok();
  const std::string path = Field(base, key);
  if (!(*out)->is_array()) return Err(path, "must be a list, got " + Dump(**out));
  if ((*out)->size() > max_items) {
    return Err(path, "must have at most " + std::to_string(max_items) + " items");
  }
  return Status::Ok();
}

Status ReadDuration(const json& obj, const char* key, const std::string& base, milliseconds min,
                    milliseconds max, milliseconds* out) {
  const json* v = Member(obj, key);
  if (v == nullptr) return Status::Ok();
  const std::string path = Field(base, key);
  if (!v->is_string()) return Err(path, "must be a duration such as \"15m\", got " + Dump(*v));
  const auto& text = v->get_ref<const std::string&>();
  bool has_unit = !text.empty() && std::isalpha(static_cast<unsigned char>(text.back()));
  auto d = ParseDuration(text);
  if (!d.ok() || !has_unit) {
    return Err(path, "must be a duration such as 90s, 15m or 1h30m, got \"" + text + "\"");
  }
  if (*d < min) return Err(path, "must be at least " + FormatDuration(min) + ", got " + text);
  if (*d > max) return Err(path, "must be at most " + FormatDuration(max) + ", got " + text);
  *out = *d;
  return Status::Ok();
}

// An int-or-string byte quantity; absent leaves *out unchanged.
Status ReadQuantity(const json& obj, const char* key, const std::string& base, bool positive,
                    std::optional<int64_t>* out) {
  const json* v = Member(obj, key);
  if (v == nullptr) return Status::Ok();
  const std::string path = Field(base, key);
  int64_t bytes = 0;
  if (v->is_string()) {
    auto q = ParseQuantityBytes(v->get<std::string>());
    if (!q.ok()) return Err(path, q.status().message());
    bytes = *q;
  } else if (v->is_number()) {
    AG_ASSIGN_OR_RETURN(bytes, AsInt(*v, path));
    if (bytes < 0) return Err(path, "must not be negative, got " + Dump(*v));
  } else {
    return Err(path, "must be a quantity such as \"512Mi\", got " + Dump(*v));
  }
  if (positive && bytes <= 0) return Err(path, "must be positive, got " + Dump(*v));
  *out = bytes;
  return Status::Ok();
}

// --- names --------------------------------------------------------------------

bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool IsLabelName(const std::string& s) {
  if (s.empty() || s.size() > 63 || !IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  for (char c : s) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

bool IsLabelValue(const std::string& s) { return s.empty() || IsLabelName(s); }

bool IsLabelKey(const std::string& s) {
  size_t slash = s.find('/');
  if (slash == std::string::npos) return IsLabelName(s);
  std::string prefix = s.substr(0, slash);
  if (prefix.empty() || prefix.size() > 253) return false;
  size_t start = 0;
  while (true) {
    size_t dot = prefix.find('.', start);
    if (!IsDnsLabel(prefix.substr(start, dot - start))) return false;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return IsLabelName(s.substr(slash + 1));
}

// --- sections -----------------------------------------------------------------

Status ReadStringMap(const json& obj, const char* key, const std::string& base,
                     size_t max_properties, bool (*key_ok)(const std::string&),
                     const std::string& key_rule, bool (*value_ok)(const std::string&),
                     const std::string& value_rule, std::map<std::string, std::string>* out) {
  const json* m = nullptr;
  AG_RETURN_IF_ERROR(ReadObject(obj, key, base, &m));
  if (m == nullptr) return Status::Ok();
  const std::string path = Field(base, key);
  if (m->size() > max_properties) {
    return Err(path, "must have at most " + std::to_string(max_properties) + " entries");
  }
  out->clear();
  for (const auto& [k, v] : m->items()) {
    if (!key_ok(k))
      return Err(path, std::string("key \"").append(k).append("\": ").append(key_rule));
    if (!v.is_string()) return Err(Field(path, k), "must be a string, got " + Dump(v));
    const auto& s = v.get_ref<const std::string&>();
    if (!value_ok(s)) {
      return Err(Field(path, k), std::string(value_rule).append(", got \"").append(s).append("\""));
    }
    (*out)[k] = s;
  }
  return Status::Ok();
}

bool IsMimallocOption(const std::string& s) {
  if (s.empty() || s.size() > 64 || !(s[0] >= 'a' && s[0] <= 'z')) return false;
  for (char c : s) {
    if (!IsLowerAlnum(c) && c != '_') return false;
  }
  return true;
}

bool IsMimallocValue(const std::string& s) {
  if (s.empty() || s.size() > 256) return false;
  for (char c : s) {
    if (!IsAlnum(c) && c != '_' && c != '.' && c != ':' && c != '-') return false;
  }
  return true;
}

// Characters no tunable may carry into an environment variable: the kubelet
// expands `$(VAR)` in env values from the container's other variables (a
// secret among them), and jemalloc prints a value it rejects to the
// container's log, so `narenas:$(DB_PASSWORD)` would leak DB_PASSWORD.
// Backticks and control characters have no use in any allocator's syntax.
bool IsUnsafeInEnv(char c) {
  const auto u = static_cast<unsigned char>(c);
  return c == '$' || c == '`' || u < 0x20 || u == 0x7f;
}

// "key:value,key:value" with keys of [a-z0-9_] and values without commas,
// colons, spaces, `$`, backticks or control characters.
bool IsMallocConf(const std::string& s) {
  if (s.empty() || s.size() > 1024) return false;
  size_t start = 0;
  while (true) {
    size_t comma = s.find(',', start);
    std::string pair = s.substr(start, comma == std::string::npos ? comma : comma - start);
    size_t colon = pair.find(':');
    if (colon == 0 || colon == std::string::npos || colon + 1 == pair.size()) return false;
    for (size_t i = 0; i < pair.size(); ++i) {
      char c = pair[i];
      if (i < colon ? !(IsLowerAlnum(c) || c == '_')
                    : (i > colon && (c == ':' || std::isspace(static_cast<unsigned char>(c)) ||
                                     IsUnsafeInEnv(c)))) {
        return false;
      }
    }
    if (comma == std::string::npos) return true;
    start = comma + 1;
  }
}

Result<AllocatorSpec> ParseAllocatorSpec(const json& v, const std::string& path) {
  if (!v.is_object()) return Err(path, "must be an object, got " + Dump(v));
  AllocatorSpec a;
  std::string name;
  AG_RETURN_IF_ERROR(ReadRequiredString(v, "name", path, &name));
  auto allocator = AllocatorFromName(name);
  if (!allocator) {
    return Err(Field(path, "name"),
               "must be one of glibc, jemalloc, mimalloc, tcmalloc, got \"" + name + "\"");
  }
  a.name = *allocator;
  for (Allocator other :
       {Allocator::kGlibc, Allocator::kJemalloc, Allocator::kMimalloc, Allocator::kTcmalloc}) {
    const std::string other_name = AllocatorName(other);
    if (other != a.name && Member(v, other_name.c_str()) != nullptr) {
      return Err(Field(path, other_name), std::string(other_name)
                                              .append(" tunables are allowed only when name is ")
                                              .append(other_name));
    }
  }
  const json* section = nullptr;
  AG_RETURN_IF_ERROR(ReadObject(v, "glibc", path, &section));
  if (section != nullptr) {
    const std::string p = Field(path, "glibc");
    AG_RETURN_IF_ERROR(ReadOptionalInt(*section, "arenaMax", p, 1, 4096, &a.glibc_arena_max));
    AG_RETURN_IF_ERROR(ReadQuantity(*section, "trimThreshold", p, false, &a.glibc_trim_threshold));
    AG_RETURN_IF_ERROR(ReadQuantity(*section, "mmapThreshold", p, false, &a.glibc_mmap_threshold));
    if (a.glibc_mmap_threshold && *a.glibc_mmap_threshold > (int64_t{32} << 20)) {
      return Err(Field(p, "mmapThreshold"), "must be at most 32Mi (glibc's maximum on 64-bit)");
    }
  }
  AG_RETURN_IF_ERROR(ReadObject(v, "jemalloc", path, &section));
  if (section != nullptr) {
    const std::string p = Field(path, "jemalloc");
    AG_RETURN_IF_ERROR(ReadString(*section, "mallocConf", p, &a.jemalloc_malloc_conf));
    if (Member(*section, "mallocConf") != nullptr && !IsMallocConf(a.jemalloc_malloc_conf)) {
      return Err(Field(p, "mallocConf"),
                 "must be comma-separated option:value pairs such as "
                 "background_thread:true,dirty_decay_ms:1000, without $, backticks or "
                 "control characters (the kubelet would expand $(VAR) from the container's "
                 "environment), got " +
                     Dump(json(a.jemalloc_malloc_conf)));
    }
  }
  AG_RETURN_IF_ERROR(ReadObject(v, "mimalloc", path, &section));
  if (section != nullptr) {
    AG_RETURN_IF_ERROR(ReadStringMap(
        *section, "options", Field(path, "mimalloc"), 32, IsMimallocOption,
        "option names are lower-case mimalloc option names such as purge_delay", IsMimallocValue,
        "must be non-empty and made of letters, digits and _ . : -", &a.mimalloc_options));
  }
  AG_RETURN_IF_ERROR(ReadObject(v, "tcmalloc", path, &section));
  if (section != nullptr) {
    const std::string p = Field(path, "tcmalloc");
    if (Member(*section, "releaseRate") != nullptr) {
      double rate = 0;
      AG_RETURN_IF_ERROR(ReadNumber(*section, "releaseRate", p, 0, false, 10, &rate));
      a.tcmalloc_release_rate = rate;
    }
    AG_RETURN_IF_ERROR(ReadQuantity(*section, "maxTotalThreadCacheBytes", p, true,
                                    &a.tcmalloc_max_total_thread_cache));
  }
  return a;
}

Result<LimitsSpec> ParseLimits(const json& spec, const std::string& base) {
  LimitsSpec limits;
  const json* v = nullptr;
  AG_RETURN_IF_ERROR(ReadObject(spec, "limits", base, &v));
  if (v == nullptr) return limits;
  const std::string path = Field(base, "limits");
  AG_RETURN_IF_ERROR(ReadQuantity(*v, "memory", path, true, &limits.memory_bytes));
  std::optional<int64_t> slope;
  AG_RETURN_IF_ERROR(ReadQuantity(*v, "maxFloorSlopePerHour", path, true, &slope));
  if (slope) limits.max_floor_slope_bytes_per_hour = *slope;
  return limits;
}

Result<LoadRequestSpec> ParseRequest(const json& v, const std::string& path, size_t index) {
  if (!v.is_object()) return Err(path, "must be an object, got " + Dump(v));
  LoadRequestSpec r;
  r.name = "request-" + std::to_string(index);
  AG_RETURN_IF_ERROR(ReadString(v, "name", path, &r.name));
  if (r.name.empty() || r.name.size() > 63) {
    return Err(Field(path, "name"), "must be 1 to 63 characters");
  }
  AG_RETURN_IF_ERROR(ReadString(v, "method", path, &r.method));
  static const std::set<std::string> kMethods = {"GET", "POST", "PUT", "DELETE", "PATCH"};
  if (!kMethods.contains(r.method)) {
    return Err(Field(path, "method"),
               "must be one of GET, POST, PUT, DELETE, PATCH, got \"" + r.method + "\"");
  }
  AG_RETURN_IF_ERROR(ReadRequiredString(v, "path", path, &r.path));
  if (r.path[0] != '/')
    return Err(Field(path, "path"), "must start with /, got \"" + r.path + "\"");
  AG_RETURN_IF_ERROR(ReadString(v, "body", path, &r.body));
  AG_RETURN_IF_ERROR(ReadString(v, "contentType", path, &r.content_type));
  AG_RETURN_IF_ERROR(
      ReadNumber(v, "weight", path, 0, true, std::numeric_limits<double>::max(), &r.weight));
  AG_RETURN_IF_ERROR(ReadInt(v, "keySpace", path, 1, kInt64Max, &r.key_space));
  const json* expect = nullptr;
  AG_RETURN_IF_ERROR(ReadArray(v, "expect", path, 16, &expect));
  if (expect != nullptr) {
    const std::string p = Field(path, "expect");
    if (expect->empty()) return Err(p, "must list at least one HTTP status code");
    r.expect.clear();
    std::set<int> seen;
    for (size_t i = 0; i < expect->size(); ++i) {
      AG_ASSIGN_OR_RETURN(int64_t code, AsInt((*expect)[i], Item(p, i)));
      if (code < 100 || code > 599) {
        return Err(Item(p, i),
                   "must be an HTTP status code (100-599), got " + std::to_string(code));
      }
      if (!seen.insert(static_cast<int>(code)).second) {
        return Err(Item(p, i), std::to_string(code) + " is listed twice");
      }
      r.expect.push_back(static_cast<int>(code));
    }
  }
  return r;
}

Result<LoadSpec> ParseLoad(const json& v, const std::string& path) {
  LoadSpec load;
  AG_RETURN_IF_ERROR(ReadIntAs(v, "port", path, 1, 65535, &load.port));
  AG_RETURN_IF_ERROR(ReadNumber(v, "rate", path, 0, true, 1e6, &load.rate));
  AG_RETURN_IF_ERROR(ReadIntAs(v, "workers", path, 1, 1024, &load.workers));
  AG_RETURN_IF_ERROR(ReadIntAs(v, "seed", path, 0, kInt64Max, &load.seed));
  AG_RETURN_IF_ERROR(ReadString(v, "arrival", path, &load.arrival));
  if (load.arrival != "poisson" && load.arrival != "uniform") {
    return Err(Field(path, "arrival"), "must be poisson or uniform, got \"" + load.arrival + "\"");
  }
  const json* ready = nullptr;
  AG_RETURN_IF_ERROR(ReadObject(v, "ready", path, &ready));
  if (ready != nullptr) {
    const std::string p = Field(path, "ready");
    AG_RETURN_IF_ERROR(ReadString(*ready, "path", p, &load.ready_path));
    if (load.ready_path.empty() || load.ready_path[0] != '/') {
      return Err(Field(p, "path"), "must start with /, got \"" + load.ready_path + "\"");
    }
    AG_RETURN_IF_ERROR(ReadDuration(*ready, "timeout", p, milliseconds(1),
                                    std::chrono::hours(24 * 365), &load.ready_timeout));
  }
  AG_RETURN_IF_ERROR(ReadDuration(v, "lateAfter", path, milliseconds(1),
                                  std::chrono::hours(24 * 365), &load.late_after));
  AG_RETURN_IF_ERROR(ReadDuration(v, "requestTimeout", path, milliseconds(1),
                                  std::chrono::hours(24 * 365), &load.request_timeout));
  const json* requests = nullptr;
  AG_RETURN_IF_ERROR(ReadArray(v, "requests", path, 64, &requests));
  if (requests != nullptr) {
    const std::string p = Field(path, "requests");
    if (requests->empty()) return Err(p, "must list at least one request");
    std::set<std::string> names;
    for (size_t i = 0; i < requests->size(); ++i) {
      AG_ASSIGN_OR_RETURN(LoadRequestSpec r, ParseRequest((*requests)[i], Item(p, i), i));
      if (!names.insert(r.name).second) {
        return Err(Field(Item(p, i), "name"), "\"" + r.name + "\" is used twice");
      }
      load.requests.push_back(std::move(r));
    }
  }
  return load;
}

// spec.canary; `candidate` is the allocator the candidate runs, for a
// bake-off without variants (BakeOffVariants).
Result<CanarySpec> ParseCanary(const json& spec, const std::string& base,
                               const AllocatorSpec& candidate) {
  CanarySpec canary;
  canary.variants = {{"glibc", AllocatorSpec{.name = Allocator::kGlibc}}};
  const json* v = nullptr;
  AG_RETURN_IF_ERROR(ReadObject(spec, "canary", base, &v));
  if (v == nullptr) return canary;
  const std::string path = Field(base, "canary");
  AG_RETURN_IF_ERROR(ReadBool(*v, "bakeOff", path, &canary.bake_off));
  milliseconds duration = canary.duration;
  AG_RETURN_IF_ERROR(
      ReadDuration(*v, "duration", path, std::chrono::minutes(1), kMaxCanaryDuration, &duration));
  // CanarySpec keeps whole seconds; a fraction of a second is dropped.
  canary.duration = std::chrono::duration_cast<std::chrono::seconds>(duration);
  milliseconds max_duration = DefaultCanaryMaxDuration(canary.duration);
  AG_RETURN_IF_ERROR(ReadDuration(*v, "maxDuration", path, std::chrono::minutes(1),
                                  kMaxCanaryDuration, &max_duration));
  canary.max_duration = std::chrono::duration_cast<std::chrono::seconds>(max_duration);
  if (canary.max_duration < canary.duration) {
    return Err(Field(path, "maxDuration"), "must not be shorter than duration");
  }
  AG_RETURN_IF_ERROR(ReadIntAs(*v, "inconclusiveReruns", path, 0, kMaxInconclusiveReruns,
                               &canary.inconclusive_reruns));
  AG_RETURN_IF_ERROR(ReadDuration(*v, "sampleInterval", path, milliseconds(100),
                                  std::chrono::hours(1), &canary.sample_interval));
  if (canary.sample_interval >= canary.duration) {
    return Err(Field(path, "sampleInterval"), "must be shorter than duration");
  }
  const json* load = nullptr;
  AG_RETURN_IF_ERROR(ReadObject(*v, "load", path, &load));
  if (load != nullptr) {
    AG_ASSIGN_OR_RETURN(canary.load, ParseLoad(*load, Field(path, "load")));
  }
  const json* variants = nullptr;
  AG_RETURN_IF_ERROR(ReadArray(*v, "variants", path, 8, &variants));
  if (variants != nullptr) {
    const std::string p = Field(path, "variants");
    canary.variants.clear();
    std::set<std::string> names;
    for (size_t i = 0; i < variants->size(); ++i) {
      const json& item = (*variants)[i];
      const std::string ip = Item(p, i);
      if (!item.is_object()) return Err(ip, "must be an object, got " + Dump(item));
      VariantSpec variant;
      AG_RETURN_IF_ERROR(ReadRequiredString(item, "name", ip, &variant.name));
      if (!IsDnsLabel(variant.name, 30)) {
        return Err(Field(ip, "name"),
                   "must be a DNS label of at most 30 characters, got \"" + variant.name + "\"");
      }
      if (variant.name == "candidate") {
        return Err(Field(ip, "name"),
                   "the name \"candidate\" is reserved for the template as injected");
      }
      if (!names.insert(variant.name).second) {
        return Err(Field(ip, "name"), "\"" + variant.name + "\" is used twice");
      }
      const json* allocator = Member(item, "allocator");
      if (allocator == nullptr) return Err(Field(ip, "allocator"), "is required");
      AG_ASSIGN_OR_RETURN(variant.allocator,
                          ParseAllocatorSpec(*allocator, Field(ip, "allocator")));
      canary.variants.push_back(std::move(variant));
    }
  } else if (canary.bake_off) {
    // spec.libc is checked by ParseLibc afterwards; only musl changes the matrix.
    const json* libc = Member(spec, "libc");
    const bool musl = libc != nullptr && libc->is_string() && libc->get<std::string>() == "musl";
    canary.variants = BakeOffVariants(candidate, musl ? Libc::kMusl : Libc::kAuto);
  }
  AG_RETURN_IF_ERROR(ReadStringMap(*v, "nodeSelector", path, 32, IsLabelKey,
                                   "must be a valid label key", IsLabelValue,
                                   "must be a valid label value", &canary.node_selector));
  AG_RETURN_IF_ERROR(ReadOptionalInt(*v, "productionCPUs", path, 1, 4096, &canary.production_cpus));
  return canary;
}

Result<LabelSelector> ParseSelector(const json& spec, const std::string& base) {
  const std::string path = Field(base, "selector");
  const json* v = nullptr;
  AG_RETURN_IF_ERROR(ReadObject(spec, "selector", base, &v));
  if (v == nullptr) return Err(path, "is required");
  LabelSelector selector;
  AG_RETURN_IF_ERROR(ReadStringMap(*v, "matchLabels", path, 64, IsLabelKey,
                                   "must be a valid label key", IsLabelValue,
                                   "must be a valid label value", &selector.match_labels));
  const json* expressions = nullptr;
  AG_RETURN_IF_ERROR(ReadArray(*v, "matchExpressions", path, 32, &expressions));
  if (expressions != nullptr) {
    const std::string p = Field(path, "matchExpressions");
    for (size_t i = 0; i < expressions->size(); ++i) {
      const json& item = (*expressions)[i];
      const std::string ip = Item(p, i);
      if (!item.is_object()) return Err(ip, "must be an object, got " + Dump(item));
      LabelSelectorRequirement r;
      AG_RETURN_IF_ERROR(ReadRequiredString(item, "key", ip, &r.key));
      if (!IsLabelKey(r.key)) return Err(Field(ip, "key"), "must be a valid label key");
      AG_RETURN_IF_ERROR(ReadRequiredString(item, "operator", ip, &r.op));
      if (r.op != "In" && r.op != "NotIn" && r.op != "Exists" && r.op != "DoesNotExist") {
        return Err(Field(ip, "operator"),
                   "must be In, NotIn, Exists or DoesNotExist, got \"" + r.op + "\"");
      }
      const json* values = nullptr;
      AG_RETURN_IF_ERROR(ReadArray(item, "values", ip, 64, &values));
      if (values != nullptr) {
        for (size_t j = 0; j < values->size(); ++j) {
          const json& value = (*values)[j];
          if (!value.is_string() || !IsLabelValue(value.get<std::string>())) {
            return Err(Item(Field(ip, "values"), j), "must be a valid label value");
          }
          r.values.push_back(value.get<std::string>());
        }
      }
      bool wants_values = r.op == "In" || r.op == "NotIn";
      if (wants_values == r.values.empty()) {
        return Err(Field(ip, "values"),
                   "values must be non-empty for In and NotIn and empty for Exists and "
                   "DoesNotExist");
      }
      selector.match_expressions.push_back(std::move(r));
    }
  }
  if (selector.match_labels.empty() && selector.match_expressions.empty()) {
    return Err(path,
               "must not be empty: an empty selector would govern every pod in the namespace");
  }
  return selector;
}

struct Metadata {
  std::string ns, name, uid;
  int64_t generation = 0;
};

Result<Metadata> ParseMetadata(const json& object, const std::string& kind) {
  if (!object.is_object()) return InvalidArgument(kind + ": must be a JSON object");
  std::string object_kind;
  AG_RETURN_IF_ERROR(ReadString(object, "kind", "", &object_kind));
  if (!object_kind.empty() && object_kind != kind) {
    return Err("kind", "must be " + kind + ", got \"" + object_kind + "\"");
  }
  std::string api_version;
  AG_RETURN_IF_ERROR(ReadString(object, "apiVersion", "", &api_version));
  if (!api_version.empty() && api_version != kApiVersion) {
    return Err("apiVersion",
               std::string("must be ") + kApiVersion + ", got \"" + api_version + "\"");
  }
  const json* metadata = nullptr;
  AG_RETURN_IF_ERROR(ReadObject(object, "metadata", "", &metadata));
  if (metadata == nullptr) return Err("metadata", "is required");
  Metadata m;
  AG_RETURN_IF_ERROR(ReadString(*metadata, "namespace", "metadata", &m.ns));
  AG_RETURN_IF_ERROR(ReadRequiredString(*metadata, "name", "metadata", &m.name));
  AG_RETURN_IF_ERROR(ReadString(*metadata, "uid", "metadata", &m.uid));
  AG_RETURN_IF_ERROR(ReadInt(*metadata, "generation", "metadata", 0, kInt64Max, &m.generation));
  return m;
}

// spec.libc (default auto). A musl-only choice needs a musl build of the
// allocator and of every variant's allocator.
Result<Libc> ParseLibc(const json& spec, const AllocatorSpec& allocator, const CanarySpec& canary,
                       const std::string& allocator_path) {
  std::string name = LibcName(Libc::kAuto);
  AG_RETURN_IF_ERROR(ReadString(spec, "libc", "spec", &name));
  auto libc = LibcFromName(name);
  if (!libc) return Err("spec.libc", "must be auto, glibc or musl, got \"" + name + "\"");
  if (*libc != Libc::kMusl) return *libc;
  auto refuse = [](const std::string& where) {
    return Err("spec.libc",
               "musl needs a musl build of the allocator, and tcmalloc has none (" + where +
                   " is tcmalloc): use auto, which lets musl processes keep musl's malloc, or "
                   "another allocator");
  };
  if (allocator.name == Allocator::kTcmalloc) return refuse(allocator_path);
  for (size_t i = 0; i < canary.variants.size(); ++i) {
    if (canary.variants[i].allocator.name == Allocator::kTcmalloc) {
      return refuse(Item("spec.canary.variants", i) + ".allocator");
    }
  }
  return *libc;
}

Result<AllocatorPolicy> ParsePolicyUnchecked(const json& object) {
  AG_ASSIGN_OR_RETURN(Metadata m, ParseMetadata(object, "AllocatorPolicy"));
  AllocatorPolicy policy{.ns = m.ns, .name = m.name, .uid = m.uid, .generation = m.generation};
  const json* spec = nullptr;
  AG_RETURN_IF_ERROR(ReadObject(object, "spec", "", &spec));
  if (spec == nullptr) return Err("spec", "is required");
  AllocatorPolicySpec& s = policy.spec;
  AG_ASSIGN_OR_RETURN(s.selector, ParseSelector(*spec, "spec"));
  const json* containers = nullptr;
  AG_RETURN_IF_ERROR(ReadArray(*spec, "containers", "spec", 64, &containers));
  if (containers != nullptr) {
    std::set<std::string> seen;
    for (size_t i = 0; i < containers->size(); ++i) {
      const json& c = (*containers)[i];
      const std::string p = Item("spec.containers", i);
      if (!c.is_string() || !IsDnsLabel(c.get<std::string>())) {
        return Err(p, "must be a container name (a DNS label), got " + Dump(c));
      }
      if (!seen.insert(c.get<std::string>()).second) {
        return Err(p, "\"" + c.get<std::string>() + "\" is listed twice");
      }
      s.containers.push_back(c.get<std::string>());
    }
  }
  const json* allocator = Member(*spec, "allocator");
  if (allocator == nullptr) return Err("spec.allocator", "is required");
  AG_ASSIGN_OR_RETURN(s.allocator, ParseAllocatorSpec(*allocator, "spec.allocator"));
  AG_ASSIGN_OR_RETURN(s.limits, ParseLimits(*spec, "spec"));
  AG_ASSIGN_OR_RETURN(s.canary, ParseCanary(*spec, "spec", s.allocator));
  AG_ASSIGN_OR_RETURN(s.libc, ParseLibc(*spec, s.allocator, s.canary, "spec.allocator"));
  const json* rollout = nullptr;
  AG_RETURN_IF_ERROR(ReadObject(*spec, "rollout", "spec", &rollout));
  if (rollout != nullptr) {
    std::string mode = RolloutModeName(s.rollout.mode);
    AG_RETURN_IF_ERROR(ReadString(*rollout, "mode", "spec.rollout", &mode));
    auto parsed = RolloutModeFromName(mode);
    if (!parsed) {
      return Err("spec.rollout.mode", "must be Enforce, Audit or Off, got \"" + mode + "\"");
    }
    s.rollout.mode = *parsed;
  }
  const json* guard = nullptr;
  AG_RETURN_IF_ERROR(ReadObject(*spec, "guard", "spec", &guard));
  if (guard != nullptr) {
    AG_RETURN_IF_ERROR(ReadBool(*guard, "enabled", "spec.guard", &s.guard.enabled));
    AG_RETURN_IF_ERROR(
        ReadQuantity(*guard, "threshold", "spec.guard", true, &s.guard.threshold_bytes));
    std::string action = GuardActionName(s.guard.action);
    AG_RETURN_IF_ERROR(ReadString(*guard, "action", "spec.guard", &action));
    auto parsed = GuardActionFromName(action);
    if (!parsed) {
      return Err("spec.guard.action",
                 "must be None, Backpressure or Restart, got \"" + action + "\"");
    }
    s.guard.action = *parsed;
  }
  const json* stats = nullptr;
  AG_RETURN_IF_ERROR(ReadObject(*spec, "stats", "spec", &stats));
  if (stats != nullptr && Member(*stats, "enabled") != nullptr) {
    bool enabled = false;
    AG_RETURN_IF_ERROR(ReadBool(*stats, "enabled", "spec.stats", &enabled));
    s.stats.enabled = enabled;
  }
  if (s.guard.action != GuardAction::kNone) {
    if (!s.guard.threshold_bytes) {
      return Err("spec.guard.threshold",
                 "threshold is required when action is Backpressure or Restart");
    }
    if (!s.guard.enabled) {
      return Err("spec.guard.action", "action needs enabled: true (the guard sidecar acts)");
    }
  }
  if (s.guard.threshold_bytes && s.limits.memory_bytes &&
      *s.guard.threshold_bytes >= *s.limits.memory_bytes) {
    return Err("spec.guard.threshold", "guard.threshold must be below limits.memory");
  }
  if (s.rollout.mode != RolloutMode::kOff && s.canary.load.requests.empty()) {
    return Err("spec.canary.load.requests",
               "canary.load.requests is required unless rollout.mode is Off");
  }
  return policy;
}

Result<ReplayCanary> ParseCanaryUnchecked(const json& object) {
  AG_ASSIGN_OR_RETURN(Metadata m, ParseMetadata(object, "ReplayCanary"));
  ReplayCanary canary{.ns = m.ns, .name = m.name, .uid = m.uid, .generation = m.generation};
  const json* spec = nullptr;
  AG_RETURN_IF_ERROR(ReadObject(object, "spec", "", &spec));
  if (spec == nullptr) return Err("spec", "is required");
  ReplayCanarySpec& s = canary.spec;
  const json* section = nullptr;
  AG_RETURN_IF_ERROR(ReadObject(*spec, "policyRef", "spec", &section));
  if (section != nullptr) {
    AG_RETURN_IF_ERROR(ReadRequiredString(*section, "name", "spec.policyRef", &s.policy));
  }
  AG_RETURN_IF_ERROR(ReadObject(*spec, "target", "spec", &section));
  if (section != nullptr) {
    AG_RETURN_IF_ERROR(ReadString(*section, "kind", "spec.target", &s.target_kind));
    if (s.target_kind != "Deployment" && s.target_kind != "StatefulSet" &&
        s.target_kind != "DaemonSet") {
      return Err("spec.target.kind",
                 "must be Deployment, StatefulSet or DaemonSet, got \"" + s.target_kind + "\"");
    }
    AG_RETURN_IF_ERROR(ReadRequiredString(*section, "name", "spec.target", &s.target_name));
  }
  AG_RETURN_IF_ERROR(ReadString(*spec, "templateHash", "spec", &s.template_hash));
  AG_RETURN_IF_ERROR(ReadObject(*spec, "template", "spec", &section));
  if (section == nullptr) return Err("spec.template", "is required");
  // Stored unvalidated by the API server: every field the injection and the
  // Job builder read must have its Kubernetes type before they read it.
  AG_RETURN_IF_ERROR(CheckPodTemplate(*section, "spec.template"));
  s.pod_template_json = Dump(*section);
  AG_RETURN_IF_ERROR(ReadObject(*spec, "candidate", "spec", &section));
  if (section == nullptr) return Err("spec.candidate", "is required");
  const json* allocator = Member(*section, "allocator");
  if (allocator == nullptr) return Err("spec.candidate.allocator", "is required");
  AG_ASSIGN_OR_RETURN(s.candidate_allocator,
                      ParseAllocatorSpec(*allocator, "spec.candidate.allocator"));
  AG_ASSIGN_OR_RETURN(s.canary, ParseCanary(*spec, "spec", s.candidate_allocator));
  if (s.canary.load.requests.empty()) {
    return Err("spec.canary.load.requests", "canary.load.requests is required");
  }
  AG_ASSIGN_OR_RETURN(
      s.libc, ParseLibc(*spec, s.candidate_allocator, s.canary, "spec.candidate.allocator"));
  AG_ASSIGN_OR_RETURN(s.limits, ParseLimits(*spec, "spec"));
  return canary;
}

// --- writing ------------------------------------------------------------------

json LoadToJson(const LoadSpec& load) {
  json requests = json::array();
  for (const LoadRequestSpec& r : load.requests) {
    json j = {{"name", r.name},     {"method", r.method},      {"path", r.path},
              {"weight", r.weight}, {"keySpace", r.key_space}, {"expect", r.expect}};
    if (!r.body.empty()) j["body"] = r.body;
    if (!r.content_type.empty()) j["contentType"] = r.content_type;
    requests.push_back(std::move(j));
  }
  json out = {
      {"port", load.port},
      {"rate", load.rate},
      {"workers", load.workers},
      {"seed", load.seed},
      {"arrival", load.arrival},
      {"ready", {{"path", load.ready_path}, {"timeout", FormatDuration(load.ready_timeout)}}},
      {"lateAfter", FormatDuration(load.late_after)},
      {"requestTimeout", FormatDuration(load.request_timeout)}};
  if (!requests.empty()) out["requests"] = std::move(requests);
  return out;
}

json CanaryToJson(const CanarySpec& canary) {
  json variants = json::array();
  for (const VariantSpec& v : canary.variants) {
    variants.push_back({{"name", v.name}, {"allocator", AllocatorSpecToJson(v.allocator)}});
  }
  json out = {{"duration", FormatDuration(canary.duration)},
              {"sampleInterval", FormatDuration(canary.sample_interval)},
              {"load", LoadToJson(canary.load)},
              {"variants", std::move(variants)}};
  // Only when it is not the default, so the proofs of policies written
  // before the field existed (their canary names and verdicts) keep their keys.
  if (canary.max_duration != DefaultCanaryMaxDuration(canary.duration)) {
    out["maxDuration"] = FormatDuration(canary.max_duration);
  }
  if (canary.inconclusive_reruns != kDefaultInconclusiveReruns) {
    out["inconclusiveReruns"] = canary.inconclusive_reruns;
  }
  if (!canary.node_selector.empty()) out["nodeSelector"] = canary.node_selector;
  if (canary.production_cpus) out["productionCPUs"] = *canary.production_cpus;
  if (canary.bake_off) out["bakeOff"] = true;
  return out;
}

json LimitsToJson(const LimitsSpec& limits) {
  json out = {{"maxFloorSlopePerHour", FormatQuantityBytes(limits.max_floor_slope_bytes_per_hour)}};
  if (limits.memory_bytes) out["memory"] = FormatQuantityBytes(*limits.memory_bytes);
  return out;
}

// A YAML scalar for any string: JSON's double-quoted form is valid YAML.
std::string YamlString(const std::string& s) { return Dump(json(s)); }

}  // namespace

std::vector<VariantSpec> BakeOffVariants(const AllocatorSpec& candidate, Libc libc) {
  std::vector<VariantSpec> variants;
  for (const BakeOffMatrixEntry& entry : BakeOffMatrix()) {
    VariantSpec v{
        .name = entry.name,
        .allocator = {.name = AllocatorFromName(entry.allocator).value_or(Allocator::kGlibc)}};
    for (const auto& [key, value] : entry.env) {
      // The matrix sets only what a policy field sets (bake_off_matrix.h).
      int arenas = 0;
      if (key == "MALLOC_ARENA_MAX" &&
          std::from_chars(value.data(), value.data() + value.size(), arenas).ec == std::errc()) {
        v.allocator.glibc_arena_max = arenas;
      }
      if (key == "MALLOC_CONF") v.allocator.jemalloc_malloc_conf = value;
    }
    const bool no_build =
        v.allocator.name == Allocator::kTcmalloc && !HasBuildFor(Allocator::kTcmalloc, libc);
    if (v.allocator == candidate || no_build) continue;
    variants.push_back(std::move(v));
  }
  return variants;
}

std::optional<Allocator> AllocatorFromName(const std::string& name) {
  for (Allocator a :
       {Allocator::kGlibc, Allocator::kJemalloc, Allocator::kMimalloc, Allocator::kTcmalloc}) {
    if (AllocatorName(a) == name) return a;
  }
  return std::nullopt;
}

std::optional<RolloutMode> RolloutModeFromName(const std::string& name) {
  for (RolloutMode m : {RolloutMode::kEnforce, RolloutMode::kAudit, RolloutMode::kOff}) {
    if (RolloutModeName(m) == name) return m;
  }
  return std::nullopt;
}

std::optional<GuardAction> GuardActionFromName(const std::string& name) {
  for (GuardAction a : {GuardAction::kNone, GuardAction::kBackpressure, GuardAction::kRestart}) {
    if (GuardActionName(a) == name) return a;
  }
  return std::nullopt;
}

std::string MimallocOptionEnvName(const std::string& option) {
  std::string out = "MIMALLOC_";
  for (char c : option)
    out.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  return out;
}

Result<AllocatorPolicy> ParseAllocatorPolicy(const nlohmann::json& object) {
  try {
    return ParsePolicyUnchecked(object);
  } catch (const std::exception& e) {  // a safety net: the readers check types first
    return InvalidArgument(std::string("AllocatorPolicy: cannot be read: ") + e.what());
  }
}

Result<ReplayCanary> ParseReplayCanary(const nlohmann::json& object) {
  try {
    return ParseCanaryUnchecked(object);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("ReplayCanary: cannot be read: ") + e.what());
  }
}

nlohmann::json AllocatorSpecToJson(const AllocatorSpec& a) {
  json out = {{"name", AllocatorName(a.name)}};
  json tunables = json::object();
  switch (a.name) {
    case Allocator::kGlibc:
      if (a.glibc_arena_max) tunables["arenaMax"] = *a.glibc_arena_max;
      if (a.glibc_trim_threshold) {
        tunables["trimThreshold"] = FormatQuantityBytes(*a.glibc_trim_threshold);
      }
      if (a.glibc_mmap_threshold) {
        tunables["mmapThreshold"] = FormatQuantityBytes(*a.glibc_mmap_threshold);
      }
      break;
    case Allocator::kJemalloc:
      if (!a.jemalloc_malloc_conf.empty()) tunables["mallocConf"] = a.jemalloc_malloc_conf;
      break;
    case Allocator::kMimalloc:
      if (!a.mimalloc_options.empty()) tunables["options"] = a.mimalloc_options;
      break;
    case Allocator::kTcmalloc:
      if (a.tcmalloc_release_rate) tunables["releaseRate"] = *a.tcmalloc_release_rate;
      if (a.tcmalloc_max_total_thread_cache) {
        tunables["maxTotalThreadCacheBytes"] =
            FormatQuantityBytes(*a.tcmalloc_max_total_thread_cache);
      }
      break;
  }
  if (!tunables.empty()) out[AllocatorName(a.name)] = std::move(tunables);
  return out;
}

nlohmann::json ReplayCanarySpecToJson(const ReplayCanarySpec& spec) {
  json out = json::object();
  if (!spec.policy.empty()) out["policyRef"] = {{"name", spec.policy}};
  if (!spec.target_name.empty()) {
    out["target"] = {{"kind", spec.target_kind}, {"name", spec.target_name}};
  }
  if (!spec.template_hash.empty()) out["templateHash"] = spec.template_hash;
  json pod_template = json::parse(spec.pod_template_json, nullptr, /*allow_exceptions=*/false);
  out["template"] = pod_template.is_object() ? pod_template : json::object();
  out["candidate"] = {{"allocator", AllocatorSpecToJson(spec.candidate_allocator)}};
  // Written only when not the default, so the keys derived from this JSON
  // (CanaryPolicyKey, measurement keys) are those of a spec without the field.
  if (spec.libc != Libc::kAuto) out["libc"] = LibcName(spec.libc);
  out["canary"] = CanaryToJson(spec.canary);
  out["limits"] = LimitsToJson(spec.limits);
  return out;
}

bool SelectorMatches(const LabelSelector& selector,
                     const std::map<std::string, std::string>& labels) {
  for (const auto& [key, value] : selector.match_labels) {
    auto it = labels.find(key);
    if (it == labels.end() || it->second != value) return false;
  }
  for (const LabelSelectorRequirement& r : selector.match_expressions) {
    auto it = labels.find(r.key);
    bool present = it != labels.end();
    bool listed = false;
    if (present) {
      for (const std::string& v : r.values) listed = listed || v == it->second;
    }
    if (r.op == "In") {
      if (!listed) return false;
    } else if (r.op == "NotIn") {
      if (listed) return false;
    } else if (r.op == "Exists") {
      if (!present) return false;
    } else if (r.op == "DoesNotExist") {
      if (present) return false;
    } else {
      return false;  // an unknown operator selects nothing
    }
  }
  return true;
}

std::vector<const AllocatorPolicy*> PoliciesSelecting(
    const std::vector<AllocatorPolicy>& policies,
    const std::map<std::string, std::string>& labels) {
  std::vector<const AllocatorPolicy*> out;
  for (const AllocatorPolicy& p : policies) {
    if (SelectorMatches(p.spec.selector, labels)) out.push_back(&p);
  }
  return out;
}

std::string SelectorString(const LabelSelector& selector) {
  std::string out;
  auto add = [&out](const std::string& term) {
    if (!out.empty()) out += ",";
    out += term;
  };
  for (const auto& [key, value] : selector.match_labels)
    add(std::string(key).append("=").append(value));
  for (const LabelSelectorRequirement& r : selector.match_expressions) {
    std::string values;
    for (const std::string& v : r.values) values += (values.empty() ? "" : ",") + v;
    if (r.op == "In") {
      add(r.key + " in (" + values + ")");
    } else if (r.op == "NotIn") {
      add(r.key + " notin (" + values + ")");
    } else if (r.op == "Exists") {
      add(r.key);
    } else if (r.op == "DoesNotExist") {
      add("!" + r.key);
    }
  }
  return out;
}

std::string RenderLoadFile(const LoadSpec& load) {
  std::string out;
  out += "base_url: " + YamlString("http://127.0.0.1:" + std::to_string(load.port)) + "\n";
  out += "rate: " + Dump(json(load.rate)) + "\n";
  out += "workers: " + std::to_string(load.workers) + "\n";
  out += "seed: " + std::to_string(load.seed) + "\n";
  out += "arrival: " + YamlString(load.arrival) + "\n";
  out += "late_after: " + FormatDuration(load.late_after) + "\n";
  out += "request_timeout: " + FormatDuration(load.request_timeout) + "\n";
  out += "ready:\n";
  out += "  path: " + YamlString(load.ready_path) + "\n";
  out += "  timeout: " + FormatDuration(load.ready_timeout) + "\n";
  out += "requests:\n";
  for (const LoadRequestSpec& r : load.requests) {
    out += "  - name: " + YamlString(r.name) + "\n";
    out += "    method: " + YamlString(r.method) + "\n";
    out += "    path: " + YamlString(r.path) + "\n";
    if (!r.body.empty()) out += "    body: " + YamlString(r.body) + "\n";
    if (!r.content_type.empty()) out += "    content_type: " + YamlString(r.content_type) + "\n";
    out += "    weight: " + Dump(json(r.weight)) + "\n";
    out += "    key_space: " + std::to_string(r.key_space) + "\n";
    out += "    expect: " + Dump(json(r.expect)) + "\n";
  }
  return out;
}

}  // namespace allocguard::api
