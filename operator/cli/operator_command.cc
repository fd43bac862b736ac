// allocguard operator: the in-cluster operator (see operator/manager/manager.h
// and docs/operator.md). Flags are named as kubebuilder operators name them.

#include <pthread.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <string>
#include <thread>

#include <spdlog/spdlog.h>

#include "operator/cli/cli_util.h"
#include "operator/cli/commands.h"
#include "operator/common/log.h"
#include "operator/kube/cancel.h"
#include "operator/manager/manager.h"

namespace allocguard::cli {

namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

int RunOperator(manager::ManagerOptions options, const std::string& slow_request) {
  if (Status s = log::Configure(options.log_level, options.log_format); !s.ok()) {
    return UsageError(s);
  }
  auto slow = ParseFlagDuration("--webhook-slow-request", slow_request);
  if (!slow.ok()) return UsageError(slow.status());
  options.webhook_slow_request = *slow;
  // SIGTERM (the kubelet stopping the pod) and SIGINT end the operator
  // cleanly: the lease is released so a follower takes over at once.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  kube::Canceller cancel;
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig != 0) spdlog::info("signal {}: shutting down", sig);
    cancel.Cancel();
  });
  Status status = manager::RunManager(options, &cancel);
  if (!cancel.cancelled()) {
    // Wake the signal thread so it can be joined: SIGTERM is blocked and
    // taken by its sigwait, so this does not terminate it.
    // NOLINTNEXTLINE(bugprone-bad-signal-to-kill-thread)
    pthread_kill(waiter.native_handle(), SIGTERM);
  }
  waiter.join();
  if (!status.ok()) return Fail(status);
  return 0;
}

}  // namespace

void RegisterOperatorCommand(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<manager::ManagerOptions>();
  auto slow_request =
      std::make_shared<std::string>(std::to_string(options->webhook_slow_request.count()) + "ms");
  options->pod_name = EnvOr("POD_NAME", "");
  options->operator_namespace = EnvOr("POD_NAMESPACE", options->operator_namespace);
  options->image = EnvOr("ALLOCGUARD_IMAGE", options->image);
  CLI::App* cmd = app.add_subcommand(
      "operator",
      "Run the operator: admission webhooks, replay canaries, rollout gate, drift reports");
  cmd->add_option("--kubeconfig", options->kubeconfig,
                  "kubeconfig file (default: in-cluster, or $KUBECONFIG)");
  cmd->add_option("--context", options->context, "kubeconfig context");
  cmd->add_option("--namespace", options->watch_namespace,
                  "watch only this namespace (default: all)");
  cmd->add_option("--operator-namespace", options->operator_namespace,
                  "the operator's own namespace: lease, certificate Secret, never injected "
                  "(default: $POD_NAMESPACE or allocguard-system)");
  cmd->add_flag("--leader-elect", options->leader_elect,
                "elect a leader among replicas; only the leader reconciles");
  cmd->add_option("--leader-election-id", options->leader_election_id, "name of the Lease");
  cmd->add_option("--health-probe-bind-address", options->health_probe_bind_address,
                  "address of /healthz and /readyz")
      ->capture_default_str();
  cmd->add_option("--metrics-bind-address", options->metrics_bind_address, "address of /metrics")
      ->capture_default_str();
  cmd->add_option("--webhook-bind-address", options->webhook_bind_address,
                  "address of the TLS admission webhooks")
      ->capture_default_str();
  cmd->add_option("--bound-addresses-file", options->bound_addresses_file,
                  "write the bound ports here (useful with port 0)");
  cmd->add_option("--webhook-cert-dir", options->webhook_cert_dir,
                  "serve tls.crt/tls.key from this directory (cert-manager) instead of a "
                  "self-managed certificate");
  cmd->add_option("--webhook-secret-name", options->webhook_secret_name,
                  "Secret holding the self-managed CA and serving certificate")
      ->capture_default_str();
  cmd->add_option("--webhook-service-name", options->webhook_service_name,
                  "Service in front of the webhooks (certificate names)")
      ->capture_default_str();
  cmd->add_option("--webhook-extra-san", options->webhook_extra_sans,
                  "extra DNS name or IP in the serving certificate (repeatable)");
  cmd->add_option("--mutating-webhook-configuration", options->mutating_webhook_config)
      ->capture_default_str();
  cmd->add_option("--validating-webhook-configuration", options->validating_webhook_config)
      ->capture_default_str();
  cmd->add_option("--webhook-url", options->webhook_url,
                  "register the webhooks by URL (https://host:port) instead of through a "
                  "Service; for an operator running outside the cluster");
  cmd->add_option("--webhook-slow-request", *slow_request,
                  "log a review answered this slowly or slower, with where its time went, and "
                  "count it in allocguard_webhook_slow_requests_total (0s: never)")
      ->capture_default_str();
  cmd->add_option("--image", options->image,
                  "image of the injected init container, guard and replay driver "
                  "(default: $ALLOCGUARD_IMAGE)")
      ->capture_default_str();
  cmd->add_option("--max-concurrent-canaries", options->max_concurrent_canaries,
                  "canaries with running Jobs at once, cluster-wide (0: no limit)")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  cmd->add_option("--max-concurrent-canaries-per-namespace",
                  options->max_concurrent_canaries_per_namespace,
                  "of those, canaries with running Jobs at once in one namespace; waiting "
                  "canaries are served round-robin over namespaces (0: no limit)")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  cmd->add_option("--workers", options->workers, "workers per reconciler")
      ->check(CLI::Range(1, 32))
      ->capture_default_str();
  AddLogOptions(cmd, &options->log_level, &options->log_format);
  cmd->callback(
      [options, slow_request, exit_code] { *exit_code = RunOperator(*options, *slow_request); });
}

}  // namespace allocguard::cli
