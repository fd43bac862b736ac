#include <mutex>
#include <vector>

#include "operator/kube/transport.h"

namespace allocguard::kube {
namespace {

class PooledHttpTransport final : public Transport {
 public:
  explicit PooledHttpTransport(HttpTransportOptions options) : options_(std::move(options)) {}

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
      if (!idle_.empty()) {
        auto c = std::move(idle_.back());
        idle_.pop_back();
        return c;
      }
    }
    return net::NewStreamingHttpClient(options_.client);
  }

  void Release(std::unique_ptr<net::StreamingHttpClient> client) {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.size() < kMaxIdle) idle_.push_back(std::move(client));
  }

  static constexpr size_t kMaxIdle = 4;
  HttpTransportOptions options_;
  std::mutex mu_;
  std::vector<std::unique_ptr<net::StreamingHttpClient>> idle_;
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
