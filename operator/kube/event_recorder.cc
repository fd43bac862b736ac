#include "operator/kube/event_recorder.h"

#include <cstdio>

#include "operator/common/rfc3339.h"

namespace allocguard::kube {

EventRecorder::EventRecorder(Client* client, EventRecorderOptions options)
    : client_(client), options_(std::move(options)), clock_(client->clock()) {}

Status EventRecorder::Record(const Object& regarding, EventType type, const std::string& reason,
                             const std::string& action, const std::string& note_in) {
  const Object& meta = ObjectField(regarding, "metadata");
  const std::string name = StringField(meta, "name");
  if (name.empty()) return InvalidArgument("an event needs the name of the object it is about");
  std::string ns = StringField(meta, "namespace");
  const std::string event_ns = ns.empty() ? "default" : ns;
  std::string note = note_in.size() > 1024 ? note_in.substr(0, 1021) + "..." : note_in;
  const char* type_name = type == EventType::kWarning ? "Warning" : "Normal";
  const std::string key = (StringField(meta, "uid").empty() ? name : StringField(meta, "uid")) +
                          "\x1f" + type_name + "\x1f" + reason + "\x1f" + action + "\x1f" + note;
  const std::string now = FormatRfc3339(clock_->WallNow(), /*micros=*/true);

  std::unique_lock<std::mutex> lock(mu_);
  auto it = series_.find(key);
  if (it != series_.end() && clock_->Now() - it->second.last_seen < options_.series_window) {
    Series& s = it->second;
    s.count += 1;
    s.last_seen = clock_->Now();
    Object patch = {{"series", {{"count", s.count}, {"lastObservedTime", now}}}};
    std::string ens = s.event_namespace;
    std::string ename = s.event_name;
    lock.unlock();
    ApiResult<Object> patched = client_->Patch(EventsV1(), ens, ename, PatchType::kMerge, patch);
    if (patched.ok()) return Status::Ok();
    if (!patched.error().IsNotFound()) return patched.status();
    lock.lock();
    series_.erase(key);  // the Event expired (TTL): start a new one
  } else if (it != series_.end()) {
    series_.erase(it);
  }

  char suffix[32];
  std::snprintf(
      suffix, sizeof suffix, ".%llx",
      static_cast<unsigned long long>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(clock_->WallNow().time_since_epoch())
              .count()));
  Object involved = {{"apiVersion", StringField(regarding, "apiVersion")},
                     {"kind", StringField(regarding, "kind")},
                     {"name", name}};
  if (!ns.empty()) involved["namespace"] = ns;
  if (meta.contains("uid")) involved["uid"] = meta["uid"];
  if (meta.contains("resourceVersion")) involved["resourceVersion"] = meta["resourceVersion"];
  Object event = {
      {"apiVersion", "events.k8s.io/v1"},
      {"kind", "Event"},
      {"metadata", {{"name", name + suffix}, {"namespace", event_ns}}},
      {"eventTime", now},
      {"reportingController", options_.reporting_controller},
      {"reportingInstance", options_.reporting_instance.empty() ? options_.reporting_controller
                                                                : options_.reporting_instance},
      {"action", action},
      {"reason", reason},
      {"note", note},
      {"type", type_name},
      {"regarding", involved}};
  lock.unlock();
  ApiResult<Object> created = client_->Create(EventsV1(), event_ns, event);
  if (!created.ok()) return created.status();
  lock.lock();
  series_[key] = {event_ns, name + suffix, 1, clock_->Now()};
  return Status::Ok();
}

}  // namespace allocguard::kube
