#include "operator/webhook/admission_server.h"

#include <exception>

namespace allocguard::webhook {
namespace {

// Each request counts under exactly one.
constexpr const char* kOutcomes[] = {"allowed", "denied", "malformed", "handler_error"};

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
  const Clock::TimePoint start = clock_->Now();
  Result<AdmissionRequest> request = ParseAdmissionReview(body);
  if (!request.ok()) {
    Record(path, clock_->Now() - start, /*malformed=*/true, false, false);
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
  net::HttpResponse out;
  out.status = 200;
  out.headers.emplace("Content-Type", "application/json");
  out.body = EncodeAdmissionReview(request->uid, response);
  Record(path, clock_->Now() - start, false, threw, response.allowed);
  return out;
}

void AdmissionServer::Record(const std::string& path, Clock::Duration latency, bool malformed,
                             bool threw, bool allowed) {
  const double seconds = std::chrono::duration<double>(latency).count();
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
  if (requests_total_ != nullptr) {
    const char* outcome = malformed ? "malformed"
                          : threw   ? "handler_error"
                          : allowed ? "allowed"
                                    : "denied";
    requests_total_->With({path, outcome}).Inc();
    latency_seconds_->With({path}).Observe(seconds);
  }
  m.latency_seconds_sum += seconds;
  for (size_t i = 0; i < kLatencyBucketsSeconds.size(); ++i) {
    if (seconds <= kLatencyBucketsSeconds[i]) ++m.latency_buckets[i];
  }
}

AdmissionMetricsSnapshot AdmissionServer::Metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  return AdmissionMetricsSnapshot{metrics_};
}

}  // namespace allocguard::webhook
