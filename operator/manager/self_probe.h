#pragma once

// Readiness of the webhook server, measured instead of assumed: a request to
// the server's own port through the real TLS path (handshake, event loop,
// worker pool, response), with a short deadline. Passing means a review sent
// now would be answered; failing means the API server's review would wait
// (and, failurePolicy Ignore, admit Pods uninjected after its timeout).

#include <chrono>
#include <mutex>
#include <string>

#include "operator/common/clock.h"
#include "operator/common/status.h"

namespace allocguard::manager {

struct SelfProbeOptions {
  // "https://127.0.0.1:9443"; the path probed is appended.
  std::string base_url;
  std::string path = "/healthz";
  // Bounds the connect, the handshake and the read each, so a probe takes at
  // most about three times this.
  std::chrono::milliseconds timeout{1000};
  // A result is reused this long, so frequent probes stay cheap.
  Clock::Duration cache_for = std::chrono::seconds(2);
  Clock* clock = nullptr;  // required
};

// Thread-safe; concurrent Check() calls share one probe.
class SelfProbe {
 public:
  explicit SelfProbe(SelfProbeOptions options) : options_(std::move(options)) {}

  // OK when GET base_url + path answered 200 within the timeout, at most
  // cache_for ago; else kUnavailable saying what failed. The certificate is
  // not verified: its presence is checked elsewhere, and the probe must work
  // whatever names it carries.
  Status Check();

 private:
  Status ProbeNow() const;

  const SelfProbeOptions options_;
  std::mutex mu_;
  bool have_result_ = false;
  Clock::TimePoint checked_at_;
  Status result_ = Status::Ok();
};

}  // namespace allocguard::manager
