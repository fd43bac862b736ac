#pragma once

// How the guard tells Kubernetes what it saw: pod status conditions (the
// readiness gate, the allocator check) and events on its pod.
//
// PodReporter is the narrow interface to the API server. AsyncReporter puts
// it on its own thread behind a bounded queue, so the sampling loop only ever
// takes a short lock: a slow or unreachable API server delays reports, never
// a sample (seed 003: a guard on a blocking loop does not guard).

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "operator/api/names.h"
#include "operator/common/clock.h"
#include "operator/common/status.h"

namespace allocguard::kube {
class Client;
class EventRecorder;
}  // namespace allocguard::kube

namespace allocguard::guard {

// Condition types the guard writes on its pod (api/names.h, shared with the
// injection, which adds the readiness gate).
using api::kAllocatorLoadedCondition;
using api::kAllocatorRetainingCondition;
using api::kHeapGrowingCondition;
using api::kMemoryHeadroomCondition;

struct PodCondition {
  std::string type;
  bool status = false;
  std::string reason;  // UpperCamelCase
  std::string message;
};

struct PodEvent {
  bool warning = false;
  std::string reason;  // UpperCamelCase
  std::string action;  // e.g. "Restart", "Check"
  std::string note;
};

class PodReporter {
 public:
  virtual ~PodReporter() = default;
  // Sets one condition in the pod's status (other conditions untouched).
  virtual Status SetCondition(const PodCondition& condition) = 0;
  virtual Status RecordEvent(const PodEvent& event) = 0;
};

// Writes to the pod named by pod_name/pod_namespace (pod_uid, when known, ties
// events to this incarnation of the pod). Conditions go through a strategic
// merge patch of pods/status keyed by condition type; events through
// kube::EventRecorder. RBAC needed: pods/status patch, events create/patch.
std::unique_ptr<PodReporter> NewKubePodReporter(kube::Client* client, kube::EventRecorder* events,
                                                std::string pod_namespace, std::string pod_name,
                                                std::string pod_uid);

struct AsyncReporterOptions {
  size_t max_pending_events = 64;  // beyond this the oldest pending event is dropped
  // A failed condition write is retried after this, doubling up to the max.
  Clock::Duration initial_retry = std::chrono::seconds(1);
  Clock::Duration max_retry = std::chrono::seconds(30);
  Clock* clock = nullptr;                       // nullptr: the real clock
  std::function<void(const std::string&)> log;  // failures, for people; may be empty
};

// Thread-safe. SetCondition and RecordEvent never wait for the API server.
class AsyncReporter {
 public:
  AsyncReporter(std::unique_ptr<PodReporter> sink, AsyncReporterOptions options);
  // Stops the worker after the call in flight returns; pending reports are
  // dropped.
  ~AsyncReporter();
  AsyncReporter(const AsyncReporter&) = delete;
  AsyncReporter& operator=(const AsyncReporter&) = delete;

  // The latest condition per type wins: a condition not yet written is
  // replaced, so the queue holds at most one entry per type. Failed writes
  // are retried until they succeed or a newer condition replaces them.
  void SetCondition(PodCondition condition);
  void RecordEvent(PodEvent event);

  int64_t dropped_events() const;
  int64_t failed_writes() const;
  int64_t completed_writes() const;

 private:
  void Work();

  std::unique_ptr<PodReporter> sink_;
  AsyncReporterOptions options_;
  Clock* clock_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::map<std::string, PodCondition> conditions_;  // pending, by type
  std::deque<PodEvent> events_;
  Clock::TimePoint retry_at_{};
  Clock::Duration retry_delay_{};
  int64_t dropped_ = 0;
  int64_t failed_ = 0;
  int64_t completed_ = 0;
  std::thread worker_;
};

}  // namespace allocguard::guard
