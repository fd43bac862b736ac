#pragma once

// A plain HTTP server as a Runnable: the health probes (/healthz, /readyz)
// or /metrics, each on its own address and thread.

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "operator/manager/runnable.h"
#include "operator/net/http.h"

namespace allocguard::manager {

class HttpServerRunnable final : public Runnable {
 public:
  // routes registers the handlers; called by Start before the port is bound.
  HttpServerRunnable(std::string name, std::pair<std::string, int> address,
                     std::function<void(net::HttpServer&)> routes);
  ~HttpServerRunnable() override;  // stops

  std::string name() const override { return name_; }
  // Binds (port 0 picks a free one) and serves on a thread.
  Status Start(kube::Canceller* cancel) override;
  void Stop() override;
  // The bound port; 0 before Start.
  int port() const { return server_ == nullptr ? 0 : server_->port(); }

 private:
  std::string name_;
  std::pair<std::string, int> address_;
  std::function<void(net::HttpServer&)> routes_;
  std::unique_ptr<net::HttpServer> server_;
  std::thread thread_;
};

// A text/plain response.
net::HttpResponse TextResponse(int status, const std::string& body);

}  // namespace allocguard::manager
