#include "operator/kube/credentials.h"

#include "operator/common/rfc3339.h"
#include "operator/kube/object.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

extern char** environ;

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
      static const char* kAlphabet =
          "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
      std::string b64;
      size_t i = 0;
      for (; i + 2 < ca_pem_.size(); i += 3) {
        unsigned v = (static_cast<unsigned char>(ca_pem_[i]) << 16) |
                     (static_cast<unsigned char>(ca_pem_[i + 1]) << 8) |
                     static_cast<unsigned char>(ca_pem_[i + 2]);
        for (int k = 18; k >= 0; k -= 6) b64.push_back(kAlphabet[(v >> k) & 63]);
      }
      if (i < ca_pem_.size()) {
        unsigned v = static_cast<unsigned char>(ca_pem_[i]) << 16;
        if (i + 1 < ca_pem_.size()) v |= static_cast<unsigned char>(ca_pem_[i + 1]) << 8;
        b64.push_back(kAlphabet[(v >> 18) & 63]);
        b64.push_back(kAlphabet[(v >> 12) & 63]);
        b64.push_back(i + 1 < ca_pem_.size() ? kAlphabet[(v >> 6) & 63] : '=');
        b64.push_back('=');
      }
      info["spec"]["cluster"]["certificate-authority-data"] = b64;
    }
  }
  if (exec_.interactive_mode == "Always") {
    return FailedPrecondition(what +
                              " requires interactiveMode Always, but allocguard runs "
                              "without a terminal");
  }

  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  for (const auto& [k, v] : exec_.env) env_strings.push_back(k + "=" + v);
  env_strings.push_back("KUBERNETES_EXEC_INFO=" + info.dump());
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_strings = {exec_.command};
  argv_strings.insert(argv_strings.end(), exec_.args.begin(), exec_.args.end());
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  int out_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return Internal(what + ": pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, exec_.command.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  if (rc != 0) {
    close(out_pipe[0]);
    std::string hint = exec_.install_hint.empty() ? "" : " (" + exec_.install_hint + ")";
    return NotFound(what + " cannot be started: " + std::strerror(rc) + hint);
  }

  std::string output;
  bool timed_out = false;
  auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd pfd{out_pipe[0], POLLIN, 0};
    int n = poll(&pfd, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      timed_out = n == 0;
      break;
    }
    char buf[4096];
    ssize_t r = read(out_pipe[0], buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    output.append(buf, static_cast<size_t>(r));
    if (output.size() > (1u << 20)) break;  // a credential is never this large
  }
  close(out_pipe[0]);
  if (timed_out) kill(pid, SIGKILL);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return DeadlineExceeded(what + " did not finish within " + std::to_string(timeout_.count()) +
                            " ms and was killed");
  }
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    return Unavailable(what + " failed (exit status " +
                       std::to_string(WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1) + ")");
  }
  auto cred = nlohmann::json::parse(output, nullptr, false);
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
