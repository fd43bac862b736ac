#pragma once

// The demo service's behaviour, separate from its main() so that tests can run
// it in-process on port 0: GET /healthz, GET /render, GET /stats and
// GET /ballast (ballast.h: memory held on request, for the guard's tests).

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "e2e/workloads/ballast.h"
#include "e2e/workloads/render_plan.h"
#include "operator/common/clock.h"
#include "operator/net/http.h"

namespace allocguard::workloads {

// The long-lived small objects of all requests. Each is released by the reaper
// once its lifetime is over; with leak set, none is ever released, so the
// process's live data grows without bound under every allocator.
// Thread-safe.
class PinStore {
 public:
  explicit PinStore(bool leak) : leak_(leak) {}

  // Takes ownership of bytes (size bytes, allocated by the calling thread).
  void Add(std::unique_ptr<char[]> bytes, uint32_t size, Clock::TimePoint expires);
  // Frees every object whose deadline is <= now; returns how many. With leak,
  // frees nothing.
  size_t ReleaseExpired(Clock::TimePoint now);

  uint64_t live_count() const;
  uint64_t live_bytes() const;

 private:
  struct Pin {
    std::unique_ptr<char[]> bytes;
    uint32_t size = 0;
  };
  const bool leak_;
  mutable std::mutex mu_;
  std::multimap<Clock::TimePoint, Pin> by_deadline_;
  std::vector<Pin> leaked_;
  uint64_t live_bytes_ = 0;
};

struct RenderServiceOptions {
  PlanOptions plan;
  bool leak = false;
};

// What one /render did; the response body reports it. Deterministic given the
// plan.
struct RenderResult {
  uint64_t checksum = 0;
  uint64_t buffer_bytes = 0;
  uint64_t pin_bytes = 0;
  int threads = 0;
};

class RenderService {
 public:
  // clock must outlive the service. Starts the reaper thread.
  RenderService(const RenderServiceOptions& options, Clock* clock);
  // Stops the reaper. REQUIRES: no request is in flight.
  ~RenderService();
  RenderService(const RenderService&) = delete;
  RenderService& operator=(const RenderService&) = delete;

  // Registers GET /healthz, /render, /stats and /ballast.
  void Register(net::HttpServer& server);

  net::HttpResponse HandleRender(const net::HttpRequest& request);
  net::HttpResponse HandleStats(const net::HttpRequest& request) const;

  // Carries out plan: one thread per ThreadPlan, all alive at once (each waits
  // for the others after its first allocation, as the workers of one decode
  // do). Fails with kUnavailable when the threads cannot be created.
  Result<RenderResult> Execute(const RenderPlan& plan);

 private:
  void Work(const RenderPlan& plan, size_t index, std::latch& started, RenderResult& out);
  void ReapLoop();

  const RenderServiceOptions options_;
  Clock* const clock_;
  PinStore pins_;
  Ballast ballast_;

  std::atomic<uint64_t> requests_{0};
  std::atomic<int> live_threads_{0};
  std::atomic<int> peak_threads_{0};

  std::mutex reaper_mu_;
  std::condition_variable reaper_cv_;
  bool stopping_ = false;
  std::thread reaper_;
};

}  // namespace allocguard::workloads
