#include "operator/kube/credentials.h"

#include <csignal>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "operator/common/base64.h"
#include "operator/common/rfc3339.h"
#include "operator/common/subprocess.h"
#include "operator/kube/object.h"

namespace allocguard::kube {

namespace {

class StaticTokenSource final : public TokenSource {
 public:
  explicit StaticTokenSource(std::string token) : token_(std::move(token)) {}
  Result<std::string> Token(bool) override { return token_; }

 private:
  const std::string token_;
};

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

FileTokenSource::FileTokenSource(std::string path, Clock* clock, Clock::Duration reread_after)
    : path_(std::move(path)), clock_(clock), reread_after_(reread_after) {}

Result<std::string> FileTokenSource::Token(bool force_refresh) {
  std::lock_guard<std::mutex> lock(mu_);
  Clock::TimePoint now = clock_->Now();
  if (!force_refresh && read_at_ && now - *read_at_ < reread_after_) return token_;
  std::ifstream in(path_);
  if (!in) {
    // Keep using a token we have: the kubelet replaces the file atomically,
    // but a missing file must not break a running process.
    if (read_at_) return token_;
    return NotFound("cannot read token file " + path_);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string token = Trim(ss.str());
  if (token.empty()) {
    if (read_at_) return token_;
    return InvalidArgument("token file " + path_ + " is empty");
  }
  token_ = token;
  read_at_ = now;
  return token_;
}

ExecTokenSource::ExecTokenSource(ExecConfig exec, std::string server, std::string ca_pem,
                                 Clock* clock, std::chrono::milliseconds timeout)
    : exec_(std::move(exec)),
      server_(std::move(server)),
      ca_pem_(std::move(ca_pem)),
      clock_(clock),
      timeout_(timeout) {}

int ExecTokenSource::runs_for_test() const {
  std::lock_guard<std::mutex> lock(mu_);
  return runs_;
}

Result<std::string> ExecTokenSource::Token(bool force_refresh) {
  std::lock_guard<std::mutex> lock(mu_);
  bool fresh = have_token_ && (!expires_ || clock_->WallNow() < *expires_);
  if (fresh && !force_refresh) return token_;
  AG_ASSIGN_OR_RETURN(std::string token, Run());
  return token;
}

Result<std::string> ExecTokenSource::Run() {
  ++runs_;
  const std::string what = "exec credential plugin \"" + exec_.command + "\"";
  nlohmann::json info = {{"apiVersion", exec_.api_version},
                         {"kind", "ExecCredential"},
                         {"spec", {{"interactive", false}}}};
  if (exec_.provide_cluster_info) {
    info["spec"]["cluster"] = {{"server", server_}};
    if (!ca_pem_.empty()) {
      info["spec"]["cluster"]["certificate-authority-data"] = EncodeBase64(ca_pem_);
    }
  }
  if (exec_.interactive_mode == "Always") {
    return FailedPrecondition(what +
                              " requires interactiveMode Always, but allocguard runs "
                              "without a terminal");
  }

  SubprocessOptions spawn;
  spawn.argv = {exec_.command};
  spawn.argv.insert(spawn.argv.end(), exec_.args.begin(), exec_.args.end());
  spawn.env = CurrentEnvironment();
  for (const auto& [k, v] : exec_.env) (*spawn.env)[k] = v;
  (*spawn.env)["KUBERNETES_EXEC_INFO"] = info.dump();
  spawn.capture_stdout = true;
  auto plugin = Subprocess::Spawn(spawn);
  if (!plugin.ok()) {
    std::string hint = exec_.install_hint.empty() ? "" : " (" + exec_.install_hint + ")";
    return NotFound(what + " cannot be started: " + plugin.status().message() + hint);
  }
  // A credential is never larger than 1 MiB.
  auto output = plugin->ReadStdout(timeout_, 1u << 20);
  if (!output.ok() && output.status().code() == StatusCode::kDeadlineExceeded) {
    plugin->Signal(SIGKILL);
    plugin->Wait();
    return DeadlineExceeded(what + " did not finish within " + std::to_string(timeout_.count()) +
                            " ms and was killed");
  }
  SubprocessExit exit = plugin->Wait();
  if (exit.signal != 0 || exit.exit_code != 0) {
    return Unavailable(what + " failed (exit status " +
                       std::to_string(exit.signal == 0 ? exit.exit_code : -1) + ")");
  }
  auto cred = nlohmann::json::parse(output.ok() ? *output : std::string(), nullptr, false);
  if (!cred.is_object() || !cred.contains("status") || !cred["status"].is_object()) {
    return InvalidArgument(what + " did not print an ExecCredential with a status");
  }
  const auto& status = cred["status"];
  if (status.contains("clientCertificateData")) {
    return InvalidArgument(what +
                           " returned a client certificate; only token credentials are "
                           "supported");
  }
  std::string token = StringField(status, "token");
  if (token.empty()) return InvalidArgument(what + " returned no token");
  expires_.reset();
  if (std::string exp = StringField(status, "expirationTimestamp"); !exp.empty()) {
    AG_ASSIGN_OR_RETURN(auto t, ParseRfc3339(exp));
    expires_ = t;
  }
  token_ = token;
  have_token_ = true;
  return token_;
}

Result<std::shared_ptr<TokenSource>> TokenSourceFor(const RestConfig& config, Clock* clock) {
  if (config.exec) {
    return std::shared_ptr<TokenSource>(std::make_shared<ExecTokenSource>(
        *config.exec, config.server, config.ca_pem_for_exec, clock));
  }
  if (!config.token_file.empty()) {
    auto source = std::make_shared<FileTokenSource>(config.token_file, clock);
    auto first = source->Token(false);  // fail early on a missing file
    if (!first.ok()) return first.status();
    return std::shared_ptr<TokenSource>(source);
  }
  if (!config.token.empty()) {
    return std::shared_ptr<TokenSource>(std::make_shared<StaticTokenSource>(config.token));
  }
  return std::shared_ptr<TokenSource>();
}

}  // namespace allocguard::kube
