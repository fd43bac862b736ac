// allocguard gate: waits for the verdict on a Deployment's rollout (or on one
// ReplayCanary) and exits with a code a CI job can branch on
// (docs/gitops.md). It only reads: the Deployment, the AllocatorPolicies of
// its namespace and the ReplayCanary of its current template, polled every
// --poll-interval until the answer is not "waiting" or --timeout passes. The
// decision itself is controllers/gate_decision.h.

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "controllers/gate_decision.h"
#include "controllers/reconcilers.h"
#include "operator/api/policy.h"
#include "operator/cli/cli_util.h"
#include "operator/cli/commands.h"
#include "operator/common/duration.h"
#include "operator/kube/client.h"
#include "operator/kube/config.h"
#include "operator/replay/load_spec.h"

namespace allocguard::cli {
namespace {

using controllers::GateAnswer;
using controllers::GateState;
using nlohmann::json;

struct GateFlags {
  std::string target;
  std::string timeout = "30m";
  std::string poll_interval = "2s";
  std::string output = "text";
  std::string kubeconfig;
  std::string context;
  std::string ns;
  bool quiet = false;
};

// kubectl's order: an explicit --kubeconfig, $KUBECONFIG or --context means a
// kubeconfig; otherwise in a pod the service account; otherwise ~/.kube/config.
Result<kube::RestConfig> LoadConfig(const GateFlags& f) {
  const char* kubeconfig_env = std::getenv("KUBECONFIG");
  const char* service_host = std::getenv("KUBERNETES_SERVICE_HOST");
  const bool have_kubeconfig = !f.kubeconfig.empty() || !f.context.empty() ||
                               (kubeconfig_env != nullptr && *kubeconfig_env != '\0');
  if (!have_kubeconfig && service_host != nullptr && *service_host != '\0') {
    return kube::InClusterConfigFromEnvironment();
  }
  return kube::LoadKubeconfigFromEnvironment(f.kubeconfig, f.context);
}

// A read that may be retried (the server did not answer, or answered 5xx or
// 429 after the client's own retries) rather than ending the wait.
bool Transient(const kube::ApiError& e) {
  return e.IsTransport() || e.code >= 500 || e.code == 429;
}

struct Look {
  std::optional<GateAnswer> answer;  // nullopt: a transient error, look again
  std::optional<Status> error;       // a permanent error: exit 1
  std::string transient_error;
};

Look LookOnce(kube::Client& client, const std::string& ns, const controllers::GateTarget& target) {
  Look look;
  auto fail = [&](const kube::ApiError& e, const std::string& what) {
    if (Transient(e)) {
      look.transient_error = what + ": " + e.ToString();
    } else {
      look.error = e.ToStatus().WithContext(what);
    }
    return look;
  };
  auto not_found = [&](const std::string& kind) {
    GateAnswer a;
    a.state = GateState::kNotFound;
    a.reason = "NotFound";
    a.message = "no " + kind + " " + target.name + " in namespace " + ns;
    look.answer = a;
    return look;
  };
  if (target.kind == controllers::GateKind::kReplayCanary) {
    auto canary = client.Get(kube::ReplayCanaries(), ns, target.name);
    if (!canary.ok()) {
      if (canary.error().IsNotFound()) return not_found("ReplayCanary");
      return fail(canary.error(), "reading ReplayCanary " + ns + "/" + target.name);
    }
    look.answer = controllers::AnswerCanaryGate(*canary);
    return look;
  }
  const controllers::WorkloadKind kind = target.Workload();
  const std::string kind_name = controllers::WorkloadKindName(kind);
  auto deployment = client.Get(controllers::WorkloadResource(kind), ns, target.name);
  if (!deployment.ok()) {
    if (deployment.error().IsNotFound()) return not_found(kind_name);
    return fail(deployment.error(), "reading " + kind_name + " " + ns + "/" + target.name);
  }
  std::vector<api::AllocatorPolicy> policies;
  auto listed = client.List(kube::AllocatorPolicies(), ns);
  if (!listed.ok()) {
    // 404: allocguard's CRDs are not installed, so nothing governs it.
    if (!listed.error().IsNotFound()) {
      return fail(listed.error(), "listing AllocatorPolicies in " + ns);
    }
  } else {
    for (const json& item : listed->items) {
      auto parsed = api::ParseAllocatorPolicy(item);
      if (parsed.ok()) policies.push_back(*parsed);
    }
  }
  std::optional<kube::ApiError> canary_error;
  auto lookup = [&](const std::string& name) -> std::optional<json> {
    auto canary = client.Get(kube::ReplayCanaries(), ns, name);
    if (canary.ok()) return *canary;
    if (!canary.error().IsNotFound()) canary_error = canary.error();
    return std::nullopt;
  };
  GateAnswer answer = controllers::AnswerDeploymentGate(*deployment, policies, lookup, kind);
  if (canary_error.has_value()) {
    return fail(*canary_error, "reading ReplayCanary " + ns + "/" + answer.canary);
  }
  look.answer = answer;
  return look;
}

int RunGate(const GateFlags& f) {
  auto target = controllers::ParseGateTarget(f.target);
  if (!target.ok()) return UsageError(target.status());
  auto timeout = ParseFlagDuration("--timeout", f.timeout);
  if (!timeout.ok()) return UsageError(timeout.status());
  auto poll = ParseFlagDuration("--poll-interval", f.poll_interval);
  if (!poll.ok()) return UsageError(poll.status());
  if (*poll < std::chrono::milliseconds(100)) {
    return UsageError(InvalidArgument("--poll-interval must be at least 100ms"));
  }
  auto config = LoadConfig(f);
  if (!config.ok()) return Fail(config.status().WithContext("Kubernetes configuration"));
  const std::string ns =
      !f.ns.empty() ? f.ns : (config->namespace_.empty() ? "default" : config->namespace_);
  auto client = kube::Client::Create(*config);
  if (!client.ok()) return Fail(client.status());

  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + *timeout;
  std::optional<GateAnswer> last;
  std::string last_progress;
  for (;;) {
    Look look = LookOnce(**client, ns, *target);
    if (look.error.has_value()) return Fail(*look.error);
    std::string progress;
    if (look.answer.has_value()) {
      last = look.answer;
      if (last->state != GateState::kWaiting) break;
      progress = controllers::FormatGateLine(*target, *last);
    } else {
      progress = "retrying: " + look.transient_error;
    }
    // Progress goes to stderr, once per change, so a CI log shows what the
    // gate waits for; stdout keeps only the answer.
    if (!f.quiet && progress != last_progress) {
      std::cerr << progress << std::endl;
      last_progress = progress;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      GateAnswer timed_out = last.value_or(GateAnswer{});
      timed_out.state = GateState::kTimedOut;
      if (timed_out.reason.empty()) timed_out.reason = "ApiUnreachable";
      timed_out.message = "no verdict after " + f.timeout + ": " +
                          (last.has_value() ? last->message : look.transient_error);
      last = timed_out;
      break;
    }
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(*poll, deadline - now));
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (f.output == "json") {
    json j = last->ToJson();
    j["target"] = target->Display();
    j["namespace"] = ns;
    j["waitedSeconds"] = static_cast<int64_t>(waited);
    std::cout << j.dump() << std::endl;
  } else {
    std::cout << controllers::FormatGateLine(*target, *last) << std::endl;
  }
  return controllers::GateExitCode(last->state);
}

}  // namespace

void RegisterGateCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<GateFlags>();
  CLI::App* cmd = app.add_subcommand(
      "gate",
      "wait for the allocguard verdict on a Deployment's rollout or a ReplayCanary; exit 0 "
      "proceed, 2 held, 3 failed, 4 timed out, 5 not found, 1 error (docs/gitops.md)");
  cmd->add_option("target", f->target,
                  "deployment/NAME, NAME, statefulset/NAME, daemonset/NAME, or replaycanary/NAME")
      ->required();
  cmd->add_option("--timeout", f->timeout, "how long to wait for a verdict (0: look once)")
      ->capture_default_str();
  cmd->add_option("--poll-interval", f->poll_interval, "time between reads")->capture_default_str();
  AddOutputFormatOption(cmd, &f->output);
  cmd->add_option("--kubeconfig", f->kubeconfig,
                  "kubeconfig file (default: $KUBECONFIG, in a pod its service account, else "
                  "~/.kube/config)");
  cmd->add_option("--context", f->context, "kubeconfig context");
  cmd->add_option("-n,--namespace", f->ns,
                  "namespace (default: the context's, the pod's, or \"default\")");
  cmd->add_flag("-q,--quiet", f->quiet, "no progress lines on stderr while waiting");
  cmd->callback([f, exit_code] { *exit_code = RunGate(*f); });
}

}  // namespace allocguard::cli
