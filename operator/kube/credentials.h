#pragma once

// Bearer tokens for the API server: static, from a rotating file, or from an
// exec credential plugin. The client asks for a token per request and asks
// again with force_refresh after a 401.

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "operator/common/clock.h"
#include "operator/common/status.h"
#include "operator/kube/config.h"

namespace allocguard::kube {

// Thread-safe.
class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // The token to send now; "" means send none. force_refresh: the last token
  // was rejected (401), so re-read or re-run even if the cache is fresh.
  virtual Result<std::string> Token(bool force_refresh) = 0;
};

// A token file that the kubelet rewrites as the bound token rotates: re-read
// when the cached copy is older than reread_after, and on force_refresh.
class FileTokenSource final : public TokenSource {
 public:
  FileTokenSource(std::string path, Clock* clock,
                  Clock::Duration reread_after = std::chrono::minutes(1));
  Result<std::string> Token(bool force_refresh) override;

 private:
  const std::string path_;
  Clock* const clock_;
  const Clock::Duration reread_after_;
  std::mutex mu_;
  std::string token_;
  std::optional<Clock::TimePoint> read_at_;
};

// Runs an exec credential plugin (no shell) and caches its token until the
// expirationTimestamp it reports, or forever when it reports none, until a
// force_refresh. A plugin that runs longer than timeout is killed.
class ExecTokenSource final : public TokenSource {
 public:
  ExecTokenSource(ExecConfig exec, std::string server, std::string ca_pem, Clock* clock,
                  std::chrono::milliseconds timeout = std::chrono::seconds(30));
  Result<std::string> Token(bool force_refresh) override;

  int runs_for_test() const;

 private:
  Result<std::string> Run();

  const ExecConfig exec_;
  const std::string server_;
  const std::string ca_pem_;
  Clock* const clock_;
  const std::chrono::milliseconds timeout_;
  mutable std::mutex mu_;
  std::string token_;
  std::optional<std::chrono::system_clock::time_point> expires_;
  bool have_token_ = false;
  int runs_ = 0;
};

// The token source a RestConfig asks for: exec, else token file, else static
// token, else none (nullptr; client certificates or anonymous).
Result<std::shared_ptr<TokenSource>> TokenSourceFor(const RestConfig& config, Clock* clock);

}  // namespace allocguard::kube
