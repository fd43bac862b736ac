#include "operator/manager/webhook_server.h"

namespace allocguard::manager {
namespace {

// AdmissionServer answers it on a worker, like a review.
constexpr char kSelfProbePath[] = "/healthz";

}  // namespace

std::string SelfProbeUrl(const std::string& host, int port) {
  std::string h = host;
  if (h.empty() || h == "0.0.0.0") h = "127.0.0.1";
  if (h == "::") h = "::1";
  if (h.find(':') != std::string::npos) h = "[" + h + "]";
  return "https://" + h + ":" + std::to_string(port);
}

WebhookServer::WebhookServer(WebhookServerOptions options) : options_(std::move(options)) {
  if (options_.clock == nullptr) options_.clock = RealClock::Get();
}

WebhookServer::~WebhookServer() { Stop(); }

Status WebhookServer::Start() {
  net::HttpsServerOptions so;
  so.host = options_.host;
  so.port = options_.port;
  so.worker_threads = options_.worker_threads;
  so.key_pair = certs::TlsKeyPairProviderOf(options_.certificates);
  so.heartbeat = &loop_heartbeat_;
  AG_ASSIGN_OR_RETURN(server_, net::NewHttpsServer(so));
  admission_ =
      std::make_unique<webhook::AdmissionServer>(server_.get(), options_.clock, options_.metrics);
  admission_->set_slow_request_threshold(options_.slow_request);
  options_.routes(*admission_);
  AG_RETURN_IF_ERROR(server_->Bind());
  probe_ = std::make_unique<SelfProbe>(
      SelfProbeOptions{.base_url = SelfProbeUrl(options_.host, server_->port()),
                       .path = kSelfProbePath,
                       .clock = options_.clock});
  thread_ = std::thread([this] { server_->Serve(); });
  serving_ = true;
  return Status::Ok();
}

void WebhookServer::Stop() {
  if (server_ != nullptr) server_->Stop();
  if (thread_.joinable()) thread_.join();
  serving_ = false;
}

bool WebhookServer::Ready(std::string* why) const {
  if (!serving_) {
    *why = "the TLS server is not serving";
    return false;
  }
  if (options_.certificates->Current() == nullptr) {
    *why = "no certificate";
    return false;
  }
  Status answered = probe_->Check();
  if (!answered.ok()) {
    *why = answered.message();
    return false;
  }
  return true;
}

Clock::Duration WebhookServer::StalledFor(Clock::TimePoint now) const {
  return serving_ ? loop_heartbeat_.StalledFor(now) : Clock::Duration::zero();
}

int WebhookServer::port() const { return server_ == nullptr ? 0 : server_->port(); }

}  // namespace allocguard::manager
