#pragma once

// The AllocatorPolicies of a namespace as the webhooks decide by them,
// parsed once per cached object rather than on every admission review.

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "operator/api/types.h"
#include "operator/kube/informer.h"

namespace allocguard::admission {

// Parses each policy of the policies' store at most once per version: an
// entry is reused while the store hands out the same object, or one with the
// same non-empty metadata.resourceVersion (a relist). The Pod webhook reads
// its namespace's policies on every review; they change rarely.
// Thread-safe.
class PolicyCache {
 public:
  // `store`: the policies' informer store, indexed by
  // controllers::kNamespaceIndex; must outlive this.
  explicit PolicyCache(const kube::Store* store) : store_(store) {}

  // What ParsePolicies gives for the namespace's cached policies: in the
  // store's order, unparsable ones left out. Entries of the namespace that
  // the store no longer has are dropped.
  std::vector<api::AllocatorPolicy> InNamespace(const std::string& ns) const;

  // Policies parsed so far (for tests and metrics).
  int64_t parses() const { return parses_.load(); }

 private:
  struct Entry {
    kube::ObjectRef source;
    std::optional<api::AllocatorPolicy> policy;  // nullopt: does not parse
  };

  const kube::Store* store_;
  mutable std::mutex mu_;
  // By namespace, then by name.
  mutable std::map<std::string, std::map<std::string, Entry>> entries_;
  mutable std::atomic<int64_t> parses_{0};
};

}  // namespace allocguard::admission
