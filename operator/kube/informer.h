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

// One object as a Store keeps it: the tree itself, or, in a packed store
// (Store::SetPacked), the tree's MessagePack encoding, which takes a fraction
// of the tree's memory (a JSON tree spends a heap node and a heap string per
// member) and is decoded for each reader that asks for the object.
class CacheEntry {
 public:
  // Never throws: an object that cannot be encoded is kept as a tree.
  static std::shared_ptr<const CacheEntry> Make(ObjectRef object, bool packed);

  // The object: the shared tree, or a fresh decoding of the packed bytes
  // (null JSON if they do not decode, which the store's own encoding never
  // gives). Never throws, never returns nullptr.
  ObjectRef Get() const;
  bool packed() const { return tree_ == nullptr; }
  // Heap bytes of the packed encoding (0 for a tree), for metrics and benchmarks.
  size_t packed_bytes() const { return packed_.size(); }

 private:
  ObjectRef tree_;
  std::string packed_;
};
using CacheEntryRef = std::shared_ptr<const CacheEntry>;

// Objects handed out by a Store: shared with the store, not copied.
// Iterates as `const Object&`; from a packed store each object is decoded as
// the iterator reaches it and lives until the iterator moves on, so a reader
// that keeps an object beyond one step of the loop keeps an ObjectRef
// (refs()), not a reference. Not thread-safe (a value to use in one thread).
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
    explicit Iterator(std::vector<CacheEntryRef>::const_iterator it) : it_(it) {}
    const Object& operator*() const { return *Current(); }
    const Object* operator->() const { return Current().get(); }
    Iterator& operator++() {
      ++it_;
      current_.reset();
      return *this;
    }
    Iterator operator++(int) {
      Iterator old = *this;
      ++*this;
      return old;
    }
    bool operator==(const Iterator& other) const { return it_ == other.it_; }

   private:
    const ObjectRef& Current() const {
      if (current_ == nullptr) current_ = (*it_)->Get();
      return current_;
    }

    std::vector<CacheEntryRef>::const_iterator it_;
    mutable ObjectRef current_;
  };

  ObjectRefs() = default;
  explicit ObjectRefs(std::vector<CacheEntryRef> entries) : entries_(std::move(entries)) {}

  Iterator begin() const { return Iterator(entries_.begin()); }
  Iterator end() const { return Iterator(entries_.end()); }
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  // The i-th object, decoded once and kept as long as this value.
  const Object& operator[](size_t i) const;
  // Every object as a shared entry (decoded, for a packed store).
  std::vector<ObjectRef> refs() const;
  // Deep copies, for code that takes objects by value.
  std::vector<Object> Copies() const;

 private:
  std::vector<CacheEntryRef> entries_;
  mutable std::map<size_t, ObjectRef> decoded_;
};

// Maps an object to index values, e.g. its namespace or owner names.
using IndexFunc = std::function<std::vector<std::string>(const Object& object)>;

// Objects by ObjectKey, with secondary indexes. Handlers run synchronously
// under no lock of the store. Readers get shared immutable entries
// (ObjectRef), never copies; a packed store decodes an entry for each reader.
// Thread-safe.
class Store {
 public:
  // REQUIRES: called before objects are added.
  void AddIndex(const std::string& name, IndexFunc func);
  void SetHandlers(EventHandlers handlers);
  // Keep entries packed (CacheEntry): a fraction of the memory, a decoding
  // per read. REQUIRES: called before objects are added.
  void SetPacked(bool packed);
  bool packed() const;

  // Replaces the contents: emits add for new keys, update for changed ones
  // (resourceVersion differs) and delete for keys that are gone.
  void Replace(std::vector<Object> objects);
  // The same with entries made by MakeEntry, so that a caller filling the
  // store from a long list holds each object as the store keeps it, not as
  // a tree, while the list goes on.
  void ReplaceEntries(std::vector<CacheEntryRef> entries);
  CacheEntryRef MakeEntry(Object object) const;
  void Upsert(Object object);
  void Remove(const Object& object);

  // nullptr when the key is not cached.
  ObjectRef Get(const std::string& key) const;
  ObjectRefs List() const;
  std::vector<std::string> Keys() const;
  ObjectRefs ByIndex(const std::string& index, const std::string& value) const;
  // The keys ByIndex would give the objects of, without reading (or, in a
  // packed store, decoding) the objects.
  std::vector<std::string> KeysByIndex(const std::string& index, const std::string& value) const;
  // Whether index gives `key` under `value`: a lookup, no object read.
  bool InIndex(const std::string& index, const std::string& value, const std::string& key) const;
  size_t size() const;

 private:
  void IndexLocked(const std::string& key, const Object& object, bool add);

  mutable std::mutex mu_;
  bool packed_ = false;
  std::map<std::string, CacheEntryRef> objects_;
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
  // Members of each listed or watched object left out while it is parsed
  // (ParsePruned), so that what `transform` throws away is never built as a
  // tree. REQUIRES: it drops only what `transform` drops anyway, so that
  // transform(pruned) == transform(whole) for every object. Null: none.
  MemberFilter member_filter;
  // Keep the store's entries packed (Store::SetPacked): for caches of many
  // objects (every Pod of the cluster) that readers visit rarely.
  bool packed = false;
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
