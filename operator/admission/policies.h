#pragma once

// The AllocatorPolicies the webhooks and the reconcilers decide by, parsed
// from the objects of an informer's store.

#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/api/policy.h"
#include "operator/api/types.h"

namespace allocguard::admission {

// The AllocatorPolicy objects among `objects` (typically one namespace's,
// from the policies' store), parsed with api::ParseAllocatorPolicy, in their
// order; unparsable ones are left out.
// `objects`: any range of nlohmann::json (a vector, kube::ObjectRefs).
template <typename Objects>
std::vector<api::AllocatorPolicy> ParsePolicies(const Objects& objects) {
  std::vector<api::AllocatorPolicy> out;
  for (const nlohmann::json& object : objects) {
    auto parsed = api::ParseAllocatorPolicy(object);
    if (parsed.ok()) out.push_back(std::move(*parsed));
  }
  return out;
}

}  // namespace allocguard::admission
