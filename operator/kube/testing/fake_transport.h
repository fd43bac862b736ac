#pragma once

// A scripted Transport for unit tests: each request is answered by the next
// queued reply for its method, in order, and every request is recorded.

#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "operator/kube/transport.h"

namespace allocguard::kube::testing {

struct FakeReply {
  // A transport failure when !transport_ok.
  bool transport_ok = true;
  int status = 200;
  net::Headers headers;
  // For Send: the body. For Stream: the body as the pieces it arrives in.
  std::vector<std::string> pieces;
  // For Stream: fail with a transport error after the pieces.
  bool stream_breaks = false;

  static FakeReply Json(int status, const std::string& body) {
    FakeReply r;
    r.status = status;
    r.pieces = {body};
    return r;
  }
  static FakeReply Broken() {
    FakeReply r;
    r.transport_ok = false;
    return r;
  }
};

class FakeTransport final : public Transport {
 public:
  void Queue(FakeReply reply) {
    std::lock_guard<std::mutex> lock(mu_);
    replies_.push_back(std::move(reply));
  }
  void QueueStream(FakeReply reply) {
    std::lock_guard<std::mutex> lock(mu_);
    streams_.push_back(std::move(reply));
  }

  Result<net::HttpResponse> Send(const net::HttpRequest& request) override {
    FakeReply reply;
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(request);
      if (replies_.empty()) return Unavailable("fake transport: no reply queued");
      reply = std::move(replies_.front());
      replies_.pop_front();
    }
    if (!reply.transport_ok) return Unavailable("fake transport: connection reset");
    net::HttpResponse res;
    res.status = reply.status;
    res.headers = reply.headers;
    for (const auto& p : reply.pieces) res.body += p;
    return res;
  }

  Status Stream(const net::HttpRequest& request, const net::StreamHandlers& handlers,
                Canceller* canceller) override {
    FakeReply reply;
    {
      std::unique_lock<std::mutex> lock(mu_);
      requests_.push_back(request);
      if (streams_.empty()) {
        // Nothing scripted: behave like a server holding the watch open.
        lock.unlock();
        while (canceller != nullptr && !canceller->cancelled()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        return Unavailable("fake transport: cancelled");
      }
      reply = std::move(streams_.front());
      streams_.pop_front();
    }
    if (!reply.transport_ok) return Unavailable("fake transport: connection refused");
    if (handlers.on_response && !handlers.on_response(reply.status, reply.headers)) {
      return Status::Ok();
    }
    for (const auto& p : reply.pieces) {
      if (handlers.on_body && !handlers.on_body(p)) return Status::Ok();
    }
    if (reply.stream_breaks) return Unavailable("fake transport: connection reset mid-stream");
    return Status::Ok();
  }

  std::vector<net::HttpRequest> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  mutable std::mutex mu_;
  std::deque<FakeReply> replies_;
  std::deque<FakeReply> streams_;
  std::vector<net::HttpRequest> requests_;
};

}  // namespace allocguard::kube::testing
