#pragma once

// Records events.k8s.io/v1 Events about objects, as `kubectl describe` and
// `kubectl events` show them. A repeat of the same event (same object, type,
// reason, action and note) within the series window updates the first
// Event's series (count, lastObservedTime) instead of creating another.

#include <map>
#include <mutex>
#include <string>

#include "operator/kube/client.h"

namespace allocguard::kube {

enum class EventType { kNormal, kWarning };

struct EventRecorderOptions {
  std::string reporting_controller = "allocguard.io/operator";
  std::string reporting_instance;  // e.g. the pod name
  Clock::Duration series_window = std::chrono::minutes(6);
};

// Thread-safe.
class EventRecorder {
 public:
  EventRecorder(Client* client, EventRecorderOptions options);

  // regarding: the object the event is about (needs apiVersion, kind,
  // metadata.name; namespace and uid when it has them). reason is
  // UpperCamelCase, note is for people (cut at 1 KiB). Returns the API error
  // if the Event could not be written; callers usually log and go on.
  Status Record(const Object& regarding, EventType type, const std::string& reason,
                const std::string& action, const std::string& note);

 private:
  struct Series {
    std::string event_namespace;
    std::string event_name;
    int count = 0;
    Clock::TimePoint last_seen;
  };

  Client* client_;
  EventRecorderOptions options_;
  Clock* clock_;
  std::mutex mu_;
  std::map<std::string, Series> series_;
};

}  // namespace allocguard::kube
