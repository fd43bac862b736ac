#include "operator/manager/self_probe.h"

#include "operator/net/http.h"

namespace allocguard::manager {

Status SelfProbe::Check() {
  std::lock_guard<std::mutex> lock(mu_);
  const Clock::TimePoint now = options_.clock->Now();
  if (!have_result_ || now - checked_at_ >= options_.cache_for) {
    result_ = ProbeNow();
    checked_at_ = options_.clock->Now();
    have_result_ = true;
  }
  return result_;
}

Status SelfProbe::ProbeNow() const {
  auto client = net::NewStreamingHttpClient({.base_url = options_.base_url,
                                             .tls = {.insecure_skip_verify = true},
                                             .connect_timeout = options_.timeout,
                                             .read_timeout = options_.timeout,
                                             .write_timeout = options_.timeout,
                                             .keep_alive = false});
  if (!client.ok()) return client.status();
  auto response = (*client)->Send({.path = options_.path});
  if (!response.ok()) {
    return Unavailable("the webhook server did not answer its own probe: " +
                       response.status().message());
  }
  if (response->status != 200) {
    return Unavailable("the webhook server answered its own probe with " +
                       std::to_string(response->status));
  }
  return Status::Ok();
}

}  // namespace allocguard::manager
