#pragma once

// An in-memory Kubernetes API server behind kube::Transport, for tests of
// code that talks to the API through the real kube::Client (reconcilers,
// the event recorder). It keeps objects by their REST path and answers as
// the API server does, for what the operator uses:
//   GET object (404 when absent) and collection (a List; all namespaces when
//   the path names none);
//   POST (201; 409 AlreadyExists; metadata.generateName honoured);
//   PUT of the object or of its /status (409 Conflict on a stale
//   metadata.resourceVersion; /status changes only .status, the object
//   everything but .status);
//   PATCH with a JSON merge patch (409 Conflict when the patch carries a
//   metadata.resourceVersion that is not the stored one);
//   DELETE (404; 409 Conflict on failed preconditions uid/resourceVersion).
// Every write sets a new metadata.resourceVersion; a create sets uid,
// generation 1 and creationTimestamp, a change of anything but status and
// metadata bumps generation. Watches are held open until cancelled (nothing
// is streamed). Label selectors and field selectors are not applied.
// Thread-safe.

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/kube/client.h"
#include "operator/kube/transport.h"

namespace allocguard::kube::testing {

class FakeApiServer final : public Transport {
 public:
  struct Request {
    std::string method;
    std::string path;  // without the query
    nlohmann::json body;
  };

  // Stores `object` as if created (no checks); returns it as stored.
  nlohmann::json Seed(const ResourceType& type, nlohmann::json object) {
    std::lock_guard<std::mutex> lock(mu_);
    const Path p = Parse(type.ObjectPath(Ns(object), Name(object)));
    Stamp(object, p, /*created=*/true);
    objects_[p.Key()] = object;
    return object;
  }

  std::optional<nlohmann::json> Get(const ResourceType& type, const std::string& ns,
                                    const std::string& name) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = objects_.find(Parse(type.ObjectPath(ns, name)).Key());
    if (it == objects_.end()) return std::nullopt;
    return it->second;
  }

  // The objects of a collection (ns "" = every namespace), by name.
  std::vector<nlohmann::json> List(const ResourceType& type, const std::string& ns) const {
    std::lock_guard<std::mutex> lock(mu_);
    return ListLocked(Parse(type.CollectionPath(ns)));
  }

  // The requests answered so far, oldest first (watches left out).
  std::vector<Request> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  // The writes (all but GET) answered so far.
  std::vector<Request> writes() const {
    std::vector<Request> out;
    for (Request& r : requests()) {
      if (r.method != "GET") out.push_back(std::move(r));
    }
    return out;
  }

  Result<net::HttpResponse> Send(const net::HttpRequest& request) override {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string path = request.path.substr(0, request.path.find('?'));
    nlohmann::json body = nlohmann::json::parse(request.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded()) body = nullptr;
    requests_.push_back({request.method, path, body});
    Path p = Parse(path);
    if (p.resource.empty()) return Error(404, "NotFound", "no such resource: " + path);
    if (request.method == "GET") return p.name.empty() ? DoList(p) : DoGet(p);
    if (request.method == "POST" && p.name.empty()) return DoCreate(p, std::move(body));
    if (request.method == "PUT" && !p.name.empty()) return DoUpdate(p, std::move(body));
    if (request.method == "PATCH" && !p.name.empty()) return DoPatch(p, body);
    if (request.method == "DELETE" && !p.name.empty()) return DoDelete(p, body);
    return Error(405, "MethodNotAllowed", request.method + " " + path);
  }

  Status Stream(const net::HttpRequest&, const net::StreamHandlers&,
                Canceller* canceller) override {
    while (canceller != nullptr && !canceller->cancelled()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return Unavailable("fake API server: watch cancelled");
  }

 private:
  // A REST path taken apart: /api/v1 or /apis/<group>/<version>, then
  // [namespaces/<ns>/]<resource>[/<name>[/status]].
  struct Path {
    std::string prefix;
    std::string ns;
    std::string resource;
    std::string name;
    bool status = false;
    std::string Key() const { return prefix + "|" + resource + "|" + ns + "|" + name; }
  };

  static std::vector<std::string> Split(const std::string& path) {
    std::vector<std::string> out;
    size_t start = 1;
    while (start <= path.size()) {
      size_t end = path.find('/', start);
      if (end == std::string::npos) end = path.size();
      if (end > start) out.push_back(path.substr(start, end - start));
      start = end + 1;
    }
    return out;
  }

  static Path Parse(const std::string& path) {
    Path p;
    std::vector<std::string> s = Split(path);
    size_t i = 0;
    if (s.size() >= 2 && s[0] == "api") {
      p.prefix = "/api/" + s[1];
      i = 2;
    } else if (s.size() >= 3 && s[0] == "apis") {
      p.prefix = "/apis/" + s[1] + "/" + s[2];
      i = 3;
    } else {
      return p;
    }
    std::vector<std::string> rest(s.begin() + static_cast<std::ptrdiff_t>(i), s.end());
    if (rest.size() >= 3 && rest[0] == "namespaces") {
      p.ns = rest[1];
      rest.erase(rest.begin(), rest.begin() + 2);
    }
    if (rest.empty()) return p;
    p.resource = rest[0];
    if (rest.size() >= 2) p.name = rest[1];
    if (rest.size() >= 3 && rest[2] == "status") p.status = true;
    return p;
  }

  static std::string Member(const nlohmann::json& object, const char* key) {
    const nlohmann::json* meta = Meta(object);
    if (meta == nullptr) return "";
    auto it = meta->find(key);
    return it != meta->end() && it->is_string() ? it->get<std::string>() : "";
  }
  static const nlohmann::json* Meta(const nlohmann::json& object) {
    if (!object.is_object()) return nullptr;
    auto it = object.find("metadata");
    return it != object.end() && it->is_object() ? &*it : nullptr;
  }
  static std::string Ns(const nlohmann::json& object) { return Member(object, "namespace"); }
  static std::string Name(const nlohmann::json& object) { return Member(object, "name"); }

  static nlohmann::json WithoutStatus(nlohmann::json object) {
    if (object.is_object()) {
      object.erase("status");
      object.erase("metadata");
    }
    return object;
  }

  void Stamp(nlohmann::json& object, const Path& p, bool created) {
    nlohmann::json& meta = object["metadata"];
    meta["name"] = p.name;
    if (!p.ns.empty()) meta["namespace"] = p.ns;
    meta["resourceVersion"] = std::to_string(++revision_);
    if (created) {
      if (!meta.contains("uid")) meta["uid"] = "uid-" + std::to_string(revision_);
      if (!meta.contains("generation")) meta["generation"] = 1;
      if (!meta.contains("creationTimestamp")) meta["creationTimestamp"] = "2026-01-01T00:00:00Z";
    }
  }

  static net::HttpResponse Reply(int status, const nlohmann::json& body) {
    net::HttpResponse res;
    res.status = status;
    res.body = body.dump();
    return res;
  }

  static net::HttpResponse Error(int code, const std::string& reason, const std::string& message) {
    return Reply(code, {{"kind", "Status"},
                        {"apiVersion", "v1"},
                        {"status", "Failure"},
                        {"reason", reason},
                        {"message", message},
                        {"code", code}});
  }

  std::vector<nlohmann::json> ListLocked(const Path& collection) const {
    std::vector<nlohmann::json> out;
    for (const auto& [key, object] : objects_) {
      const Path p = Parse(PathOfKey(key));
      if (p.prefix == collection.prefix && p.resource == collection.resource &&
          (collection.ns.empty() || p.ns == collection.ns)) {
        out.push_back(object);
      }
    }
    return out;
  }

  static std::string PathOfKey(const std::string& key) {
    // prefix|resource|ns|name back into a path.
    std::vector<std::string> parts;
    size_t start = 0;
    for (size_t end; (end = key.find('|', start)) != std::string::npos; start = end + 1) {
      parts.push_back(key.substr(start, end - start));
    }
    parts.push_back(key.substr(start));
    std::string path = parts[0];
    if (!parts[2].empty()) path += "/namespaces/" + parts[2];
    return path + "/" + parts[1] + "/" + parts[3];
  }

  net::HttpResponse DoGet(const Path& p) const {
    auto it = objects_.find(p.Key());
    if (it == objects_.end())
      return Error(404, "NotFound", p.resource + " \"" + p.name + "\" not found");
    return Reply(200, it->second);
  }

  net::HttpResponse DoList(const Path& p) const {
    return Reply(200, {{"kind", "List"},
                       {"apiVersion", "v1"},
                       {"metadata", {{"resourceVersion", std::to_string(revision_)}}},
                       {"items", ListLocked(p)}});
  }

  net::HttpResponse DoCreate(Path p, nlohmann::json body) {
    if (!body.is_object()) return Error(400, "BadRequest", "body is not an object");
    p.name = Name(body);
    if (p.name.empty()) {
      const std::string generate = Member(body, "generateName");
      if (generate.empty()) return Error(422, "Invalid", "metadata.name: Required value");
      p.name = generate + std::to_string(revision_ + 1);
    }
    if (objects_.contains(p.Key())) {
      return Error(409, "AlreadyExists", p.resource + " \"" + p.name + "\" already exists");
    }
    body.erase("status");
    Stamp(body, p, /*created=*/true);
    objects_[p.Key()] = body;
    return Reply(201, body);
  }

  net::HttpResponse Write(const Path& p, nlohmann::json next, const nlohmann::json& before) {
    if (WithoutStatus(next) != WithoutStatus(before)) {
      const nlohmann::json* meta = Meta(before);
      int64_t generation = 1;
      if (meta != nullptr && meta->contains("generation") &&
          (*meta)["generation"].is_number_integer()) {
        generation = (*meta)["generation"].get<int64_t>();
      }
      next["metadata"]["generation"] = generation + 1;
    }
    Stamp(next, p, /*created=*/false);
    objects_[p.Key()] = next;
    return Reply(200, next);
  }

  // 409 Conflict when `write` names a resourceVersion other than the stored
  // object's (optimistic concurrency, for PUT and PATCH alike).
  static std::optional<net::HttpResponse> StaleWrite(const Path& p, const nlohmann::json& write,
                                                     const nlohmann::json& before) {
    const std::string seen = Member(write, "resourceVersion");
    if (seen.empty() || seen == Member(before, "resourceVersion")) return std::nullopt;
    return Error(409, "Conflict",
                 "Operation cannot be fulfilled on " + p.resource + " \"" + p.name +
                     "\": the object has been modified; please apply your changes to the "
                     "latest version and try again");
  }

  net::HttpResponse DoUpdate(const Path& p, nlohmann::json body) {
    auto it = objects_.find(p.Key());
    if (it == objects_.end())
      return Error(404, "NotFound", p.resource + " \"" + p.name + "\" not found");
    if (!body.is_object()) return Error(400, "BadRequest", "body is not an object");
    const nlohmann::json before = it->second;
    if (auto stale = StaleWrite(p, body, before)) return *stale;
    nlohmann::json next = before;
    if (p.status) {
      if (body.contains("status")) {
        next["status"] = body["status"];
      } else {
        next.erase("status");
      }
    } else {
      next = body;
      if (before.contains("status")) {
        next["status"] = before["status"];
      } else {
        next.erase("status");
      }
      for (const char* kept : {"uid", "creationTimestamp", "generation"}) {
        if (const nlohmann::json* meta = Meta(before); meta != nullptr && meta->contains(kept)) {
          next["metadata"][kept] = (*meta)[kept];
        }
      }
    }
    return Write(p, std::move(next), before);
  }

  net::HttpResponse DoPatch(const Path& p, const nlohmann::json& patch) {
    auto it = objects_.find(p.Key());
    if (it == objects_.end())
      return Error(404, "NotFound", p.resource + " \"" + p.name + "\" not found");
    if (!patch.is_object()) return Error(400, "BadRequest", "the patch is not an object");
    const nlohmann::json before = it->second;
    if (auto stale = StaleWrite(p, patch, before)) return *stale;
    nlohmann::json next = before;
    if (p.status) {
      nlohmann::json status = before.contains("status") ? before["status"] : nlohmann::json();
      if (patch.contains("status")) status.merge_patch(patch["status"]);
      next["status"] = status;
    } else {
      nlohmann::json applied = patch;
      applied.erase("status");
      next.merge_patch(applied);
    }
    return Write(p, std::move(next), before);
  }

  net::HttpResponse DoDelete(const Path& p, const nlohmann::json& options) {
    auto it = objects_.find(p.Key());
    if (it == objects_.end())
      return Error(404, "NotFound", p.resource + " \"" + p.name + "\" not found");
    if (options.is_object() && options.contains("preconditions") &&
        options["preconditions"].is_object()) {
      const nlohmann::json& pre = options["preconditions"];
      for (const char* key : {"uid", "resourceVersion"}) {
        if (pre.contains(key) && pre[key].is_string() &&
            pre[key].get<std::string>() != Member(it->second, key)) {
          return Error(409, "Conflict",
                       std::string("Precondition failed: ") + key +
                           " in precondition: " + pre[key].get<std::string>() + ", " + key +
                           " in object meta: " + Member(it->second, key));
        }
      }
    }
    nlohmann::json gone = it->second;
    objects_.erase(it);
    return Reply(200, gone);
  }

  mutable std::mutex mu_;
  int64_t revision_ = 0;
  std::map<std::string, nlohmann::json> objects_;  // by Path::Key()
  std::vector<Request> requests_;
};

}  // namespace allocguard::kube::testing
