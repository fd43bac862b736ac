#include "operator/replay/load_spec.h"

#include "operator/common/duration.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

namespace allocguard::replay {

namespace {

// Turns yaml-cpp's exceptions and our validation into one error form.
class Fields {
 public:
  Status Error(const YAML::Node& node, const std::string& field, const std::string& what) const {
    std::string where = "load file";
    if (node.IsDefined() && node.Mark().line >= 0) {
      where += " line " + std::to_string(node.Mark().line + 1);
    }
    return InvalidArgument(where + ": " + field + " " + what);
  }

  template <typename T>
  Result<T> Get(const YAML::Node& node, const std::string& field, const char* type_name) const {
    try {
      return node.as<T>();
    } catch (const YAML::Exception&) {
      return Error(node, field, std::string("must be ") + type_name);
    }
  }
};

Status CheckKeys(const Fields& f, const YAML::Node& map, const std::string& prefix,
                 const std::set<std::string>& allowed) {
  for (const auto& kv : map) {
    auto key = kv.first.as<std::string>();
    if (!allowed.contains(key)) {
      return f.Error(kv.first, prefix + key, "is not a known field");
    }
  }
  return Status::Ok();
}

// The key a field is written with: its snake_case name (as the load files of
// docs/replay.md have it) or its camelCase name (as a policy's canary.load
// has it, so that its requests can be copied into a load file); the
// snake_case name when neither is there. Both at once is an error.
Result<std::string> Spelling(const Fields& f, const YAML::Node& map, const std::string& prefix,
                             const std::string& snake, const std::string& camel) {
  if (map[snake] && map[camel]) {
    return f.Error(map[camel], prefix + camel,
                   "and " + prefix + snake + " are the same field: give one of them");
  }
  return map[camel] ? camel : snake;
}

Result<std::string> ParseMethod(const Fields& f, const YAML::Node& node, const std::string& p) {
  AG_ASSIGN_OR_RETURN(std::string method, f.Get<std::string>(node, p + "method", "a string"));
  static const std::set<std::string> kMethods = {"GET", "POST", "PUT", "DELETE", "PATCH"};
  if (!kMethods.contains(method)) {
    return f.Error(node, p + "method",
                   "must be one of GET, POST, PUT, DELETE, PATCH, got \"" + method + "\"");
  }
  return method;
}

// weight and key_space (spelled `key_space`), both optional.
Status ParseWeightAndKeys(const Fields& f, const YAML::Node& node, const std::string& p,
                          const std::string& key_space, RequestSpec* r) {
  if (node["weight"]) {
    AG_ASSIGN_OR_RETURN(r->weight, f.Get<double>(node["weight"], p + "weight", "a number"));
    if (!(r->weight > 0) || !std::isfinite(r->weight)) {
      return f.Error(node["weight"], p + "weight",
                     "must be positive, got " + node["weight"].as<std::string>());
    }
  }
  if (node[key_space]) {
    AG_ASSIGN_OR_RETURN(r->key_space, f.Get<int64_t>(node[key_space], p + key_space, "an integer"));
    if (r->key_space < 1) {
      return f.Error(node[key_space], p + key_space,
                     "must be at least 1, got " + std::to_string(r->key_space));
    }
  }
  return Status::Ok();
}

Result<std::vector<int>> ParseExpect(const Fields& f, const YAML::Node& e, const std::string& p) {
  if (!e.IsSequence() || e.size() == 0) {
    return f.Error(e, p + "expect", "must be a non-empty list of HTTP status codes");
  }
  std::vector<int> expect;
  for (size_t i = 0; i < e.size(); ++i) {
    AG_ASSIGN_OR_RETURN(
        int code, f.Get<int>(e[i], p + "expect[" + std::to_string(i) + "]", "an HTTP status code"));
    if (code < 100 || code > 599) {
      return f.Error(e[i], p + "expect[" + std::to_string(i) + "]",
                     "must be an HTTP status code (100-599), got " + std::to_string(code));
    }
    expect.push_back(code);
  }
  return expect;
}

Result<RequestSpec> ParseRequest(const Fields& f, const YAML::Node& node, size_t index) {
  const std::string p = "requests[" + std::to_string(index) + "].";
  if (!node.IsMap())
    return f.Error(node, "requests[" + std::to_string(index) + "]", "must be a map");
  AG_RETURN_IF_ERROR(CheckKeys(f, node, p,
                               {"name", "method", "path", "body", "content_type", "contentType",
                                "weight", "key_space", "keySpace", "expect"}));
  AG_ASSIGN_OR_RETURN(const std::string content_type,
                      Spelling(f, node, p, "content_type", "contentType"));
  AG_ASSIGN_OR_RETURN(const std::string key_space, Spelling(f, node, p, "key_space", "keySpace"));
  RequestSpec r;
  r.name = "request-" + std::to_string(index);
  if (node["name"]) {
    AG_ASSIGN_OR_RETURN(r.name, f.Get<std::string>(node["name"], p + "name", "a string"));
  }
  if (!node["path"]) return f.Error(node, p + "path", "is required");
  AG_ASSIGN_OR_RETURN(r.path, f.Get<std::string>(node["path"], p + "path", "a string"));
  if (r.path.empty() || r.path[0] != '/') {
    return f.Error(node["path"], p + "path", "must start with '/', got \"" + r.path + "\"");
  }
  if (node["method"]) {
    AG_ASSIGN_OR_RETURN(r.method, ParseMethod(f, node["method"], p));
  }
  if (node["body"]) {
    AG_ASSIGN_OR_RETURN(r.body, f.Get<std::string>(node["body"], p + "body", "a string"));
  }
  if (node[content_type]) {
    AG_ASSIGN_OR_RETURN(r.content_type,
                        f.Get<std::string>(node[content_type], p + content_type, "a string"));
  }
  AG_RETURN_IF_ERROR(ParseWeightAndKeys(f, node, p, key_space, &r));
  if (node["expect"]) {
    AG_ASSIGN_OR_RETURN(r.expect, ParseExpect(f, node["expect"], p));
  }
  return r;
}

Result<std::chrono::milliseconds> GetDuration(const Fields& f, const YAML::Node& node,
                                              const std::string& field) {
  AG_ASSIGN_OR_RETURN(std::string text, f.Get<std::string>(node, field, "a duration"));
  auto d = ParseDuration(text);
  if (!d.ok()) return f.Error(node, field, "is not a duration: " + d.status().message());
  if (d->count() <= 0) return f.Error(node, field, "must be positive");
  return *d;
}

Status ParseWorkersSeedArrival(const Fields& f, const YAML::Node& root, LoadSpec* spec) {
  if (root["workers"]) {
    AG_ASSIGN_OR_RETURN(spec->workers, f.Get<int>(root["workers"], "workers", "an integer"));
    if (spec->workers < 1 || spec->workers > 1024) {
      return f.Error(root["workers"], "workers",
                     "must be between 1 and 1024, got " + std::to_string(spec->workers));
    }
  }
  if (root["seed"]) {
    AG_ASSIGN_OR_RETURN(spec->seed,
                        f.Get<uint64_t>(root["seed"], "seed", "a non-negative integer"));
  }
  if (root["arrival"]) {
    AG_ASSIGN_OR_RETURN(std::string a, f.Get<std::string>(root["arrival"], "arrival", "a string"));
    if (a == "poisson") {
      spec->arrival = Arrival::kPoisson;
    } else if (a == "uniform") {
      spec->arrival = Arrival::kUniform;
    } else {
      return f.Error(root["arrival"], "arrival", "must be poisson or uniform, got \"" + a + "\"");
    }
  }
  return Status::Ok();
}

Result<ReadyProbe> ParseReady(const Fields& f, const YAML::Node& r) {
  ReadyProbe ready;
  if (!r.IsMap()) return f.Error(r, "ready", "must be a map with path and timeout");
  AG_RETURN_IF_ERROR(CheckKeys(f, r, "ready.", {"path", "timeout"}));
  if (r["path"]) {
    AG_ASSIGN_OR_RETURN(ready.path, f.Get<std::string>(r["path"], "ready.path", "a string"));
    if (ready.path.empty() || ready.path[0] != '/') {
      return f.Error(r["path"], "ready.path", "must start with '/'");
    }
  }
  if (r["timeout"]) {
    AG_ASSIGN_OR_RETURN(ready.timeout, GetDuration(f, r["timeout"], "ready.timeout"));
  }
  return ready;
}

// The requests, each name used once.
Result<std::vector<RequestSpec>> ParseRequests(const Fields& f, const YAML::Node& reqs) {
  if (!reqs) return InvalidArgument("load file: requests is required (a list of requests)");
  if (!reqs.IsSequence() || reqs.size() == 0) {
    return f.Error(reqs, "requests", "must be a non-empty list");
  }
  std::vector<RequestSpec> requests;
  std::set<std::string> names;
  for (size_t i = 0; i < reqs.size(); ++i) {
    AG_ASSIGN_OR_RETURN(RequestSpec r, ParseRequest(f, reqs[i], i));
    if (!names.insert(r.name).second) {
      return f.Error(reqs[i]["name"], "requests[" + std::to_string(i) + "].name",
                     "\"" + r.name + "\" is used twice");
    }
    requests.push_back(std::move(r));
  }
  return requests;
}

Result<LoadSpec> ParseRoot(const YAML::Node& root) {
  Fields f;
  if (!root.IsMap()) return InvalidArgument("load file: the top level must be a map of fields");
  AG_RETURN_IF_ERROR(
      CheckKeys(f, root, "",
                {"base_url", "baseUrl", "rate", "workers", "seed", "arrival", "late_after",
                 "lateAfter", "request_timeout", "requestTimeout", "ready", "requests"}));
  AG_ASSIGN_OR_RETURN(const std::string base_url, Spelling(f, root, "", "base_url", "baseUrl"));
  AG_ASSIGN_OR_RETURN(const std::string late_after,
                      Spelling(f, root, "", "late_after", "lateAfter"));
  AG_ASSIGN_OR_RETURN(const std::string request_timeout,
                      Spelling(f, root, "", "request_timeout", "requestTimeout"));
  LoadSpec spec;
  if (!root[base_url]) return InvalidArgument("load file: base_url is required");
  AG_ASSIGN_OR_RETURN(spec.base_url, f.Get<std::string>(root[base_url], base_url, "a string"));
  if (spec.base_url.rfind("http://", 0) != 0) {
    return f.Error(root[base_url], base_url,
                   "must start with http://, got \"" + spec.base_url + "\"");
  }
  if (!root["rate"]) return InvalidArgument("load file: rate (requests per second) is required");
  AG_ASSIGN_OR_RETURN(spec.rate, f.Get<double>(root["rate"], "rate", "a number"));
  if (!(spec.rate > 0) || spec.rate > 1e6) {
    return f.Error(root["rate"], "rate", "must be between 0 and 1000000 requests per second");
  }
  AG_RETURN_IF_ERROR(ParseWorkersSeedArrival(f, root, &spec));
  if (root[late_after]) {
    AG_ASSIGN_OR_RETURN(spec.late_after, GetDuration(f, root[late_after], late_after));
  }
  if (root[request_timeout]) {
    AG_ASSIGN_OR_RETURN(spec.request_timeout,
                        GetDuration(f, root[request_timeout], request_timeout));
  }
  if (root["ready"]) {
    AG_ASSIGN_OR_RETURN(spec.ready, ParseReady(f, root["ready"]));
  }
  AG_ASSIGN_OR_RETURN(spec.requests, ParseRequests(f, root["requests"]));
  return spec;
}

}  // namespace

Result<LoadSpec> ParseLoadSpec(const std::string& yaml_text) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    return InvalidArgument("load file line " + std::to_string(e.mark.line + 1) +
                           ": not valid YAML: " + e.msg);
  }
  try {
    return ParseRoot(root);
  } catch (const YAML::Exception& e) {
    return InvalidArgument("load file line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

Result<LoadSpec> ReadLoadSpecFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read load file " + path);
  std::stringstream text;
  text << in.rdbuf();
  auto spec = ParseLoadSpec(text.str());
  if (!spec.ok()) return spec.status().WithContext(path);
  return spec;
}

std::string ReplaceAll(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) {
    s.replace(pos, from.size(), to);
  }
  return s;
}

LoadSchedule::LoadSchedule(const LoadSpec& spec) : spec_(spec), state_(spec.seed) {
  for (const RequestSpec& r : spec.requests) total_weight_ += r.weight;
}

uint64_t LoadSchedule::NextRandom() {
  // splitmix64: tiny, well distributed, and identical everywhere.
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double LoadSchedule::NextUnit() {
  // 53 random bits, shifted off zero so log() is finite.
  return (static_cast<double>(NextRandom() >> 11) + 0.5) / 9007199254740992.0;
}

ScheduledRequest LoadSchedule::Next() {
  ScheduledRequest out;
  out.offset = std::chrono::nanoseconds(static_cast<int64_t>(t_seconds_ * 1e9));
  double gap =
      spec_.arrival == Arrival::kPoisson ? -std::log(NextUnit()) / spec_.rate : 1.0 / spec_.rate;
  t_seconds_ += gap;

  double pick = NextUnit() * total_weight_;
  size_t index = 0;
  for (; index + 1 < spec_.requests.size(); ++index) {
    pick -= spec_.requests[index].weight;
    if (pick < 0) break;
  }
  const RequestSpec& r = spec_.requests[index];
  out.request_index = static_cast<int>(index);
  out.key = 1 + static_cast<int64_t>(NextRandom() % static_cast<uint64_t>(r.key_space));
  std::string key = std::to_string(out.key);
  out.method = r.method;
  out.path = ReplaceAll(r.path, "{key}", key);
  out.body = ReplaceAll(r.body, "{key}", key);
  return out;
}

}  // namespace allocguard::replay
