#include "operator/kube/informer.h"

#include <random>

namespace allocguard::kube {

void Store::AddIndex(const std::string& name, IndexFunc func) {
  std::lock_guard<std::mutex> lock(mu_);
  index_funcs_[name] = std::move(func);
}

void Store::SetHandlers(EventHandlers handlers) {
  std::lock_guard<std::mutex> lock(mu_);
  handlers_ = std::move(handlers);
}

void Store::IndexLocked(const std::string& key, const Object& object, bool add) {
  for (const auto& [name, func] : index_funcs_) {
    for (const auto& value : func(object)) {
      auto& keys = indexes_[name][value];
      if (add) {
        keys.insert(key);
      } else {
        keys.erase(key);
        if (keys.empty()) indexes_[name].erase(value);
      }
    }
  }
}

void Store::Replace(std::vector<Object> objects) {
  struct Change {
    std::shared_ptr<const Object> old_object, new_object;
  };
  std::vector<Change> changes;
  EventHandlers handlers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<std::string, std::shared_ptr<const Object>> next;
    for (auto& o : objects) {
      std::string key = ObjectKey(o);
      next[key] = std::make_shared<const Object>(std::move(o));
    }
    for (const auto& [key, old] : objects_) {
      if (next.find(key) == next.end()) {
        IndexLocked(key, *old, false);
        changes.push_back({old, nullptr});
      }
    }
    for (const auto& [key, obj] : next) {
      auto it = objects_.find(key);
      if (it == objects_.end()) {
        IndexLocked(key, *obj, true);
        changes.push_back({nullptr, obj});
      } else {
        IndexLocked(key, *it->second, false);
        IndexLocked(key, *obj, true);
        if (ResourceVersionOf(*it->second) != ResourceVersionOf(*obj)) {
          changes.push_back({it->second, obj});
        }
      }
    }
    objects_ = std::move(next);
    handlers = handlers_;
  }
  for (const auto& c : changes) {
    if (!c.new_object) {
      if (handlers.on_delete) handlers.on_delete(*c.old_object);
    } else if (!c.old_object) {
      if (handlers.on_add) handlers.on_add(*c.new_object);
    } else if (handlers.on_update) {
      handlers.on_update(*c.old_object, *c.new_object);
    }
  }
}

void Store::Upsert(Object object) {
  std::string key = ObjectKey(object);
  auto obj = std::make_shared<const Object>(std::move(object));
  std::shared_ptr<const Object> old;
  EventHandlers handlers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = objects_.find(key);
    if (it != objects_.end()) {
      old = it->second;
      IndexLocked(key, *old, false);
    }
    IndexLocked(key, *obj, true);
    objects_[key] = obj;
    handlers = handlers_;
  }
  if (old) {
    if (handlers.on_update) handlers.on_update(*old, *obj);
  } else if (handlers.on_add) {
    handlers.on_add(*obj);
  }
}

void Store::Remove(const Object& object) {
  std::string key = ObjectKey(object);
  std::shared_ptr<const Object> old;
  EventHandlers handlers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = objects_.find(key);
    if (it == objects_.end()) return;
    old = it->second;
    IndexLocked(key, *old, false);
    objects_.erase(it);
    handlers = handlers_;
  }
  // Handlers get the final state the server sent with the deletion.
  if (handlers.on_delete) handlers.on_delete(object);
}

std::vector<Object> ObjectRefs::Copies() const {
  std::vector<Object> out;
  out.reserve(refs_.size());
  for (const ObjectRef& ref : refs_) out.push_back(*ref);
  return out;
}

ObjectRef Store::Get(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return nullptr;
  return it->second;
}

ObjectRefs Store::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ObjectRef> out;
  out.reserve(objects_.size());
  for (const auto& [k, v] : objects_) out.push_back(v);
  return ObjectRefs(std::move(out));
}

std::vector<std::string> Store::Keys() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [k, v] : objects_) out.push_back(k);
  return out;
}

ObjectRefs Store::ByIndex(const std::string& index, const std::string& value) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto idx = indexes_.find(index);
  if (idx == indexes_.end()) return {};
  auto keys = idx->second.find(value);
  if (keys == idx->second.end()) return {};
  std::vector<ObjectRef> out;
  out.reserve(keys->second.size());
  for (const auto& k : keys->second) out.push_back(objects_.at(k));
  return ObjectRefs(std::move(out));
}

size_t Store::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return objects_.size();
}

void StripManagedFields(Object& object) {
  if (auto m = object.find("metadata"); m != object.end() && m->is_object()) {
    m->erase("managedFields");
  }
}

Informer::Informer(Client* client, ResourceType type, InformerOptions options)
    : client_(client), type_(std::move(type)), options_(std::move(options)) {}

Informer::~Informer() { Stop(); }

void Informer::Start() {
  thread_ = std::thread([this] { Run(); });
}

void Informer::Stop() {
  canceller_.Cancel();
  // Pass through mu_ before notifying: a WaitForSync that has checked its
  // predicate (not yet cancelled) holds mu_ until it sleeps, so without this
  // the notification could fall between its check and its sleep and be lost,
  // leaving it asleep for good.
  { std::lock_guard<std::mutex> lock(mu_); }
  synced_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Informer::WaitForSync() {
  std::unique_lock<std::mutex> lock(mu_);
  synced_cv_.wait(lock, [this] { return synced_.load() || canceller_.cancelled(); });
  return synced_.load();
}

std::string Informer::last_resource_version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return resource_version_;
}

std::string Informer::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

bool Informer::ListOnce() {
  ListOptions lo;
  lo.label_selector = options_.label_selector;
  lo.field_selector = options_.field_selector;
  lo.page_size = options_.page_size;
  // Each page is transformed as it arrives, so the whole list is never held
  // as the server sent it, only as the store keeps it.
  std::vector<Object> items;
  ApiResult<std::string> version = client_->ListPages(
      type_, options_.namespace_, lo, [this, &items](std::vector<Object>& page, bool restart) {
        if (restart) items.clear();
        for (Object& item : page) {
          if (options_.transform) options_.transform(item);
          items.push_back(std::move(item));
        }
        page.clear();
      });
  lists_.fetch_add(1);
  if (!version.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    last_error_ = "list " + type_.resource + ": " + version.error().ToString();
    return false;
  }
  store_.Replace(std::move(items));
  {
    std::lock_guard<std::mutex> lock(mu_);
    resource_version_ = std::move(*version);
    synced_.store(true);
  }
  synced_cv_.notify_all();
  return true;
}

void Informer::Run() {
  Clock* clock = client_->clock();
  std::mt19937 rng(std::random_device{}());
  Clock::Duration backoff = options_.initial_backoff;
  bool need_list = true;
  while (!canceller_.cancelled()) {
    if (need_list) {
      if (!ListOnce()) {
        if (!canceller_.SleepFor(clock, backoff)) return;
        backoff = std::min(backoff * 2, options_.max_backoff);
        continue;
      }
      need_list = false;
      backoff = options_.initial_backoff;
    }
    WatchOptions wo;
    wo.resource_version = last_resource_version();
    wo.label_selector = options_.label_selector;
    wo.field_selector = options_.field_selector;
    int min = options_.min_watch_timeout_seconds;
    wo.timeout_seconds = min + static_cast<int>(rng() % static_cast<unsigned>(std::max(1, min)));
    watches_.fetch_add(1);
    const Clock::TimePoint watch_started = clock->Now();
    int events = 0;
    ApiResult<bool> result = client_->Watch(
        type_, options_.namespace_, wo,
        [this, &events](WatchEventType type, Object& object) {
          ++events;
          std::string rv = ResourceVersionOf(object);
          if (options_.transform && type != WatchEventType::kBookmark) options_.transform(object);
          switch (type) {
            case WatchEventType::kAdded:
            case WatchEventType::kModified:
              store_.Upsert(object);
              break;
            case WatchEventType::kDeleted:
              store_.Remove(object);
              break;
            case WatchEventType::kBookmark:
              break;
          }
          if (!rv.empty()) {
            std::lock_guard<std::mutex> lock(mu_);
            resource_version_ = rv;
          }
          return !canceller_.cancelled();
        },
        &canceller_);
    if (canceller_.cancelled()) return;
    if (result.ok()) {
      if (events == 0 && clock->Now() - watch_started < std::chrono::seconds(1)) {
        // Ended at once with nothing to say: do not hammer the server.
        if (!canceller_.SleepFor(clock, backoff)) return;
        backoff = std::min(backoff * 2, options_.max_backoff);
      } else {
        backoff = options_.initial_backoff;
      }
      continue;  // the server ended the watch: resume from the last version
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      last_error_ = "watch " + type_.resource + ": " + result.error().ToString();
    }
    if (result.error().IsGone()) {
      // Our version was compacted away: relist from a consistent read.
      std::lock_guard<std::mutex> lock(mu_);
      resource_version_.clear();
      need_list = true;
      continue;
    }
    if (!canceller_.SleepFor(clock, backoff)) return;
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

}  // namespace allocguard::kube
