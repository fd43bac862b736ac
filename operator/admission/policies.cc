#include "operator/admission/policies.h"

#include <utility>

#include "operator/api/policy.h"

namespace allocguard::admission {

std::vector<api::AllocatorPolicy> ParsePolicies(const std::vector<nlohmann::json>& objects) {
  std::vector<api::AllocatorPolicy> out;
  for (const nlohmann::json& object : objects) {
    auto parsed = api::ParseAllocatorPolicy(object);
    if (parsed.ok()) out.push_back(std::move(*parsed));
  }
  return out;
}

}  // namespace allocguard::admission
