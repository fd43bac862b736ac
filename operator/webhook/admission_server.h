#pragma once

// Admission webhook plumbing on an HttpServer: one handler per path, parsing
// and encoding of AdmissionReviews, errors answered instead of crashing, and
// per-path counters for the metrics endpoint. GET /healthz answers 200.
//
// With a metrics registry, per path:
//   allocguard_webhook_requests_total{path,outcome}  outcome is one of
//       allowed, denied (the handler rejected the request), malformed (HTTP
//       400), handler_error (the handler threw; answered per FailurePolicy);
//       each request counts under exactly one, all start at 0
//   allocguard_webhook_latency_seconds{path}  histogram of the time from
//       receiving the body to the encoded answer (kLatencyBucketsSeconds)
//   allocguard_webhook_slow_requests_total{path}  requests whose time was at
//       or above the slow-request threshold; each is also logged as a
//       warning naming the object and splitting the time into parsing the
//       review, the handler's decision and encoding the answer, at most
//       kSlowLogBurst lines at once and then one per kSlowLogRefill (a user
//       who can make reviews slow cannot flood the log); the next line that
//       is written says how many were left out

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "operator/common/clock.h"
#include "operator/metrics/registry.h"
#include "operator/net/http.h"
#include "operator/webhook/admission_review.h"

namespace allocguard::webhook {

using AdmissionHandler = std::function<AdmissionResponse(const AdmissionRequest&)>;

// What a handler that throws answers. It mirrors the failurePolicy of the
// webhook's configuration: kIgnore admits (with a warning), kFail denies
// (with a 500 status naming the error).
enum class FailurePolicy { kIgnore, kFail };

// Latency bucket upper bounds in seconds (controller-runtime's webhook
// buckets, finer at the low end).
inline constexpr std::array<double, 12> kLatencyBucketsSeconds = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};

// The slow-request warnings are rate-limited across every path: by default
// kSlowLogBurst lines at once, then one more per kSlowLogRefill. The counter
// above counts every slow request whether logged or not.
inline constexpr int kSlowLogBurst = 10;
inline constexpr std::chrono::seconds kSlowLogRefill{1};

struct PathMetrics {
  uint64_t requests = 0;        // every POST to the path
  uint64_t allowed = 0;         // answered allowed=true
  uint64_t denied = 0;          // answered allowed=false
  uint64_t malformed = 0;       // answered HTTP 400
  uint64_t handler_errors = 0;  // the handler threw
  uint64_t slow = 0;            // at or above the slow-request threshold
  double latency_seconds_sum = 0;
  double latency_seconds_max = 0;
  // Cumulative: latency_buckets[i] counts requests of latency <=
  // kLatencyBucketsSeconds[i] (Prometheus "le"); requests is the +Inf bucket.
  std::array<uint64_t, kLatencyBucketsSeconds.size()> latency_buckets{};
};

struct AdmissionMetricsSnapshot {
  std::map<std::string, PathMetrics> paths;
};

class AdmissionServer {
 public:
  // Registers GET /healthz on server. server, clock (nullptr: the real
  // clock) and metrics (nullptr: none) must outlive this object.
  explicit AdmissionServer(net::HttpServer* server, Clock* clock = nullptr,
                           metrics::Registry* metrics = nullptr);

  // A request that takes at least this long from its body to its encoded
  // answer is counted as slow and logged (a warning). Zero or less: none is.
  // REQUIRES: called before the server starts serving.
  void set_slow_request_threshold(Clock::Duration threshold) { slow_threshold_ = threshold; }
  // At most burst slow-request lines at once, then one more per refill; a
  // burst of 0 or less logs every slow request (for benchmarks that study
  // each one). REQUIRES: called before the server starts serving.
  void set_slow_log_limit(int burst, Clock::Duration refill) {
    slow_log_burst_ = burst;
    slow_log_refill_ = refill;
  }

  // Serves POST path with handler. REQUIRES: called before the server starts
  // serving. handler runs on the server's worker threads; it must be
  // thread-safe. It may throw: the request is then answered as on_error says.
  void Handle(const std::string& path, AdmissionHandler handler,
              FailurePolicy on_error = FailurePolicy::kIgnore);

  // Thread-safe.
  AdmissionMetricsSnapshot Metrics() const;

  // The whole answer to one POST of path (as the server would give it), for
  // tests and benchmarks without sockets. REQUIRES: path was registered.
  net::HttpResponse Review(const std::string& path, const std::string& body);

 private:
  struct Route {
    AdmissionHandler handler;
    FailurePolicy on_error;
  };
  net::HttpResponse Answer(const std::string& path, const Route& route, const std::string& body);
  // The time of one answer, split at the end of parsing and of the handler.
  struct Timing {
    Clock::TimePoint start, parsed, decided, encoded;
  };
  // Counts one answer (request: nullptr for a malformed review) and, when
  // it took the slow-request threshold or more, logs it.
  void Record(const std::string& path, const Timing& timing, const AdmissionRequest* request,
              bool threw, bool allowed);
  // Whether a slow request seen at now may be logged; when it may, *left_out
  // is how many were not logged since the last line. Takes mu_.
  bool TakeSlowLogLine(Clock::TimePoint now, uint64_t* left_out);
  void LogSlow(const std::string& path, const Timing& timing, const AdmissionRequest* request,
               bool allowed, uint64_t left_out) const;

  net::HttpServer* server_;
  Clock* clock_;
  std::map<std::string, std::shared_ptr<const Route>> routes_;  // written before serving
  mutable std::mutex mu_;
  std::map<std::string, PathMetrics> metrics_;
  metrics::Counter* requests_total_ = nullptr;  // null without a registry
  metrics::Histogram* latency_seconds_ = nullptr;
  metrics::Counter* slow_requests_total_ = nullptr;
  Clock::Duration slow_threshold_ = std::chrono::milliseconds(100);
  // The slow-request log's rate limit (guarded by mu_; TakeSlowLogLine) and
  // the slow requests not logged since the last line.
  int slow_log_burst_ = kSlowLogBurst;
  Clock::Duration slow_log_refill_ = kSlowLogRefill;
  Clock::TimePoint slow_log_due_{};
  uint64_t slow_log_left_out_ = 0;
};

}  // namespace allocguard::webhook
