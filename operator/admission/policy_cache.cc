#include "operator/admission/policy_cache.h"

#include <utility>

#include "controllers/reconcilers.h"
#include "operator/api/policy.h"

namespace allocguard::admission {

std::vector<api::AllocatorPolicy> PolicyCache::InNamespace(const std::string& ns) const {
  const kube::ObjectRefs objects = store_->ByIndex(controllers::kNamespaceIndex, ns);
  std::vector<api::AllocatorPolicy> out;
  out.reserve(objects.size());
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, Entry>& cached = entries_[ns];
  std::map<std::string, Entry> next;
  for (const kube::ObjectRef& object : objects.refs()) {
    const std::string name = kube::StringField(kube::ObjectField(*object, "metadata"), "name");
    auto it = cached.find(name);
    const bool same =
        it != cached.end() &&
        (it->second.source == object ||
         (!kube::ResourceVersionOf(*object).empty() &&
          kube::ResourceVersionOf(*object) == kube::ResourceVersionOf(*it->second.source)));
    Entry entry;
    if (same) {
      entry = std::move(it->second);
      entry.source = object;
    } else {
      parses_.fetch_add(1);
      entry.source = object;
      auto parsed = api::ParseAllocatorPolicy(*object);
      if (parsed.ok()) entry.policy = std::move(*parsed);
    }
    if (entry.policy.has_value()) out.push_back(*entry.policy);
    next[name] = std::move(entry);
  }
  if (next.empty()) {
    entries_.erase(ns);
  } else {
    cached = std::move(next);
  }
  return out;
}

}  // namespace allocguard::admission
