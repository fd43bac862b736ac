#pragma once

// A rate-limited work queue of string keys with controller-runtime's
// semantics:
//   - Add deduplicates: a key waiting in the queue is queued once.
//   - A key being processed (between Get and Done) is never handed out again
//     until Done; an Add meanwhile re-queues it at Done.
//   - AddRateLimited delays by max(per-key exponential backoff 5 ms * 2^n
//     capped at 1000 s, an overall token bucket of 10/s with burst 100);
//     Forget resets the key's backoff.
//   - AddAfter queues a key once its delay has passed (RequeueAfter); a key
//     already waiting keeps the earlier time.
// Time only through Clock; with a FakeClock, use TryGet()/Len() after
// Advance() instead of the blocking Get().

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "operator/common/clock.h"

namespace allocguard::kube {

struct RateLimiterOptions {
  Clock::Duration base_delay = std::chrono::milliseconds(5);
  Clock::Duration max_delay = std::chrono::seconds(1000);
  double qps = 10;
  int burst = 100;
};

// Thread-safe.
class RateLimiter {
 public:
  explicit RateLimiter(Clock* clock, RateLimiterOptions options = {});
  // The delay before key may be retried; counts a failure of key.
  Clock::Duration When(const std::string& key);
  void Forget(const std::string& key);
  int NumRequeues(const std::string& key) const;

 private:
  Clock* clock_;
  RateLimiterOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, int> failures_;
  double tokens_;
  Clock::TimePoint last_;
};

// Thread-safe.
class WorkQueue {
 public:
  explicit WorkQueue(Clock* clock, RateLimiterOptions options = {});

  void Add(const std::string& key);
  void AddAfter(const std::string& key, Clock::Duration delay);
  void AddRateLimited(const std::string& key);
  void Forget(const std::string& key);
  int NumRequeues(const std::string& key) const;

  // Blocks until a key is ready or the queue shuts down (nullopt).
  // REQUIRES: the caller calls Done(key) when finished with it.
  std::optional<std::string> Get();
  // Non-blocking Get: a ready key, or nullopt.
  std::optional<std::string> TryGet();
  void Done(const std::string& key);

  // Keys ready to be handed out now (waiting ones whose time has come count).
  size_t Len();
  // Keys waiting for their delay to pass.
  size_t Waiting() const;

  // Makes every blocked and later Get() return nullopt; later Adds are
  // ignored.
  void ShutDown();
  bool ShuttingDown() const;

 private:
  void AddLocked(const std::string& key);
  void PromoteLocked();

  Clock* clock_;
  RateLimiter limiter_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::set<std::string> dirty_;
  std::set<std::string> processing_;
  std::map<std::string, Clock::TimePoint> waiting_;  // key -> ready time
  bool shutting_down_ = false;
};

}  // namespace allocguard::kube
