#pragma once

// The bake-off matrix: the allocators and tunings a bake-off runs when it is
// given none (docs/replay.md "The bake-off"). One table, read by
// `allocguard replay --bake-off` (replay::DefaultBakeOffMatrix, as --variant
// specs) and by an AllocatorPolicy's `canary.bakeOff: true` (the policy
// parser, as typed variants), so the two run the same matrix.

#include <string>
#include <utility>
#include <vector>

namespace allocguard {

struct BakeOffMatrixEntry {
  std::string name;       // the variant's name, a DNS label of at most 30 characters
  std::string allocator;  // glibc | jemalloc | mimalloc | tcmalloc
  // The tunables, as the environment that sets them. Only variables a policy
  // field sets appear here (MALLOC_ARENA_MAX, MALLOC_CONF), so every entry is
  // also an AllocatorPolicy variant.
  std::vector<std::pair<std::string, std::string>> env;
};

// glibc as it is and with two arenas; jemalloc as it is and with background
// purging and a 1-second decay; mimalloc; tcmalloc. The first is the
// allocator a program has without allocguard, against which a local bake-off
// gives its costs.
const std::vector<BakeOffMatrixEntry>& BakeOffMatrix();

}  // namespace allocguard
