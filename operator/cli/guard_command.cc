// allocguard guard: the sidecar the injection webhook adds to governed pods
// (docs/guard.md). It samples the workload's memory every interval, keeps
// floors and slopes, checks the allocator each process loaded and acts as
// the policy says. Without a pod identity it runs locally (--pid), with no
// API server.

#include <pthread.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdlib>
#include <thread>

#include <spdlog/spdlog.h>

#include "operator/api/names.h"
#include "operator/api/policy.h"
#include "operator/cli/cli_util.h"
#include "operator/cli/commands.h"
#include "operator/common/duration.h"
#include "operator/common/log.h"
#include "operator/guard/guard.h"
#include "operator/kube/client.h"
#include "operator/kube/config.h"
#include "operator/kube/event_recorder.h"
#include "operator/manager/manager.h"
#include "operator/metrics/process_metrics.h"
#include "operator/net/http.h"
#include "operator/replay/load_spec.h"

namespace allocguard::cli {
namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

struct GuardFlags {
  std::string log_level = "info";
  std::string log_format = "text";
  std::string threshold;  // quantity
  std::string action = "None";
  std::string interval = "2s";
  std::string window = "30m";
  std::string warmup = "1m";
  std::string expected_allocator;
  // The port the injected guard declares (api::kGuardMetricsPortName).
  std::string metrics_bind_address = ":" + std::to_string(api::kGuardMetricsPort);
  std::vector<int> pids;
  std::string cgroup = "auto";
  std::string limit;
  double release_fraction = 0.9;
  int release_samples = 3;
  int close_samples = 1;
  double restart_margin_fraction = 0.1;
  std::string restart_margin_min = "32Mi";
  std::string restart_grace = "60s";
  std::string allocator_recheck = "60s";
  std::string books_dir;              // the stats agent's books; empty: not read
  std::string books_rising = "64Mi";  // per hour
  std::string kubeconfig;
  std::string context;
  bool no_kube = false;
  std::string pod_name;
  std::string pod_namespace;
  std::string pod_uid;
};

Result<std::chrono::milliseconds> Duration(const std::string& flag, const std::string& text,
                                           std::chrono::milliseconds min) {
  AG_ASSIGN_OR_RETURN(auto d, ParseFlagDuration(flag, text));
  if (d < min) {
    return InvalidArgument(flag + " must be at least " + std::to_string(min.count()) + "ms");
  }
  return d;
}

Result<guard::GuardOptions> BuildOptions(const GuardFlags& f) {
  guard::GuardOptions o;
  auto action = api::GuardActionFromName(f.action);
  if (!action) return InvalidArgument("--action must be None, Backpressure or Restart");
  o.action = *action;
  if (!f.threshold.empty()) {
    AG_ASSIGN_OR_RETURN(int64_t threshold, ParseQuantity(f.threshold));
    o.threshold_bytes = threshold;
  }
  if (o.action == guard::GuardAction::kBackpressure && !o.threshold_bytes) {
    return InvalidArgument("--action Backpressure needs --threshold-bytes");
  }
  AG_ASSIGN_OR_RETURN(auto interval,
                      Duration("--interval", f.interval, std::chrono::milliseconds(10)));
  o.interval = interval;
  o.floors.sample_interval_seconds = std::chrono::duration<double>(interval).count();
  AG_ASSIGN_OR_RETURN(auto window, Duration("--window", f.window, std::chrono::minutes(3)));
  o.floors.window_minutes = static_cast<int>(window.count() / 60000);
  AG_ASSIGN_OR_RETURN(auto warmup, Duration("--warmup", f.warmup, std::chrono::milliseconds(0)));
  o.floors.warmup_minutes = static_cast<int>((warmup.count() + 59999) / 60000);
  if (!f.expected_allocator.empty()) {
    AG_ASSIGN_OR_RETURN(auto expected, replay::ParseAllocator(f.expected_allocator));
    o.expected_allocator = expected;
  }
  if (!(f.release_fraction > 0 && f.release_fraction <= 1)) {
    return InvalidArgument("--release-fraction must be in (0, 1]");
  }
  if (f.release_samples < 1 || f.close_samples < 1) {
    return InvalidArgument("--release-samples and --close-samples must be at least 1");
  }
  o.hysteresis.release_fraction = f.release_fraction;
  o.hysteresis.samples_below_to_open = f.release_samples;
  o.hysteresis.samples_above_to_close = f.close_samples;
  if (!(f.restart_margin_fraction >= 0 && f.restart_margin_fraction < 1)) {
    return InvalidArgument("--restart-margin-fraction must be in [0, 1)");
  }
  o.restart.margin_fraction = f.restart_margin_fraction;
  AG_ASSIGN_OR_RETURN(o.restart.margin_min_bytes, ParseQuantity(f.restart_margin_min));
  AG_ASSIGN_OR_RETURN(auto grace,
                      Duration("--restart-grace", f.restart_grace, std::chrono::seconds(1)));
  o.restart_grace = grace;
  AG_ASSIGN_OR_RETURN(
      auto recheck, Duration("--allocator-recheck", f.allocator_recheck, std::chrono::seconds(1)));
  o.allocator_recheck = recheck;
  if (!f.books_dir.empty()) {
    guard::BooksWatchOptions books;
    books.dir = f.books_dir;
    books.floors = o.floors;
    AG_ASSIGN_OR_RETURN(int64_t rising, ParseQuantity(f.books_rising));
    if (rising <= 0) return InvalidArgument("--books-rising must be more than 0");
    books.rising_bytes_per_hour = static_cast<double>(rising);
    o.books = books;
  }
  return o;
}

int RunGuard(const GuardFlags& f) {
  // SIGTERM (the kubelet stopping the pod) and SIGINT end the loop. Blocked
  // before any thread starts, so every thread inherits the mask and only the
  // waiter below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  if (Status s = log::Configure(f.log_level, f.log_format); !s.ok()) return UsageError(s);
  auto options = BuildOptions(f);
  if (!options.ok()) return UsageError(options.status());

  guard::ProcWorkloadSourceOptions source_options;
  for (int pid : f.pids) source_options.pids.push_back(static_cast<pid_t>(pid));
  if (f.cgroup != "auto" && f.cgroup != "none") {
    return UsageError(InvalidArgument("--cgroup must be auto or none"));
  }
  source_options.read_cgroup = f.cgroup == "auto";
  if (!f.limit.empty()) {
    auto limit = ParseQuantity(f.limit);
    if (!limit.ok()) return UsageError(limit.status().WithContext("--limit-bytes"));
    source_options.limit_bytes = *limit;
  }
  auto source = guard::NewProcWorkloadSource(source_options);

  // Kubernetes: in-cluster (or --kubeconfig) when the pod is known.
  std::unique_ptr<kube::Client> client;
  std::unique_ptr<kube::EventRecorder> events;
  std::unique_ptr<guard::AsyncReporter> reporter;
  if (!f.no_kube && !f.pod_name.empty() && !f.pod_namespace.empty()) {
    auto config = f.kubeconfig.empty()
                      ? kube::InClusterConfigFromEnvironment()
                      : kube::LoadKubeconfigFromEnvironment(f.kubeconfig, f.context);
    if (!config.ok()) {
      // The guard still guards without the API: it samples, serves
      // /metrics and (for Restart) signals; it only cannot report.
      spdlog::warn("no Kubernetes API ({}): conditions and events are off",
                   config.status().ToString());
    } else {
      kube::ClientOptions client_options;
      client_options.user_agent = "allocguard-guard";
      auto created = kube::Client::Create(*config, client_options);
      if (!created.ok()) return Fail(created.status());
      client = std::move(*created);
      kube::EventRecorderOptions event_options;
      event_options.reporting_controller = "allocguard.io/guard";
      event_options.reporting_instance = f.pod_name;
      events = std::make_unique<kube::EventRecorder>(client.get(), event_options);
      guard::AsyncReporterOptions reporter_options;
      reporter_options.log = [](const std::string& line) { spdlog::warn("report: {}", line); };
      reporter = std::make_unique<guard::AsyncReporter>(
          guard::NewKubePodReporter(client.get(), events.get(), f.pod_namespace, f.pod_name,
                                    f.pod_uid),
          reporter_options);
      spdlog::info("reporting to pod {}/{}", f.pod_namespace, f.pod_name);
    }
  } else if (f.pids.empty()) {
    spdlog::info("no pod identity (POD_NAME, POD_NAMESPACE): local mode, nothing is reported");
  }

  metrics::Registry registry;
  metrics::AddProcessMetrics(registry);
  metrics::AddBuildInfo(registry);
  guard::Guard guard(*options, source.get(), reporter.get(), &registry, RealClock::Get(),
                     [](const std::string& line) { spdlog::info("{}", line); });

  std::unique_ptr<net::HttpServer> server;
  std::thread server_thread;
  if (f.metrics_bind_address != "0") {
    auto hp = manager::ParseBindAddress(f.metrics_bind_address);
    if (!hp.ok()) return UsageError(hp.status().WithContext("--metrics-bind-address"));
    net::HttpServerOptions server_options;
    server_options.host = hp->first;
    server_options.port = hp->second;
    server_options.worker_threads = 1;
    server = net::NewHttpServer(server_options);
    server->Handle("GET", "/metrics", [&registry](const net::HttpRequest&) {
      net::HttpResponse r;
      r.status = 200;
      r.body = registry.Render();
      r.headers.emplace("Content-Type", metrics::kContentType);
      return r;
    });
    server->Handle("GET", "/healthz", [](const net::HttpRequest&) {
      net::HttpResponse r;
      r.status = 200;
      r.body = "ok\n";
      return r;
    });
    Status bound = server->Bind();
    if (!bound.ok()) return Fail(bound.WithContext("--metrics-bind-address"));
    spdlog::info("metrics on {}:{}/metrics", server_options.host, server->port());
    server_thread = std::thread([&] { server->Serve(); });
  }

  std::atomic<bool> stopping{false};
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (!stopping.load()) spdlog::info("signal {}: stopping", sig);
    guard.Stop();
  });
  spdlog::info("guarding: action {}, interval {}, window {}, threshold {}, expected allocator {}",
               f.action, f.interval, f.window, f.threshold.empty() ? "none" : f.threshold,
               f.expected_allocator.empty() ? "any" : f.expected_allocator);
  guard.Run();
  stopping = true;
  // Every thread blocks SIGTERM and the waiter takes it in sigwait: this
  // wakes the waiter, it does not terminate it.
  // NOLINTNEXTLINE(bugprone-bad-signal-to-kill-thread)
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  if (server) {
    server->Stop();
    server_thread.join();
  }
  return 0;
}

}  // namespace

void RegisterGuardCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<GuardFlags>();
  f->pod_name = EnvOr("POD_NAME", "");
  f->pod_namespace = EnvOr("POD_NAMESPACE", "");
  f->pod_uid = EnvOr("POD_UID", "");
  CLI::App* cmd = app.add_subcommand(
      "guard", "Watch a workload's memory and allocator from inside its pod (docs/guard.md)");
  cmd->add_option("--threshold-bytes", f->threshold,
                  "anon + dirty above which Backpressure acts, e.g. 1536Mi");
  cmd->add_option("--action", f->action, "None | Backpressure | Restart")->capture_default_str();
  cmd->add_option("--interval", f->interval, "sample interval")->capture_default_str();
  cmd->add_option("--window", f->window, "window of the rolling floor slope")
      ->capture_default_str();
  cmd->add_option("--warmup", f->warmup, "start-up time that gives no floors")
      ->capture_default_str();
  cmd->add_option("--expected-allocator", f->expected_allocator,
                  "glibc | jemalloc | mimalloc | tcmalloc: what the policy preloads");
  cmd->add_option("--metrics-bind-address", f->metrics_bind_address,
                  "address of /metrics and /healthz; 0 turns them off")
      ->capture_default_str();
  cmd->add_option("--pid", f->pids,
                  "local mode: guard this process and its descendants (repeatable); default: "
                  "every process of the pod's shared process namespace");
  cmd->add_option("--cgroup", f->cgroup,
                  "auto: read dirty, writeback and the limit from the workload's memory cgroup "
                  "when visible; none: /proc only")
      ->capture_default_str();
  cmd->add_option("--limit-bytes", f->limit,
                  "the workload's memory limit when its cgroup is not visible");
  cmd->add_option("--release-fraction", f->release_fraction,
                  "Backpressure ends below this fraction of the threshold")
      ->capture_default_str();
  cmd->add_option("--release-samples", f->release_samples, "... for this many consecutive samples")
      ->capture_default_str();
  cmd->add_option("--close-samples", f->close_samples,
                  "Backpressure starts after this many consecutive samples above the threshold")
      ->capture_default_str();
  cmd->add_option("--restart-margin-fraction", f->restart_margin_fraction,
                  "Restart acts this fraction of the limit below it")
      ->capture_default_str();
  cmd->add_option("--restart-margin-min-bytes", f->restart_margin_min,
                  "... but at least this far below it")
      ->capture_default_str();
  cmd->add_option("--restart-grace", f->restart_grace,
                  "a process that got SIGTERM is not signalled again for this long")
      ->capture_default_str();
  cmd->add_option("--allocator-recheck", f->allocator_recheck,
                  "re-check the loaded allocators at least this often")
      ->capture_default_str();
  cmd->add_option("--books-dir", f->books_dir,
                  "read the stats agent's books here, one subdirectory per container "
                  "(docs/allocator-books.md)");
  cmd->add_option("--books-rising", f->books_rising,
                  "a floor of in-use or retained bytes rising faster than this per hour is "
                  "rising (AllocatorRetaining, HeapGrowing)")
      ->capture_default_str();
  cmd->add_option("--kubeconfig", f->kubeconfig, "kubeconfig file (default: in-cluster)");
  cmd->add_option("--context", f->context, "kubeconfig context");
  cmd->add_flag("--no-kube", f->no_kube, "never talk to the API server");
  cmd->add_option("--pod-name", f->pod_name, "the guard's pod (default: $POD_NAME)");
  cmd->add_option("--pod-namespace", f->pod_namespace,
                  "the guard's pod namespace (default: $POD_NAMESPACE)");
  cmd->add_option("--pod-uid", f->pod_uid, "the guard's pod UID, for events (default: $POD_UID)");
  AddLogOptions(cmd, &f->log_level, &f->log_format);
  cmd->callback([f, exit_code] { *exit_code = RunGuard(*f); });
}

}  // namespace allocguard::cli
