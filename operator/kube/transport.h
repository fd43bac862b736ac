#pragma once

// How the Kubernetes client speaks HTTP: one narrow interface, so that the
// client, watches and informers are tested with a fake and run against the
// real API server through NewHttpTransport().

#include <memory>
#include <string>

#include "operator/common/clock.h"
#include "operator/common/status.h"
#include "operator/kube/cancel.h"
#include "operator/net/http.h"

namespace allocguard::kube {

// Thread-safe: many requests and streams may be in flight at once.
class Transport {
 public:
  virtual ~Transport() = default;

  // One request, body collected. Transport failures are kUnavailable; any
  // HTTP status is a successful Result.
  virtual Result<net::HttpResponse> Send(const net::HttpRequest& request) = 0;

  // A request whose body is streamed to handlers (a watch). Returns when the
  // body ends, a handler returns false, or canceller (may be null) is
  // cancelled, which interrupts a blocked read promptly (kUnavailable).
  virtual Status Stream(const net::HttpRequest& request, const net::StreamHandlers& handlers,
                        Canceller* canceller) = 0;
};

struct HttpTransportOptions {
  net::StreamingHttpClientOptions client;  // base URL, TLS, timeouts
  // Read timeout for streams; must exceed the longest silence of a watch
  // (its timeoutSeconds plus a margin).
  std::chrono::milliseconds stream_read_timeout{std::chrono::minutes(11)};
  // Pooled connections idle longer than this are closed instead of reused:
  // cpp-httplib 0.11 fails a request on a kept-alive TLS connection the
  // server has meanwhile closed, and a failed POST must not be repeated.
  std::chrono::milliseconds max_idle{std::chrono::seconds(4)};
  Clock* clock = nullptr;  // nullptr: the real clock
};

// Pools connections for Send() (a connection serves one request at a time)
// and opens a dedicated connection per Stream(). Fails on bad TLS input.
Result<std::unique_ptr<Transport>> NewHttpTransport(const HttpTransportOptions& options);

}  // namespace allocguard::kube
