#include "operator/manager/http_server_runnable.h"

namespace allocguard::manager {

HttpServerRunnable::HttpServerRunnable(std::string name, std::pair<std::string, int> address,
                                       std::function<void(net::HttpServer&)> routes)
    : name_(std::move(name)), address_(std::move(address)), routes_(std::move(routes)) {}

HttpServerRunnable::~HttpServerRunnable() { Stop(); }

Status HttpServerRunnable::Start(kube::Canceller* /*cancel*/) {
  net::HttpServerOptions options;
  options.host = address_.first;
  options.port = address_.second;
  options.worker_threads = 2;
  server_ = net::NewHttpServer(options);
  routes_(*server_);
  AG_RETURN_IF_ERROR(server_->Bind());
  thread_ = std::thread([this] { server_->Serve(); });
  return Status::Ok();
}

void HttpServerRunnable::Stop() {
  if (server_ != nullptr) server_->Stop();
  if (thread_.joinable()) thread_.join();
}

net::HttpResponse TextResponse(int status, const std::string& body) {
  net::HttpResponse r;
  r.status = status;
  r.body = body;
  r.headers.emplace("Content-Type", "text/plain; charset=utf-8");
  return r;
}

}  // namespace allocguard::manager
