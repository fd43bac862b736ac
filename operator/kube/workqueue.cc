#include "operator/kube/workqueue.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace allocguard::kube {

RateLimiter::RateLimiter(Clock* clock, RateLimiterOptions options)
    : clock_(clock), options_(options), tokens_(options.burst), last_(clock->Now()) {}

Clock::Duration RateLimiter::When(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  // Per key: base * 2^failures, capped.
  int exp = failures_[key]++;
  double factor = std::pow(2.0, std::min(exp, 62));
  double per_item_ns =
      std::chrono::duration<double, std::nano>(options_.base_delay).count() * factor;
  double max_ns = std::chrono::duration<double, std::nano>(options_.max_delay).count();
  auto per_item = std::chrono::duration_cast<Clock::Duration>(
      std::chrono::duration<double, std::nano>(std::min(per_item_ns, max_ns)));
  // Overall: a token bucket; a reservation beyond the burst waits its turn.
  Clock::TimePoint now = clock_->Now();
  double elapsed = std::chrono::duration<double>(now - last_).count();
  last_ = now;
  tokens_ = std::min<double>(options_.burst, tokens_ + elapsed * options_.qps);
  tokens_ -= 1;
  Clock::Duration bucket{0};
  if (tokens_ < 0) {
    bucket = std::chrono::duration_cast<Clock::Duration>(
        std::chrono::duration<double>(-tokens_ / options_.qps));
  }
  return std::max(per_item, bucket);
}

void RateLimiter::Forget(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  failures_.erase(key);
}

int RateLimiter::NumRequeues(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

WorkQueue::WorkQueue(Clock* clock, RateLimiterOptions options)
    : clock_(clock), limiter_(clock, options) {}

void WorkQueue::AddLocked(const std::string& key) {
  if (shutting_down_ || dirty_.contains(key)) return;
  dirty_.insert(key);
  if (processing_.contains(key)) return;  // re-queued by Done()
  queue_.push_back(key);
  cv_.notify_one();
}

void WorkQueue::PromoteLocked() {
  Clock::TimePoint now = clock_->Now();
  // Ready keys in ready-time order, so earlier requests go first.
  std::vector<std::pair<Clock::TimePoint, std::string>> ready;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->second <= now) {
      ready.emplace_back(it->second, it->first);
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  std::sort(ready.begin(), ready.end());
  for (const auto& [t, key] : ready) AddLocked(key);
}

void WorkQueue::Add(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  AddLocked(key);
}

void WorkQueue::AddAfter(const std::string& key, Clock::Duration delay) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shutting_down_) return;
  if (delay <= Clock::Duration::zero()) {
    AddLocked(key);
    return;
  }
  Clock::TimePoint ready = clock_->Now() + delay;
  auto it = waiting_.find(key);
  if (it == waiting_.end() || ready < it->second) waiting_[key] = ready;
  cv_.notify_all();  // a blocked Get() must re-compute its wake-up time
}

void WorkQueue::AddRateLimited(const std::string& key) { AddAfter(key, limiter_.When(key)); }

void WorkQueue::Forget(const std::string& key) { limiter_.Forget(key); }

int WorkQueue::NumRequeues(const std::string& key) const { return limiter_.NumRequeues(key); }

std::optional<std::string> WorkQueue::TryGet() {
  std::lock_guard<std::mutex> lock(mu_);
  PromoteLocked();
  if (shutting_down_ || queue_.empty()) return std::nullopt;
  std::string key = queue_.front();
  queue_.pop_front();
  processing_.insert(key);
  dirty_.erase(key);
  return key;
}

std::optional<std::string> WorkQueue::Get() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    PromoteLocked();
    if (shutting_down_) return std::nullopt;
    if (!queue_.empty()) {
      std::string key = queue_.front();
      queue_.pop_front();
      processing_.insert(key);
      dirty_.erase(key);
      return key;
    }
    if (waiting_.empty()) {
      cv_.wait(lock);
    } else {
      Clock::TimePoint next = Clock::TimePoint::max();
      for (const auto& [k, t] : waiting_) next = std::min(next, t);
      // Wait in real time for at most 50 ms, so that a FakeClock moved by
      // another thread is noticed too.
      auto wait = std::min<Clock::Duration>(next - clock_->Now(), std::chrono::milliseconds(50));
      if (wait > Clock::Duration::zero()) cv_.wait_for(lock, wait);
    }
  }
}

void WorkQueue::Done(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  processing_.erase(key);
  if (dirty_.contains(key) && !shutting_down_) {
    queue_.push_back(key);
    cv_.notify_one();
  }
}

size_t WorkQueue::Len() {
  std::lock_guard<std::mutex> lock(mu_);
  PromoteLocked();
  return queue_.size();
}

size_t WorkQueue::Waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_.size();
}

void WorkQueue::ShutDown() {
  std::lock_guard<std::mutex> lock(mu_);
  shutting_down_ = true;
  cv_.notify_all();
}

bool WorkQueue::ShuttingDown() const {
  std::lock_guard<std::mutex> lock(mu_);
  return shutting_down_;
}

}  // namespace allocguard::kube
