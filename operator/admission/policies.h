#pragma once

// The AllocatorPolicies the webhooks and the reconcilers decide by, parsed
// from the objects of an informer's store.

#include <vector>

#include <nlohmann/json.hpp>

#include "operator/api/types.h"

namespace allocguard::admission {

// The AllocatorPolicy objects among `objects` (typically one namespace's,
// from the policies' store), parsed with api::ParseAllocatorPolicy, in their
// order; unparsable ones are left out.
std::vector<api::AllocatorPolicy> ParsePolicies(const std::vector<nlohmann::json>& objects);

}  // namespace allocguard::admission
