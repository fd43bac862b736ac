#pragma once

// An informer: list + watch of one resource type into an indexed in-memory
// store, with add/update/delete handlers.
//
// The reflector loop (kube-rs watcher / client-go Reflector):
//   list (pages of InformerOptions::page_size, each transformed as it
//   arrives; a continue token that expires restarts the list once, a second
//   expiry backs off and relists) -> Store::Replace -> watch from the list's
//   resourceVersion, tracking the version of every event and bookmark ->
//   when the server ends the watch, re-watch from the last version;
//   on a transport error, back off (0.8 s doubling to 30 s) and re-watch;
//   on 410 Gone (HTTP status or ERROR event), relist. Replace emits deletes
//   for cached objects the relist no longer shows, so handlers see every
//   deletion even when they missed the event.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "operator/kube/client.h"

namespace allocguard::kube {

struct EventHandlers {
  std::function<void(const Object& object)> on_add;
  std::function<void(const Object& old_object, const Object& new_object)> on_update;
  std::function<void(const Object& object)> on_delete;
};

// A cached object. The store never changes an entry, it replaces it, so
// whoever holds one reads a consistent object for as long as they keep it,
// without a copy and without a lock.
using ObjectRef = std::shared_ptr<const Object>;

// Objects handed out by a Store: shared with the store, not copied.
// Iterates as `const Object&`.
class ObjectRefs {
 public:
  class Iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = Object;
    using difference_type = std::ptrdiff_t;
    using pointer = const Object*;
    using reference = const Object&;

    Iterator() = default;
    explicit Iterator(std::vector<ObjectRef>::const_iterator it) : it_(it) {}
    const Object& operator*() const { return **it_; }
    const Object* operator->() const { return it_->get(); }
    Iterator& operator++() {
      ++it_;
      return *this;
    }
    Iterator operator++(int) {
      Iterator old = *this;
      ++it_;
      return old;
    }
    bool operator==(const Iterator&) const = default;

   private:
    std::vector<ObjectRef>::const_iterator it_;
  };

  ObjectRefs() = default;
  explicit ObjectRefs(std::vector<ObjectRef> refs) : refs_(std::move(refs)) {}

  Iterator begin() const { return Iterator(refs_.begin()); }
  Iterator end() const { return Iterator(refs_.end()); }
  size_t size() const { return refs_.size(); }
  bool empty() const { return refs_.empty(); }
  const Object& operator[](size_t i) const { return *refs_[i]; }
  const std::vector<ObjectRef>& refs() const { return refs_; }
  // Deep copies, for code that takes objects by value.
  std::vector<Object> Copies() const;

 private:
  std::vector<ObjectRef> refs_;
};

// Maps an object to index values, e.g. its namespace or owner names.
using IndexFunc = std::function<std::vector<std::string>(const Object& object)>;

// Objects by ObjectKey, with secondary indexes. Handlers run synchronously
// under no lock of the store. Readers get shared immutable entries
// (ObjectRef), never copies. Thread-safe.
class Store {
 public:
  // REQUIRES: called before objects are added.
  void AddIndex(const std::string& name, IndexFunc func);
  void SetHandlers(EventHandlers handlers);

  // Replaces the contents: emits add for new keys, update for changed ones
  // (resourceVersion differs) and delete for keys that are gone.
  void Replace(std::vector<Object> objects);
  void Upsert(Object object);
  void Remove(const Object& object);

  // nullptr when the key is not cached.
  ObjectRef Get(const std::string& key) const;
  ObjectRefs List() const;
  std::vector<std::string> Keys() const;
  ObjectRefs ByIndex(const std::string& index, const std::string& value) const;
  size_t size() const;

 private:
  void IndexLocked(const std::string& key, const Object& object, bool add);

  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const Object>> objects_;
  std::map<std::string, IndexFunc> index_funcs_;
  std::map<std::string, std::map<std::string, std::set<std::string>>> indexes_;
  EventHandlers handlers_;
};

struct InformerOptions {
  std::string namespace_;  // "" = all namespaces
  std::string label_selector;
  std::string field_selector;
  // client-go picks timeoutSeconds in [5, 10) minutes to spread reconnects.
  int min_watch_timeout_seconds = 300;
  Clock::Duration initial_backoff = std::chrono::milliseconds(800);
  // Applied to every object before it is stored (and handed to handlers),
  // e.g. StripManagedFields to cut the cache's memory.
  std::function<void(Object& object)> transform;
  Clock::Duration max_backoff = std::chrono::seconds(30);
  // Items per list request (limit); the rest follow with continue, as
  // client-go's pager does. 0 asks for the whole list at once.
  int page_size = 500;
};

// A transform that drops metadata.managedFields, which controllers rarely
// read and which make up a large part of a cached object.
void StripManagedFields(Object& object);

class Informer {
 public:
  Informer(Client* client, ResourceType type, InformerOptions options = {});
  ~Informer();  // stops and joins

  Store& store() { return store_; }

  // Starts the list/watch loop on its own thread. REQUIRES: called once.
  void Start();
  // Stops the loop and interrupts a watch in flight; joins the thread.
  void Stop();
  // True after the first complete list has been stored.
  bool HasSynced() const { return synced_.load(); }
  // Blocks until HasSynced() or Stop(); returns HasSynced().
  bool WaitForSync();

  // For tests and metrics.
  int lists() const { return lists_.load(); }
  int watches() const { return watches_.load(); }
  std::string last_resource_version() const;
  std::string last_error() const;

 private:
  void Run();
  bool ListOnce();

  Client* client_;
  const ResourceType type_;
  const InformerOptions options_;
  Store store_;
  Canceller canceller_;
  std::thread thread_;
  std::atomic<bool> synced_{false};
  std::atomic<int> lists_{0};
  std::atomic<int> watches_{0};
  mutable std::mutex mu_;
  std::condition_variable synced_cv_;
  std::string resource_version_;
  std::string last_error_;
};

}  // namespace allocguard::kube
