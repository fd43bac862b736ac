#pragma once

// Reading and writing the allocguard.io/v1alpha1 custom resources.
//
// The API server validates and defaults what users write (crds/); the parsers
// here read the stored objects back into the types of types.h, apply the same
// defaults to fields that are absent (an object may predate a schema change)
// and re-check what the operator relies on. An error names the field:
// "spec.canary.load.requests[2].weight: must be positive, got -1".
//
// None of these functions throws, whatever JSON they are given. All are
// thread-safe (no shared state).

#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "operator/api/types.h"
#include "operator/common/status.h"

namespace allocguard::api {

// A whole AllocatorPolicy / ReplayCanary object as the API server returns it
// (apiVersion, kind, metadata, spec; status is ignored).
Result<AllocatorPolicy> ParseAllocatorPolicy(const nlohmann::json& object);
Result<ReplayCanary> ParseReplayCanary(const nlohmann::json& object);

// The spec of a ReplayCanary in the CRD's JSON shape, for the operator to
// create one. Round-trips: ParseReplayCanary of an object with this spec gives
// back an equal ReplayCanarySpec (the pod template compared as JSON).
nlohmann::json ReplayCanarySpecToJson(const ReplayCanarySpec& spec);
// spec.allocator's JSON shape; tunables that are unset are omitted.
nlohmann::json AllocatorSpecToJson(const AllocatorSpec& allocator);

// The variants of a bake-off canary whose policy lists none: the bake-off
// matrix (common/bake_off_matrix.h, the one `allocguard replay --bake-off`
// runs), less the entry that is the candidate's allocator itself (the
// candidate measures it) and, when `libc` is musl, less tcmalloc (it has no
// musl build).
std::vector<VariantSpec> BakeOffVariants(const AllocatorSpec& candidate, Libc libc);

// Whether labels satisfy the selector, with metav1.LabelSelector semantics
// (an empty selector matches everything; the parsers refuse empty selectors).
bool SelectorMatches(const LabelSelector& selector,
                     const std::map<std::string, std::string>& labels);

// The policies whose selector matches labels, in the order given. Exactly
// one of them governs the labelled object; none or several, none does.
std::vector<const AllocatorPolicy*> PoliciesSelecting(
    const std::vector<AllocatorPolicy>& policies, const std::map<std::string, std::string>& labels);

// The selector in the query syntax of a list call's labelSelector parameter:
// "app=web,tier in (a,b),!legacy". Not URL-escaped.
std::string SelectorString(const LabelSelector& selector);

// A load file for `allocguard replay` (replay::ParseLoadSpec accepts it) with
// base_url http://127.0.0.1:<port>. ParseLoadSpec refuses a load without
// requests, so REQUIRES !load.requests.empty() for the result to be usable.
std::string RenderLoadFile(const LoadSpec& load);

// The inverse of AllocatorName / RolloutModeName / GuardActionName (types.h).
std::optional<Allocator> AllocatorFromName(const std::string& name);
std::optional<RolloutMode> RolloutModeFromName(const std::string& name);
std::optional<GuardAction> GuardActionFromName(const std::string& name);

// The environment variable for a mimalloc option: "purge_delay" ->
// "MIMALLOC_PURGE_DELAY".
std::string MimallocOptionEnvName(const std::string& option);

}  // namespace allocguard::api
