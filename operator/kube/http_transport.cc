#include <mutex>
#include <vector>

#include "operator/kube/transport.h"

namespace allocguard::kube {
namespace {

class PooledHttpTransport final : public Transport {
 public:
  explicit PooledHttpTransport(HttpTransportOptions options)
      : options_(std::move(options)),
        clock_(options_.clock != nullptr ? options_.clock : RealClock::Get()) {}

  Result<net::HttpResponse> Send(const net::HttpRequest& request) override {
    AG_ASSIGN_OR_RETURN(std::unique_ptr<net::StreamingHttpClient> client, Acquire());
    Result<net::HttpResponse> result = client->Send(request);
    // A failed connection is not returned to the pool: its socket may be dead.
    if (result.ok()) Release(std::move(client));
    return result;
  }

  Status Stream(const net::HttpRequest& request, const net::StreamHandlers& handlers,
                Canceller* canceller) override {
    net::StreamingHttpClientOptions opts = options_.client;
    opts.read_timeout = options_.stream_read_timeout;
    opts.keep_alive = false;
    AG_ASSIGN_OR_RETURN(std::unique_ptr<net::StreamingHttpClient> client,
                        net::NewStreamingHttpClient(opts));
    int id = -1;
    if (canceller != nullptr) {
      net::StreamingHttpClient* raw = client.get();
      id = canceller->Register([raw] { raw->Cancel(); });
    }
    Status status = client->Stream(request, handlers);
    if (canceller != nullptr) canceller->Unregister(id);
    return status;
  }

 private:
  Result<std::unique_ptr<net::StreamingHttpClient>> Acquire() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      const Clock::TimePoint now = clock_->Now();
      while (!idle_.empty()) {
        Idle c = std::move(idle_.back());
        idle_.pop_back();
        if (now - c.since <= options_.max_idle) return std::move(c.client);
      }
    }
    return net::NewStreamingHttpClient(options_.client);
  }

  void Release(std::unique_ptr<net::StreamingHttpClient> client) {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.size() < kMaxIdle) idle_.push_back({std::move(client), clock_->Now()});
  }

  static constexpr size_t kMaxIdle = 4;
  struct Idle {
    std::unique_ptr<net::StreamingHttpClient> client;
    Clock::TimePoint since;
  };
  HttpTransportOptions options_;
  Clock* clock_;
  std::mutex mu_;
  std::vector<Idle> idle_;
};

}  // namespace

Result<std::unique_ptr<Transport>> NewHttpTransport(const HttpTransportOptions& options) {
  // Build one client up front so that bad TLS input fails here, not later.
  auto probe = net::NewStreamingHttpClient(options.client);
  if (!probe.ok()) return probe.status();
  auto transport = std::make_unique<PooledHttpTransport>(options);
  return std::unique_ptr<Transport>(std::move(transport));
}

}  // namespace allocguard::kube
