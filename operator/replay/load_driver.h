#pragma once

// The open-loop load driver.
//
// Requests go out at their scheduled times whatever the workload's speed:
// a dispatcher releases each request at its offset from the start, and a fixed
// pool of workers (one keep-alive connection each) sends them. When every
// worker is busy, released requests wait in a queue and start late; latency is
// measured from the scheduled time, so a slow workload cannot hide its
// slowness by slowing the load down (no coordinated omission). Late requests
// and the backlog in flight are counted, because a run that fell behind
// measures its backlog, not its allocator.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "operator/common/clock.h"
#include "operator/net/http.h"
#include "operator/replay/load_spec.h"

namespace allocguard::replay {

struct LoadStats {
  int64_t released = 0;   // requests whose scheduled time has come
  int64_t sent = 0;       // requests a worker started
  int64_t completed = 0;  // requests answered or failed
  int64_t late = 0;       // started more than late_after after their scheduled time
  int64_t errors = 0;     // answered outside the expected statuses, or failed in transport
  int64_t in_flight = 0;  // released but not completed: queued + being sent
  // Latency from scheduled time to completion, over completed requests.
  double p50_ms = 0;
  double p99_ms = 0;
  double max_ms = 0;
  // How far after its scheduled time a request started: the driver's own
  // schedule accuracy (and, when workers are all busy, the workload's backlog).
  double start_delay_p50_ms = 0;
  double start_delay_p99_ms = 0;
  double start_delay_max_ms = 0;
};

// One line of <name>.errors: a response outside the request's expected set.
struct UnexpectedResponse {
  double t_seconds = 0;  // scheduled offset
  std::string request_name;
  std::string method;
  std::string path;
  int status = 0;  // 0: no response (transport error)
  std::string detail;
};

using HttpClientFactory = std::function<Result<std::unique_ptr<net::HttpClient>>()>;
using UnexpectedResponseSink = std::function<void(const UnexpectedResponse&)>;

class LoadDriver {
 public:
  // REQUIRES: spec outlives the driver; the sink is thread-safe.
  LoadDriver(const LoadSpec& spec, HttpClientFactory client_factory, Clock* clock,
             UnexpectedResponseSink sink);
  ~LoadDriver();

  LoadDriver(const LoadDriver&) = delete;
  LoadDriver& operator=(const LoadDriver&) = delete;

  // Creates the workers' connections and starts releasing requests.
  Status Start();
  // Stops releasing requests, drops those still queued, and waits for the
  // ones being sent (bounded by the request timeout).
  void Stop();
  // Thread-safe.
  LoadStats Snapshot() const;

 private:
  struct Pending {
    ScheduledRequest request;
    Clock::TimePoint scheduled_at;
  };

  void Dispatch();
  void Work(net::HttpClient* client);
  void Record(const Pending& p, Clock::TimePoint started, int status, const std::string& detail);

  const LoadSpec& spec_;
  HttpClientFactory client_factory_;
  Clock* clock_;
  UnexpectedResponseSink sink_;

  std::vector<std::unique_ptr<net::HttpClient>> clients_;
  std::vector<std::thread> workers_;
  std::thread dispatcher_;
  Clock::TimePoint start_;

  mutable std::mutex mu_;
  std::condition_variable queue_cv_;
  std::deque<Pending> queue_;
  bool stopping_ = false;
  LoadStats stats_;
  std::vector<float> latencies_ms_;
  std::vector<float> start_delays_ms_;
};

}  // namespace allocguard::replay
