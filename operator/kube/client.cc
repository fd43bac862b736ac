#include "operator/kube/client.h"

#include <algorithm>
#include <cctype>

#include "operator/kube/pruned_parse.h"

namespace allocguard::kube {

namespace {

std::string Escape(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

void AddParam(std::string& path, const std::string& key, const std::string& value) {
  if (value.empty()) return;
  path += path.find('?') == std::string::npos ? '?' : '&';
  path += key + "=" + Escape(value);
}

std::string HeaderValue(const net::Headers& headers, const std::string& key) {
  auto it = headers.find(key);
  return it == headers.end() ? std::string() : it->second;
}

bool IsSuccess(int status) { return status >= 200 && status < 300; }

ApiError InvalidResponse(int status, const std::string& what) {
  ApiError e;
  e.code = status;
  e.reason = "InvalidResponse";
  e.message = what;
  return e;
}

}  // namespace

std::string ResourceType::CollectionPath(const std::string& ns) const {
  std::string out = group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
  if (namespaced && !ns.empty()) out += "/namespaces/" + Escape(ns);
  return out + "/" + resource;
}

std::string ResourceType::ObjectPath(const std::string& ns, const std::string& name) const {
  return CollectionPath(ns) + "/" + Escape(name);
}

ResourceType ConfigMaps() { return {"", "v1", "configmaps", "ConfigMap", true}; }
ResourceType Namespaces() { return {"", "v1", "namespaces", "Namespace", false}; }
ResourceType Deployments() { return {"apps", "v1", "deployments", "Deployment", true}; }
ResourceType StatefulSets() { return {"apps", "v1", "statefulsets", "StatefulSet", true}; }
ResourceType DaemonSets() { return {"apps", "v1", "daemonsets", "DaemonSet", true}; }
ResourceType Leases() { return {"coordination.k8s.io", "v1", "leases", "Lease", true}; }
ResourceType EventsV1() { return {"events.k8s.io", "v1", "events", "Event", true}; }
ResourceType Pods() { return {"", "v1", "pods", "Pod", true}; }
ResourceType Nodes() { return {"", "v1", "nodes", "Node", false}; }
ResourceType Secrets() { return {"", "v1", "secrets", "Secret", true}; }
ResourceType Jobs() { return {"batch", "v1", "jobs", "Job", true}; }
ResourceType MutatingWebhookConfigurations() {
  return {"admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
          "MutatingWebhookConfiguration", false};
}
ResourceType ValidatingWebhookConfigurations() {
  return {"admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
          "ValidatingWebhookConfiguration", false};
}
ResourceType AllocatorPolicies() {
  return {"allocguard.io", "v1alpha1", "allocatorpolicies", "AllocatorPolicy", true};
}
ResourceType ReplayCanaries() {
  return {"allocguard.io", "v1alpha1", "replaycanaries", "ReplayCanary", true};
}
ResourceType CustomResourceDefinitions() {
  return {"apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
          false};
}

std::string ResourceVersionOf(const Object& object) {
  auto m = object.find("metadata");
  if (m == object.end() || !m->is_object()) return "";
  auto rv = m->find("resourceVersion");
  return rv != m->end() && rv->is_string() ? rv->get<std::string>() : "";
}

std::string ObjectKey(const Object& object) {
  auto m = object.find("metadata");
  if (m == object.end() || !m->is_object()) return "";
  std::string name = StringField(*m, "name");
  std::string ns = StringField(*m, "namespace");
  return ns.empty() ? name : ns + "/" + name;
}

Status LineSplitter::Feed(std::string_view piece,
                          const std::function<bool(std::string_view)>& on_line) {
  while (!piece.empty()) {
    size_t nl = piece.find('\n');
    if (nl == std::string_view::npos) {
      if (buffer_.size() + piece.size() > max_) {
        return InvalidArgument("a line of the stream exceeds " + std::to_string(max_) + " bytes");
      }
      buffer_.append(piece);
      return Status::Ok();
    }
    std::string_view head = piece.substr(0, nl);
    piece.remove_prefix(nl + 1);
    bool keep_going = true;
    if (buffer_.empty()) {
      if (head.size() > max_) {
        return InvalidArgument("a line of the stream exceeds " + std::to_string(max_) + " bytes");
      }
      if (!head.empty() && head != "\r") keep_going = on_line(head);
    } else {
      if (buffer_.size() + head.size() > max_) {
        return InvalidArgument("a line of the stream exceeds " + std::to_string(max_) + " bytes");
      }
      buffer_.append(head);
      std::string line = std::move(buffer_);
      buffer_.clear();
      keep_going = on_line(line);
    }
    if (!keep_going) return Status::Ok();
  }
  return Status::Ok();
}

Client::Client(std::shared_ptr<Transport> transport, std::shared_ptr<TokenSource> token_source,
               ClientOptions options)
    : transport_(std::move(transport)),
      token_source_(std::move(token_source)),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : RealClock::Get()) {}

Result<std::unique_ptr<Client>> Client::Create(const RestConfig& config, ClientOptions options) {
  Clock* clock = options.clock != nullptr ? options.clock : RealClock::Get();
  HttpTransportOptions t;
  t.client.base_url = config.server;
  t.client.tls = config.tls;
  t.clock = clock;
  AG_ASSIGN_OR_RETURN(std::unique_ptr<Transport> transport, NewHttpTransport(t));
  AG_ASSIGN_OR_RETURN(std::shared_ptr<TokenSource> tokens, TokenSourceFor(config, clock));
  return std::make_unique<Client>(std::shared_ptr<Transport>(std::move(transport)),
                                  std::move(tokens), std::move(options));
}

Status Client::Authorize(net::HttpRequest& request, bool force_refresh) {
  request.headers.emplace("User-Agent", options_.user_agent);
  request.headers.emplace("Accept", "application/json");
  if (!token_source_) return Status::Ok();
  AG_ASSIGN_OR_RETURN(std::string token, token_source_->Token(force_refresh));
  if (!token.empty()) request.headers.emplace("Authorization", "Bearer " + token);
  return Status::Ok();
}

ApiResult<net::HttpResponse> Client::DoRaw(const Call& call) {
  int transport_retries = 0;
  int throttle_retries = 0;
  bool reauthorized = false;
  bool force_refresh = false;
  Clock::Duration backoff = options_.initial_backoff;
  while (true) {
    net::HttpRequest req;
    req.method = call.method;
    req.path = call.path;
    req.body = call.body;
    req.content_type = call.content_type;
    if (Status s = Authorize(req, force_refresh); !s.ok()) {
      return TransportError(s.WithContext("credentials"));
    }
    Result<net::HttpResponse> res = transport_->Send(req);
    if (!res.ok()) {
      if (call.safe_to_repeat && transport_retries < options_.max_transport_retries) {
        ++transport_retries;
        clock_->SleepUntil(clock_->Now() + backoff);
        backoff *= 2;
        continue;
      }
      ApiError e = TransportError(res.status());
      if (transport_retries > 0) {
        e.message += " (after " + std::to_string(transport_retries + 1) + " attempts)";
      }
      return e;
    }
    int status = res->status;
    if (IsSuccess(status)) return std::move(*res);
    if (status == 401 && token_source_ && !reauthorized) {
      reauthorized = true;  // the token may have rotated: re-read it, once
      force_refresh = true;
      continue;
    }
    ApiError error = ParseApiError(status, res->body, HeaderValue(res->headers, "Retry-After"));
    bool throttled = status == 429 || (status >= 500 && call.safe_to_repeat &&
                                       (error.retry_after.count() > 0 || status == 503));
    if (throttled && throttle_retries < options_.max_throttle_retries) {
      ++throttle_retries;
      Clock::Duration wait =
          error.retry_after.count() > 0 ? Clock::Duration(error.retry_after) : backoff;
      wait = std::min(wait, options_.max_retry_after);
      clock_->SleepUntil(clock_->Now() + wait);
      backoff *= 2;
      continue;
    }
    return error;
  }
}

ApiResult<Object> Client::Do(const Call& call, const MemberPath& root, const MemberFilter& keep) {
  ApiResult<net::HttpResponse> res = DoRaw(call);
  if (!res.ok()) return res.error();
  Object parsed = ParsePruned(res->body, root, keep);
  if (parsed.is_discarded()) {
    return InvalidResponse(res->status, call.method + " " + call.path +
                                            ": the response body is not JSON (" +
                                            std::to_string(res->body.size()) + " bytes)");
  }
  return parsed;
}

ApiResult<std::string> Client::GetRaw(const std::string& path) {
  ApiResult<net::HttpResponse> res = DoRaw({"GET", path, "", "", true});
  if (!res.ok()) return res.error();
  return std::move(res->body);
}

ApiResult<Object> Client::Get(const ResourceType& type, const std::string& ns,
                              const std::string& name) {
  return Do({"GET", type.ObjectPath(ns, name), "", "", true});
}

ApiResult<ObjectList> Client::List(const ResourceType& type, const std::string& ns,
                                   const ListOptions& options) {
  ObjectList out;
  ApiResult<std::string> version =
      ListPages(type, ns, options, [&out](std::vector<Object>& items, bool restart) {
        if (restart) out.items.clear();
        for (Object& item : items) out.items.push_back(std::move(item));
      });
  if (!version.ok()) return version.error();
  out.resource_version = std::move(*version);
  return out;
}

ApiResult<std::string> Client::ListPages(const ResourceType& type, const std::string& ns,
                                         const ListOptions& options,
                                         const ListPageHandler& on_page) {
  bool restarted = false;
  bool first_page = true;
  std::string resource_version;
  std::string cont;
  while (true) {
    std::string path = type.CollectionPath(ns);
    AddParam(path, "labelSelector", options.label_selector);
    AddParam(path, "fieldSelector", options.field_selector);
    if (options.page_size > 0) AddParam(path, "limit", std::to_string(options.page_size));
    AddParam(path, "continue", cont);
    ApiResult<Object> page =
        Do({"GET", path, "", "", true}, {{"items"}, {{}, true}}, options.member_filter);
    if (!page.ok()) {
      if (page.error().IsGone() && !cont.empty() && !restarted) {
        // The continue token expired (etcd compacted): start over, once.
        restarted = true;
        first_page = true;
        resource_version.clear();
        cont.clear();
        continue;
      }
      return page.error();
    }
    Object& body = *page;
    if (!body.is_object() || !body.contains("items")) {
      return InvalidResponse(200, "GET " + path + ": the response is not a list");
    }
    std::vector<Object> items;
    if (body["items"].is_array()) {
      items.reserve(body["items"].size());
      for (auto& item : body["items"]) {
        // List items omit apiVersion and kind; fill them in as a watch would.
        if (item.is_object() && !item.contains("apiVersion"))
          item["apiVersion"] = type.ApiVersion();
        if (item.is_object() && !item.contains("kind") && !type.kind.empty()) {
          item["kind"] = type.kind;
        }
        items.push_back(std::move(item));
      }
    }
    const Object& meta = ObjectField(body, "metadata");
    // The first page's resourceVersion describes the whole snapshot.
    if (resource_version.empty()) resource_version = StringField(meta, "resourceVersion");
    cont = StringField(meta, "continue");
    on_page(items, first_page);
    first_page = false;
    if (cont.empty()) return resource_version;
  }
}

ApiResult<Object> Client::Create(const ResourceType& type, const std::string& ns,
                                 const Object& object) {
  return Do({"POST", type.CollectionPath(ns), object.dump(), "application/json", false});
}

ApiResult<Object> Client::Update(const ResourceType& type, const Object& object,
                                 const std::string& subresource) {
  const Object& meta = ObjectField(object, "metadata");
  std::string path = type.ObjectPath(StringField(meta, "namespace"), StringField(meta, "name"));
  if (!subresource.empty()) path += "/" + subresource;
  // A PUT carrying a resourceVersion cannot apply twice; without one it
  // overwrites, which is also the same when repeated.
  return Do({"PUT", path, object.dump(), "application/json", true});
}

ApiResult<Object> Client::Delete(const ResourceType& type, const std::string& ns,
                                 const std::string& name, const DeleteOptions& options) {
  Object body = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
  switch (options.propagation) {
    case Propagation::kDefault:
      break;
    case Propagation::kForeground:
      body["propagationPolicy"] = "Foreground";
      break;
    case Propagation::kBackground:
      body["propagationPolicy"] = "Background";
      break;
    case Propagation::kOrphan:
      body["propagationPolicy"] = "Orphan";
      break;
  }
  if (!options.precondition_uid.empty()) body["preconditions"]["uid"] = options.precondition_uid;
  if (!options.precondition_resource_version.empty()) {
    body["preconditions"]["resourceVersion"] = options.precondition_resource_version;
  }
  return Do({"DELETE", type.ObjectPath(ns, name), body.dump(), "application/json", true});
}

ApiResult<Object> Client::Patch(const ResourceType& type, const std::string& ns,
                                const std::string& name, PatchType patch_type, const Object& patch,
                                const std::string& subresource) {
  std::string path = type.ObjectPath(ns, name);
  if (!subresource.empty()) path += "/" + subresource;
  const char* content_type = patch_type == PatchType::kMerge ? "application/merge-patch+json"
                             : patch_type == PatchType::kJson
                                 ? "application/json-patch+json"
                                 : "application/strategic-merge-patch+json";
  return Do({"PATCH", path, patch.dump(), content_type, false});
}

ApiResult<Object> Client::Apply(const ResourceType& type, const Object& object,
                                const std::string& field_manager, bool force,
                                const std::string& subresource) {
  const Object& meta = ObjectField(object, "metadata");
  std::string path = type.ObjectPath(StringField(meta, "namespace"), StringField(meta, "name"));
  if (!subresource.empty()) path += "/" + subresource;
  AddParam(path, "fieldManager", field_manager);
  if (force) AddParam(path, "force", "true");
  // JSON is YAML, so the apply body can be JSON. Applying is declarative and
  // therefore safe to repeat.
  return Do({"PATCH", path, object.dump(), "application/apply-patch+yaml", true});
}

ApiResult<Object> Client::UpdateWithRetry(const ResourceType& type, const std::string& ns,
                                          const std::string& name,
                                          const std::function<Status(Object&)>& mutate,
                                          const std::string& subresource, int attempts) {
  ApiError last;
  for (int i = 0; i < attempts; ++i) {
    if (i > 0) clock_->SleepUntil(clock_->Now() + std::chrono::milliseconds(10));
    ApiResult<Object> current = Get(type, ns, name);
    if (!current.ok()) return current.error();
    if (Status s = mutate(*current); !s.ok()) {
      ApiError e;
      e.code = 0;
      e.reason = "MutationFailed";
      e.message = s.message();
      return e;
    }
    ApiResult<Object> updated = Update(type, *current, subresource);
    if (updated.ok() || !updated.error().IsConflict()) return updated;
    last = updated.error();
  }
  last.message += " (gave up after " + std::to_string(attempts) + " conflicting attempts)";
  return last;
}

ApiResult<bool> Client::Watch(const ResourceType& type, const std::string& ns,
                              const WatchOptions& options, const EventHandler& on_event,
                              Canceller* canceller) {
  std::string path = type.CollectionPath(ns);
  AddParam(path, "watch", "1");
  AddParam(path, "resourceVersion", options.resource_version);
  AddParam(path, "labelSelector", options.label_selector);
  AddParam(path, "fieldSelector", options.field_selector);
  if (options.allow_bookmarks) AddParam(path, "allowWatchBookmarks", "true");
  if (options.timeout_seconds > 0) {
    AddParam(path, "timeoutSeconds", std::to_string(options.timeout_seconds));
  }
  bool reauthorized = false;
  while (true) {
    net::HttpRequest req;
    req.method = "GET";
    req.path = path;
    if (Status s = Authorize(req, reauthorized); !s.ok()) {
      return TransportError(s.WithContext("credentials"));
    }
    int http_status = 0;
    std::string error_body;
    LineSplitter splitter(options_.max_watch_line_bytes);
    std::optional<ApiError> stream_error;
    bool stopped_by_handler = false;
    net::StreamHandlers handlers;
    handlers.on_response = [&](int status, const net::Headers&) {
      http_status = status;
      return true;
    };
    handlers.on_body = [&](std::string_view piece) {
      if (http_status != 200) {
        if (error_body.size() < (64u << 10)) error_body.append(piece);
        return true;
      }
      Status s = splitter.Feed(piece, [&](std::string_view line) {
        Object event = ParsePruned(line, {{"object"}}, options.member_filter);
        if (options.member_filter && event.is_object() && event.contains("type") &&
            event["type"] == "ERROR") {
          // A Status, not an object of the type watched: the filter is not for it.
          event = ParsePruned(line, {}, nullptr);
        }
        if (!event.is_object() || !event.contains("type") || !event["type"].is_string() ||
            !event.contains("object")) {
          stream_error = InvalidResponse(200, "watch " + type.resource +
                                                  ": the stream sent a line that is not a watch "
                                                  "event (" +
                                                  std::to_string(line.size()) + " bytes)");
          stream_error->code = 0;  // treat like a broken connection: re-watch
          return false;
        }
        const std::string t = event["type"].get<std::string>();
        Object& object = event["object"];
        WatchEventType et;
        if (t == "ADDED") {
          et = WatchEventType::kAdded;
        } else if (t == "MODIFIED") {
          et = WatchEventType::kModified;
        } else if (t == "DELETED") {
          et = WatchEventType::kDeleted;
        } else if (t == "BOOKMARK") {
          et = WatchEventType::kBookmark;
        } else if (t == "ERROR") {
          stream_error = ApiErrorFromStatusObject(object, 500);
          return false;
        } else {
          return true;  // unknown event types are skipped, as client-go does
        }
        if (!on_event(et, object)) {
          stopped_by_handler = true;
          return false;
        }
        return true;
      });
      if (!s.ok()) {
        stream_error = TransportError(s.WithContext("watch " + type.resource));
        return false;
      }
      return !stream_error && !stopped_by_handler;
    };
    Status transport_status = transport_->Stream(req, handlers, canceller);
    if (http_status == 401 && token_source_ && !reauthorized) {
      reauthorized = true;
      continue;
    }
    if (http_status != 0 && http_status != 200) return ParseApiError(http_status, error_body);
    if (stream_error) return *stream_error;
    if (stopped_by_handler) return true;
    if (!transport_status.ok()) return TransportError(transport_status);
    if (splitter.pending() > 0) {
      return TransportError(
          Unavailable("watch " + type.resource + ": the stream ended in the middle of an event"));
    }
    return true;
  }
}

}  // namespace allocguard::kube
