#pragma once

// The request mix a replay drives: parsed from a YAML load file, validated,
// and turned into a deterministic schedule.
//
// The same load file and seed give the same requests at the same offsets on
// every run and under every allocator variant; that identity is what lets a
// difference between variants be blamed on the allocator.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "operator/common/status.h"

namespace allocguard::replay {

enum class Arrival { kPoisson, kUniform };

struct RequestSpec {
  std::string name;
  std::string method = "GET";
  // May contain {key}, replaced per request by a key drawn from 1..key_space.
  std::string path;
  std::string body;  // may contain {key}
  std::string content_type;
  double weight = 1;
  int64_t key_space = 1;
  std::vector<int> expect = {200};
};

struct ReadyProbe {
  std::string path = "/";
  std::chrono::milliseconds timeout{30000};
};

struct LoadSpec {
  // May contain {port}, substituted with the workload's port at run time.
  std::string base_url;
  double rate = 1;  // requests per second
  int workers = 4;  // concurrent connections
  uint64_t seed = 1;
  Arrival arrival = Arrival::kPoisson;
  // A request that starts later than this after its scheduled time is late.
  std::chrono::milliseconds late_after{1000};
  std::chrono::milliseconds request_timeout{30000};
  ReadyProbe ready;
  std::vector<RequestSpec> requests;
};

// Parses and validates a load file's text. Errors name the field and, where
// the YAML parser knows it, the line: "load file line 7: requests[1].weight
// must be positive, got -2".
Result<LoadSpec> ParseLoadSpec(const std::string& yaml_text);
Result<LoadSpec> ReadLoadSpecFile(const std::string& path);

// Replaces every occurrence of `from` in `s` (placeholders such as {key} and
// {port}).
std::string ReplaceAll(std::string s, const std::string& from, const std::string& to);

struct ScheduledRequest {
  std::chrono::nanoseconds offset;  // from the start of the load
  int request_index = 0;            // into LoadSpec::requests
  int64_t key = 0;
  std::string method;
  std::string path;  // with {key} substituted
  std::string body;
};

// Yields the deterministic request sequence of a LoadSpec, in schedule order.
// The sequence depends only on the spec and its seed (the generator is
// splitmix64, not a library distribution, so it is identical across standard
// libraries). Not thread-safe.
class LoadSchedule {
 public:
  explicit LoadSchedule(const LoadSpec& spec);
  ScheduledRequest Next();

 private:
  uint64_t NextRandom();
  double NextUnit();  // uniform in (0, 1)

  const LoadSpec& spec_;
  uint64_t state_;
  double total_weight_ = 0;
  double t_seconds_ = 0;
};

}  // namespace allocguard::replay
