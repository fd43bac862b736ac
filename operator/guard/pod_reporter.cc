#include "operator/guard/pod_reporter.h"

#include <algorithm>
#include <utility>

#include "operator/common/rfc3339.h"
#include "operator/kube/client.h"
#include "operator/kube/credentials.h"
#include "operator/kube/event_recorder.h"

namespace allocguard::guard {
namespace {

class KubePodReporter final : public PodReporter {
 public:
  KubePodReporter(kube::Client* client, kube::EventRecorder* events, std::string ns,
                  std::string name, std::string uid)
      : client_(client),
        events_(events),
        ns_(std::move(ns)),
        name_(std::move(name)),
        uid_(std::move(uid)) {}

  Status SetCondition(const PodCondition& c) override {
    kube::Object condition = {
        {"type", c.type},
        {"status", c.status ? "True" : "False"},
        {"reason", c.reason},
        {"message", c.message},
        {"lastTransitionTime", FormatRfc3339(client_->clock()->WallNow(), false)}};
    kube::Object patch = {{"status", {{"conditions", kube::Object::array({condition})}}}};
    auto patched =
        client_->Patch(kube::Pods(), ns_, name_, kube::PatchType::kStrategicMerge, patch, "status");
    if (!patched.ok()) {
      return patched.status().WithContext("setting condition " + c.type + " on pod " + ns_ + "/" +
                                          name_);
    }
    return Status::Ok();
  }

  Status RecordEvent(const PodEvent& e) override {
    kube::Object regarding = {
        {"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", name_}, {"namespace", ns_}}}};
    if (!uid_.empty()) regarding["metadata"]["uid"] = uid_;
    return events_->Record(regarding,
                           e.warning ? kube::EventType::kWarning : kube::EventType::kNormal,
                           e.reason, e.action, e.note);
  }

 private:
  kube::Client* client_;
  kube::EventRecorder* events_;
  std::string ns_, name_, uid_;
};

}  // namespace

std::unique_ptr<PodReporter> NewKubePodReporter(kube::Client* client, kube::EventRecorder* events,
                                                std::string pod_namespace, std::string pod_name,
                                                std::string pod_uid) {
  return std::make_unique<KubePodReporter>(client, events, std::move(pod_namespace),
                                           std::move(pod_name), std::move(pod_uid));
}

AsyncReporter::AsyncReporter(std::unique_ptr<PodReporter> sink, AsyncReporterOptions options)
    : sink_(std::move(sink)),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : RealClock::Get()),
      retry_delay_(options_.initial_retry) {
  worker_ = std::thread([this] { Work(); });
}

AsyncReporter::~AsyncReporter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void AsyncReporter::SetCondition(PodCondition condition) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::string type = condition.type;
    conditions_[type] = std::move(condition);
  }
  cv_.notify_all();
}

void AsyncReporter::RecordEvent(PodEvent event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(event));
    while (events_.size() > std::max<size_t>(1, options_.max_pending_events)) {
      events_.pop_front();
      ++dropped_;
    }
  }
  cv_.notify_all();
}

int64_t AsyncReporter::dropped_events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}
int64_t AsyncReporter::failed_writes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}
int64_t AsyncReporter::completed_writes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_;
}

void AsyncReporter::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (stop_) return;
    const bool conditions_due = !conditions_.empty() && clock_->Now() >= retry_at_;
    if (!conditions_due && events_.empty()) {
      if (conditions_.empty()) {
        cv_.wait(lock);
      } else {
        // Waits for the retry time in short steps: the clock may be a fake.
        cv_.wait_for(lock, std::chrono::milliseconds(50));
      }
      continue;
    }
    if (conditions_due) {
      auto it = conditions_.begin();
      PodCondition condition = it->second;
      conditions_.erase(it);
      lock.unlock();
      Status written = sink_->SetCondition(condition);
      lock.lock();
      if (written.ok()) {
        ++completed_;
        retry_delay_ = options_.initial_retry;
        continue;
      }
      ++failed_;
      // Keep it for a retry unless a newer one of the same type arrived.
      conditions_.try_emplace(condition.type, condition);
      retry_at_ = clock_->Now() + retry_delay_;
      retry_delay_ = std::min(retry_delay_ * 2, options_.max_retry);
      if (options_.log) {
        lock.unlock();
        options_.log(written.message());
        lock.lock();
      }
      continue;
    }
    PodEvent event = std::move(events_.front());
    events_.pop_front();
    lock.unlock();
    Status recorded = sink_->RecordEvent(event);
    if (!recorded.ok() && options_.log)
      options_.log("event " + event.reason + ": " + recorded.message());
    lock.lock();
    if (recorded.ok()) {
      ++completed_;
    } else {
      ++failed_;
    }
  }
}

}  // namespace allocguard::guard
