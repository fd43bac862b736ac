#include "operator/kube/informer.h"

#include <exception>
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

void Store::SetPacked(bool packed) {
  std::lock_guard<std::mutex> lock(mu_);
  packed_ = packed;
}

bool Store::packed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return packed_;
}

CacheEntryRef Store::MakeEntry(Object object) const {
  return CacheEntry::Make(std::make_shared<const Object>(std::move(object)), packed());
}

void Store::Replace(std::vector<Object> objects) {
  std::vector<CacheEntryRef> entries;
  entries.reserve(objects.size());
  for (Object& o : objects) entries.push_back(MakeEntry(std::move(o)));
  objects.clear();
  ReplaceEntries(std::move(entries));
}

void Store::ReplaceEntries(std::vector<CacheEntryRef> entries) {
  // The entries, not decoded trees, wait for the handlers: a packed store's
  // relist of 10 000 objects decodes one at a time.
  struct Change {
    CacheEntryRef old_entry, new_entry;
  };
  std::vector<Change> changes;
  EventHandlers handlers;
  // Keyed before the lock is taken: a packed entry is decoded for its key.
  std::map<std::string, CacheEntryRef> next;
  for (CacheEntryRef& entry : entries) {
    std::string key = ObjectKey(*entry->Get());
    next[std::move(key)] = std::move(entry);
  }
  entries.clear();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, old] : objects_) {
      if (next.find(key) == next.end()) {
        IndexLocked(key, *old->Get(), false);
        changes.push_back({old, nullptr});
      }
    }
    for (const auto& [key, entry] : next) {
      const ObjectRef object = entry->Get();
      auto it = objects_.find(key);
      if (it == objects_.end()) {
        IndexLocked(key, *object, true);
        changes.push_back({nullptr, entry});
      } else {
        const ObjectRef old = it->second->Get();
        IndexLocked(key, *old, false);
        IndexLocked(key, *object, true);
        if (ResourceVersionOf(*old) != ResourceVersionOf(*object)) {
          changes.push_back({it->second, entry});
        }
      }
    }
    objects_ = std::move(next);
    handlers = handlers_;
  }
  for (const auto& c : changes) {
    if (!c.new_entry) {
      if (handlers.on_delete) handlers.on_delete(*c.old_entry->Get());
    } else if (!c.old_entry) {
      if (handlers.on_add) handlers.on_add(*c.new_entry->Get());
    } else if (handlers.on_update) {
      handlers.on_update(*c.old_entry->Get(), *c.new_entry->Get());
    }
  }
}

void Store::Upsert(Object object) {
  std::string key = ObjectKey(object);
  const ObjectRef obj = std::make_shared<const Object>(std::move(object));
  // Encoded before the lock is taken: readers do not wait for it.
  CacheEntryRef entry = CacheEntry::Make(obj, packed());
  ObjectRef old;
  EventHandlers handlers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = objects_.find(key);
    if (it != objects_.end()) {
      old = it->second->Get();
      IndexLocked(key, *old, false);
    }
    IndexLocked(key, *obj, true);
    objects_[key] = std::move(entry);
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
  EventHandlers handlers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = objects_.find(key);
    if (it == objects_.end()) return;
    IndexLocked(key, *it->second->Get(), false);
    objects_.erase(it);
    handlers = handlers_;
  }
  // Handlers get the final state the server sent with the deletion.
  if (handlers.on_delete) handlers.on_delete(object);
}

std::shared_ptr<const CacheEntry> CacheEntry::Make(ObjectRef object, bool packed) {
  auto entry = std::make_shared<CacheEntry>();
  if (packed) {
    try {
      nlohmann::json::to_msgpack(*object, entry->packed_);
      entry->packed_.shrink_to_fit();
      return entry;
    } catch (const std::exception&) {
      // Not seen for JSON the server sent; keep the tree rather than lose it.
      entry->packed_.clear();
    }
  }
  entry->tree_ = std::move(object);
  return entry;
}

ObjectRef CacheEntry::Get() const {
  if (tree_ != nullptr) return tree_;
  Object object = Object::from_msgpack(packed_.begin(), packed_.end(), /*strict=*/true,
                                       /*allow_exceptions=*/false);
  if (object.is_discarded()) object = Object();
  return std::make_shared<const Object>(std::move(object));
}

const Object& ObjectRefs::operator[](size_t i) const {
  ObjectRef& decoded = decoded_[i];
  if (decoded == nullptr) decoded = entries_[i]->Get();
  return *decoded;
}

std::vector<ObjectRef> ObjectRefs::refs() const {
  std::vector<ObjectRef> out;
  out.reserve(entries_.size());
  for (const CacheEntryRef& entry : entries_) out.push_back(entry->Get());
  return out;
}

std::vector<Object> ObjectRefs::Copies() const {
  std::vector<Object> out;
  out.reserve(entries_.size());
  for (const CacheEntryRef& entry : entries_) out.push_back(*entry->Get());
  return out;
}

ObjectRef Store::Get(const std::string& key) const {
  CacheEntryRef entry;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = objects_.find(key);
    if (it == objects_.end()) return nullptr;
    entry = it->second;
  }
  return entry->Get();
}

ObjectRefs Store::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<CacheEntryRef> out;
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
  std::vector<CacheEntryRef> out;
  out.reserve(keys->second.size());
  for (const auto& k : keys->second) out.push_back(objects_.at(k));
  return ObjectRefs(std::move(out));
}

std::vector<std::string> Store::KeysByIndex(const std::string& index,
                                            const std::string& value) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto idx = indexes_.find(index);
  if (idx == indexes_.end()) return {};
  auto keys = idx->second.find(value);
  if (keys == idx->second.end()) return {};
  return {keys->second.begin(), keys->second.end()};
}

bool Store::InIndex(const std::string& index, const std::string& value,
                    const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto idx = indexes_.find(index);
  if (idx == indexes_.end()) return false;
  auto keys = idx->second.find(value);
  return keys != idx->second.end() && keys->second.contains(key);
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
    : client_(client), type_(std::move(type)), options_(std::move(options)) {
  store_.SetPacked(options_.packed);
}

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
  lo.member_filter = options_.member_filter;
  // Each page is transformed as it arrives, so the whole list is never held
  // as the server sent it, only as the store keeps it.
  std::vector<CacheEntryRef> items;
  ApiResult<std::string> version = client_->ListPages(
      type_, options_.namespace_, lo, [this, &items](std::vector<Object>& page, bool restart) {
        if (restart) items.clear();
        for (Object& item : page) {
          if (options_.transform) options_.transform(item);
          items.push_back(store_.MakeEntry(std::move(item)));
        }
        page.clear();
      });
  lists_.fetch_add(1);
  if (!version.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    last_error_ = "list " + type_.resource + ": " + version.error().ToString();
    return false;
  }
  store_.ReplaceEntries(std::move(items));
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
    wo.member_filter = options_.member_filter;
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
              store_.Upsert(std::move(object));
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
