#include "operator/webhook/admission_server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>

#include "operator/api/json_fields.h"

namespace allocguard::webhook {
namespace {

// Each request counts under exactly one.
constexpr const char* kOutcomes[] = {"allowed", "denied", "malformed", "handler_error"};

// The object a request is for, as a log names it: namespace/name, with the
// name from the request, else from the object's metadata (a Pod's name is
// not in the request when it is generated), else its generateName prefix.
std::string ObjectOf(const AdmissionRequest& request) {
  using api::json_fields::Member;
  std::string name = request.name;
  const nlohmann::json* metadata = Member(request.object, "metadata");
  auto string_at = [metadata](const char* key) -> std::string {
    const nlohmann::json* value = metadata != nullptr ? Member(*metadata, key) : nullptr;
    return value != nullptr && value->is_string() ? value->get<std::string>() : "";
  };
  if (name.empty()) name = string_at("name");
  if (name.empty()) name = string_at("generateName") + "(generated)";
  return request.namespace_.empty() ? name : request.namespace_ + "/" + name;
}

net::HttpResponse PlainText(int status, std::string text) {
  net::HttpResponse r;
  r.status = status;
  r.headers.emplace("Content-Type", "text/plain; charset=utf-8");
  r.body = std::move(text);
  return r;
}

}  // namespace

AdmissionServer::AdmissionServer(net::HttpServer* server, Clock* clock, metrics::Registry* metrics)
    : server_(server), clock_(clock != nullptr ? clock : RealClock::Get()) {
  server_->Handle("GET", "/healthz", [](const net::HttpRequest&) { return PlainText(200, "ok"); });
  if (metrics != nullptr) {
    requests_total_ = &metrics->AddCounter(
        "allocguard_webhook_requests_total",
        "Admission requests by webhook path and outcome (allowed, denied, malformed, "
        "handler_error).",
        {"path", "outcome"});
    latency_seconds_ = &metrics->AddHistogram(
        "allocguard_webhook_latency_seconds", "Time taken to answer an admission request.",
        {"path"},
        std::vector<double>(kLatencyBucketsSeconds.begin(), kLatencyBucketsSeconds.end()));
    slow_requests_total_ =
        &metrics->AddCounter("allocguard_webhook_slow_requests_total",
                             "Admission requests that took at least the slow-request threshold "
                             "(--webhook-slow-request) to answer; each is logged.",
                             {"path"});
  }
}

void AdmissionServer::Handle(const std::string& path, AdmissionHandler handler,
                             FailurePolicy on_error) {
  auto route = std::make_shared<const Route>(Route{std::move(handler), on_error});
  routes_[path] = route;
  {
    std::lock_guard<std::mutex> lock(mu_);
    metrics_[path];  // a registered path shows in metrics before its first request
  }
  if (requests_total_ != nullptr) {
    for (const char* outcome : kOutcomes) requests_total_->With({path, outcome});
    latency_seconds_->With({path});
    slow_requests_total_->With({path});
  }
  server_->Handle("POST", path, [this, path, route](const net::HttpRequest& request) {
    return Answer(path, *route, request.body);
  });
}

net::HttpResponse AdmissionServer::Review(const std::string& path, const std::string& body) {
  auto it = routes_.find(path);
  if (it == routes_.end()) return PlainText(404, "no admission handler for " + path);
  return Answer(path, *it->second, body);
}

net::HttpResponse AdmissionServer::Answer(const std::string& path, const Route& route,
                                          const std::string& body) {
  Timing timing;
  timing.start = clock_->Now();
  Result<AdmissionRequest> request = ParseAdmissionReview(body);
  timing.parsed = clock_->Now();
  if (!request.ok()) {
    timing.decided = timing.encoded = timing.parsed;
    Record(path, timing, /*request=*/nullptr, false, false);
    return PlainText(400, "malformed AdmissionReview: " + request.status().message());
  }
  AdmissionResponse response;
  bool threw = false;
  std::string error;
  try {
    response = route.handler(*request);
  } catch (const std::exception& e) {
    threw = true;
    error = e.what();
  } catch (...) {
    threw = true;
    error = "unknown exception";
  }
  if (threw) {
    if (route.on_error == FailurePolicy::kIgnore) {
      response = AdmissionResponse::Allow();
      response.warnings.push_back("allocguard: admission handler failed, admitted unchanged: " +
                                  error);
    } else {
      response = AdmissionResponse::Deny("allocguard: admission handler failed: " + error);
      response.status_code = 500;
      response.status_reason = "InternalError";
    }
  }
  timing.decided = clock_->Now();
  net::HttpResponse out;
  out.status = 200;
  out.headers.emplace("Content-Type", "application/json");
  out.body = EncodeAdmissionReview(request->uid, response);
  timing.encoded = clock_->Now();
  Record(path, timing, &*request, threw, response.allowed);
  return out;
}

void AdmissionServer::Record(const std::string& path, const Timing& timing,
                             const AdmissionRequest* request, bool threw, bool allowed) {
  const bool malformed = request == nullptr;
  const Clock::Duration took = timing.encoded - timing.start;
  const double seconds = std::chrono::duration<double>(took).count();
  const bool slow = slow_threshold_ > Clock::Duration::zero() && took >= slow_threshold_;
  uint64_t left_out = 0;
  if (slow && TakeSlowLogLine(timing.encoded, &left_out)) {
    LogSlow(path, timing, request, allowed, left_out);
  }
  std::lock_guard<std::mutex> lock(mu_);
  PathMetrics& m = metrics_[path];
  ++m.requests;
  if (malformed) {
    ++m.malformed;
  } else if (allowed) {
    ++m.allowed;
  } else {
    ++m.denied;
  }
  if (threw) ++m.handler_errors;
  if (slow) ++m.slow;
  if (requests_total_ != nullptr) {
    const char* outcome = malformed ? "malformed"
                          : threw   ? "handler_error"
                          : allowed ? "allowed"
                                    : "denied";
    requests_total_->With({path, outcome}).Inc();
    latency_seconds_->With({path}).Observe(seconds);
    if (slow) slow_requests_total_->With({path}).Inc();
  }
  m.latency_seconds_sum += seconds;
  m.latency_seconds_max = std::max(m.latency_seconds_max, seconds);
  for (size_t i = 0; i < kLatencyBucketsSeconds.size(); ++i) {
    if (seconds <= kLatencyBucketsSeconds[i]) ++m.latency_buckets[i];
  }
}

// A generic cell rate algorithm: slow_log_due_ is when the limit would have
// regained every line written so far. A line may be written while that is at
// most burst - 1 refills ahead of now.
bool AdmissionServer::TakeSlowLogLine(Clock::TimePoint now, uint64_t* left_out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (slow_log_burst_ > 0) {
    const Clock::TimePoint due = std::max(slow_log_due_, now);
    if (due - now > (slow_log_burst_ - 1) * slow_log_refill_) {
      ++slow_log_left_out_;
      return false;
    }
    slow_log_due_ = due + slow_log_refill_;
  }
  *left_out = std::exchange(slow_log_left_out_, 0);
  return true;
}

void AdmissionServer::LogSlow(const std::string& path, const Timing& timing,
                              const AdmissionRequest* request, bool allowed,
                              uint64_t left_out) const {
  auto ms = [](Clock::Duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::string what = "a malformed review";
  if (request != nullptr) {
    what = request->operation + " " + request->kind.kind + " " + ObjectOf(*request) + " (uid " +
           request->uid + ", " + (allowed ? "allowed" : "denied") + ")";
  }
  spdlog::warn(
      "slow admission request on {}: {} answered in {:.1f} ms (parse {:.1f} ms, decision {:.1f} "
      "ms, encoding {:.1f} ms); the threshold is {:.0f} ms (--webhook-slow-request){}",
      path, what, ms(timing.encoded - timing.start), ms(timing.parsed - timing.start),
      ms(timing.decided - timing.parsed), ms(timing.encoded - timing.decided), ms(slow_threshold_),
      left_out == 0 ? std::string()
                    : fmt::format("; {} more slow requests were not logged since the last line "
                                  "(at most {} lines at once, then one every {:.0f} s)",
                                  left_out, slow_log_burst_,
                                  std::chrono::duration<double>(slow_log_refill_).count()));
}

AdmissionMetricsSnapshot AdmissionServer::Metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  return AdmissionMetricsSnapshot{metrics_};
}

}  // namespace allocguard::webhook
