#pragma once

// A small Kubernetes REST client: typed paths, JSON objects (nlohmann::json),
// errors that keep the server's reason, and client-go's retry rules.
//
// Retries: a request that never got an answer is retried (with backoff) only
// when repeating it is safe (GET, PUT, DELETE, apply); 429 is retried for
// every verb and 5xx with Retry-After for safe verbs, honouring Retry-After;
// a 401 re-reads the credentials and retries once. Time only through Clock.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/common/clock.h"
#include "operator/common/member_path.h"
#include "operator/kube/api_error.h"
#include "operator/kube/cancel.h"
#include "operator/kube/config.h"
#include "operator/kube/credentials.h"
#include "operator/kube/object.h"
#include "operator/kube/transport.h"

namespace allocguard::kube {

// A kind of resource, addressed the way the REST API addresses it.
struct ResourceType {
  std::string group;     // "" for the core group
  std::string version;   // "v1"
  std::string resource;  // plural, lower case: "configmaps"
  std::string kind;      // "ConfigMap"
  bool namespaced = true;

  std::string ApiVersion() const { return group.empty() ? version : group + "/" + version; }
  // "/api/v1/namespaces/ns/configmaps"; ns "" lists across namespaces.
  std::string CollectionPath(const std::string& ns) const;
  std::string ObjectPath(const std::string& ns, const std::string& name) const;
};

// Well-known types.
ResourceType ConfigMaps();
ResourceType Namespaces();
ResourceType Deployments();
ResourceType StatefulSets();
ResourceType DaemonSets();
ResourceType Leases();
ResourceType EventsV1();
ResourceType CustomResourceDefinitions();
ResourceType Pods();
ResourceType Nodes();
ResourceType Secrets();
ResourceType Jobs();
ResourceType MutatingWebhookConfigurations();
ResourceType ValidatingWebhookConfigurations();
// allocguard.io/v1alpha1
ResourceType AllocatorPolicies();
ResourceType ReplayCanaries();

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  int page_size = 500;  // limit per request; pages are followed with continue
  // Members of each item left out as the page is parsed (ParsePruned), for a
  // caller that would drop them anyway; null keeps everything.
  MemberFilter member_filter;
};

struct ObjectList {
  std::vector<Object> items;
  std::string resource_version;  // of the list: where a watch starts
};

enum class PatchType { kMerge, kJson, kStrategicMerge };

enum class Propagation { kDefault, kForeground, kBackground, kOrphan };

struct DeleteOptions {
  Propagation propagation = Propagation::kDefault;
  std::string precondition_uid;
  std::string precondition_resource_version;
};

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark };

struct WatchOptions {
  std::string resource_version;  // start after this version ("" = now, with synthetic adds)
  std::string label_selector;
  std::string field_selector;
  int timeout_seconds = 300;  // server ends the watch after this; the caller re-watches
  bool allow_bookmarks = true;
  // Members of each event's object left out as the event is parsed
  // (ParsePruned), for a caller that would drop them anyway; null keeps
  // everything. An ERROR event's Status is always read whole.
  MemberFilter member_filter;
};

struct ClientOptions {
  Clock* clock = nullptr;  // nullptr: the real clock
  std::string user_agent = "allocguard";
  int max_transport_retries = 3;  // attempts after the first, for safe verbs
  int max_throttle_retries = 5;   // after 429 / 5xx with Retry-After
  Clock::Duration initial_backoff = std::chrono::milliseconds(200);
  Clock::Duration max_retry_after = std::chrono::seconds(30);
  size_t max_watch_line_bytes = 16u << 20;  // one event; larger streams are cut
};

// Thread-safe.
class Client {
 public:
  Client(std::shared_ptr<Transport> transport, std::shared_ptr<TokenSource> token_source,
         ClientOptions options = {});

  // A client for a RestConfig: TLS transport and the config's credentials.
  static Result<std::unique_ptr<Client>> Create(const RestConfig& config,
                                                ClientOptions options = {});

  ApiResult<Object> Get(const ResourceType& type, const std::string& ns, const std::string& name);
  // Follows continue tokens; restarts the whole list once if a token expires.
  ApiResult<ObjectList> List(const ResourceType& type, const std::string& ns,
                             const ListOptions& options = {});

  // Called with each page's items (apiVersion and kind filled in) as it
  // arrives; the handler may move them out. `restart` is true on the first
  // page, and on the first page again after the server expired a continue
  // token (410 Expired): the items of the pages before it belong to an older
  // snapshot and must be dropped.
  using ListPageHandler = std::function<void(std::vector<Object>& items, bool restart)>;
  // The list of List, page by page: only one page is held at a time, so a
  // caller that keeps a slim form of each item never holds the whole list.
  // Restarts once on an expired continue token; a second expiry, or one on
  // the first page, is the error. Returns the list's resourceVersion.
  ApiResult<std::string> ListPages(const ResourceType& type, const std::string& ns,
                                   const ListOptions& options, const ListPageHandler& on_page);
  ApiResult<Object> Create(const ResourceType& type, const std::string& ns, const Object& object);
  // PUT of the object as given (optimistic concurrency through its
  // metadata.resourceVersion). subresource: "" or "status".
  ApiResult<Object> Update(const ResourceType& type, const Object& object,
                           const std::string& subresource = "");
  ApiResult<Object> UpdateStatus(const ResourceType& type, const Object& object) {
    return Update(type, object, "status");
  }
  // Returns the server's answer: the deleted object or a Status.
  ApiResult<Object> Delete(const ResourceType& type, const std::string& ns, const std::string& name,
                           const DeleteOptions& options = {});
  ApiResult<Object> Patch(const ResourceType& type, const std::string& ns, const std::string& name,
                          PatchType patch_type, const Object& patch,
                          const std::string& subresource = "");
  // Server-side apply of object (apiVersion, kind, metadata.name and only the
  // fields this manager owns). force takes over fields other managers own.
  ApiResult<Object> Apply(const ResourceType& type, const Object& object,
                          const std::string& field_manager, bool force = true,
                          const std::string& subresource = "");

  // Read-modify-write that survives concurrent writers: GET, mutate, PUT;
  // on 409 Conflict repeats up to attempts times (client-go's DefaultRetry:
  // 5 attempts, ~10 ms apart). mutate returning an error stops at once.
  ApiResult<Object> UpdateWithRetry(const ResourceType& type, const std::string& ns,
                                    const std::string& name,
                                    const std::function<Status(Object&)>& mutate,
                                    const std::string& subresource = "", int attempts = 5);

  // One watch request: calls on_event for each event in order until the
  // server ends the stream (OK), on_event returns false (OK), canceller fires
  // (transport error), or an error occurs. An ERROR event ends the watch with
  // its Status (410 Gone: the caller must relist). A stream cut mid-event is
  // an error, not a silent end.
  using EventHandler = std::function<bool(WatchEventType type, Object& object)>;
  ApiResult<bool> Watch(const ResourceType& type, const std::string& ns,
                        const WatchOptions& options, const EventHandler& on_event,
                        Canceller* canceller);

  // GET of any path (discovery, /version, /readyz).
  ApiResult<std::string> GetRaw(const std::string& path);

  Clock* clock() const { return clock_; }

 private:
  struct Call {
    std::string method;
    std::string path;
    std::string body;
    std::string content_type;
    bool safe_to_repeat = false;
  };
  // The response parsed, members below `root` left out as `keep` says.
  ApiResult<Object> Do(const Call& call, const MemberPath& root = {},
                       const MemberFilter& keep = nullptr);
  ApiResult<net::HttpResponse> DoRaw(const Call& call);
  Status Authorize(net::HttpRequest& request, bool force_refresh);

  std::shared_ptr<Transport> transport_;
  std::shared_ptr<TokenSource> token_source_;
  ClientOptions options_;
  Clock* clock_;
};

// Splits a byte stream into lines at '\n' across arbitrary piece boundaries.
// A line longer than max_line_bytes is an error (bounded memory). Empty lines
// are skipped.
class LineSplitter {
 public:
  explicit LineSplitter(size_t max_line_bytes) : max_(max_line_bytes) {}
  // Calls on_line for each completed line; stops early (returning OK) when
  // on_line returns false.
  Status Feed(std::string_view piece, const std::function<bool(std::string_view)>& on_line);
  // Bytes of an unfinished line: non-zero at the end of a stream = truncated.
  size_t pending() const { return buffer_.size(); }

 private:
  size_t max_;
  std::string buffer_;
};

// "name" or "namespace/name", the key client-go uses for objects.
std::string ObjectKey(const Object& object);
std::string ResourceVersionOf(const Object& object);

}  // namespace allocguard::kube
