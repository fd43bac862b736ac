#include "operator/manager/manager.h"

#include <unistd.h>

#include <fstream>
#include <random>
#include <thread>

#include <spdlog/spdlog.h>

#include "controllers/reconcilers.h"
#include "controllers/rollout_decision.h"
#include "operator/api/names.h"
#include "operator/api/policy.h"
#include "operator/kube/client.h"
#include "operator/kube/config.h"
#include "operator/kube/event_recorder.h"
#include "operator/kube/informer.h"
#include "operator/kube/leader_election.h"
#include "operator/manager/canary_metrics.h"
#include "operator/manager/controller_runner.h"
#include "operator/manager/liveness.h"
#include "operator/manager/rollout_metrics.h"
#include "operator/manager/webhook_serving.h"
#include "operator/metrics/process_metrics.h"
#include "operator/metrics/registry.h"
#include "operator/net/http.h"

namespace allocguard::manager {
namespace {

using nlohmann::json;

// JSON accessors that never throw (operator/kube/object.h).
const auto& Field = kube::FieldOrNull;
const auto& Str = kube::StringField;

std::map<std::string, std::string> Labels(const json& object) {
  return kube::StringMap(Field(Field(object, "metadata"), "labels"));
}

std::string Namespace(const json& object) { return Str(Field(object, "metadata"), "namespace"); }

// Informer transform: drop managedFields and give list items the apiVersion
// and kind that lists leave out, so cached objects can be named in events and
// written back as they are.
std::function<void(json&)> TypedTransform(const kube::ResourceType& type) {
  return [type](json& object) {
    kube::StripManagedFields(object);
    object["apiVersion"] = type.ApiVersion();
    object["kind"] = type.kind;
  };
}

// Pods: the drift check and the canary reconciler read metadata and status;
// the spec is most of a pod's size.
void SlimPod(json& pod) {
  if (pod.contains("spec") && pod["spec"].is_object()) {
    pod["spec"] = json{{"nodeName", Str(pod["spec"], "nodeName")}};
  }
}

std::string Identity(const ManagerOptions& options) {
  std::string base = options.pod_name;
  if (base.empty()) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    base = host;
  }
  std::random_device rd;
  return base + "_" + std::to_string(rd() % 1000000);
}

// One reconcile may make several API calls, each bounded by the client's
// 30 s timeouts; longer than this inside one key is a wedged worker.
constexpr Clock::Duration kReconcileStallBound = std::chrono::minutes(5);
// The webhook server's event loop turns at least once a second.
constexpr Clock::Duration kWebhookLoopStallBound = std::chrono::seconds(30);

// Serves /healthz and /readyz, or /metrics, on its own thread.
class SideServer {
 public:
  Status Start(const std::string& address, std::function<void(net::HttpServer&)> routes) {
    AG_ASSIGN_OR_RETURN(auto hp, ParseBindAddress(address));
    net::HttpServerOptions options;
    options.host = hp.first;
    options.port = hp.second;
    options.worker_threads = 2;
    server_ = net::NewHttpServer(options);
    routes(*server_);
    AG_RETURN_IF_ERROR(server_->Bind());
    thread_ = std::thread([this] { server_->Serve(); });
    return Status::Ok();
  }
  void Stop() {
    if (server_ != nullptr) server_->Stop();
    if (thread_.joinable()) thread_.join();
  }
  int port() const { return server_ == nullptr ? 0 : server_->port(); }
  ~SideServer() { Stop(); }

 private:
  std::unique_ptr<net::HttpServer> server_;
  std::thread thread_;
};

net::HttpResponse Text(int status, const std::string& body) {
  net::HttpResponse r;
  r.status = status;
  r.body = body;
  r.headers.emplace("Content-Type", "text/plain; charset=utf-8");
  return r;
}

}  // namespace

Result<std::pair<std::string, int>> ParseBindAddress(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos) {
    return InvalidArgument("bind address \"" + address + "\" must be host:port");
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) host = "0.0.0.0";
  const std::string port_text = address.substr(colon + 1);
  int port = -1;
  try {
    size_t used = 0;
    port = std::stoi(port_text, &used);
    if (used != port_text.size()) port = -1;
  } catch (const std::exception&) {
    port = -1;
  }
  if (port < 0 || port > 65535) {
    return InvalidArgument("bind address \"" + address + "\": port must be 0..65535");
  }
  return std::make_pair(host, port);
}

Status RunManager(const ManagerOptions& options, kube::Canceller* cancel) {
  Clock* clock = RealClock::Get();
  Result<kube::RestConfig> rest =
      options.kubeconfig.empty() && std::getenv("KUBECONFIG") == nullptr
          ? kube::InClusterConfigFromEnvironment()
          : kube::LoadKubeconfigFromEnvironment(options.kubeconfig, options.context);
  if (!rest.ok()) return Status(rest.status().code(), "kubeconfig: " + rest.status().message());
  AG_ASSIGN_OR_RETURN(std::unique_ptr<kube::Client> client, kube::Client::Create(rest.value()));

  metrics::Registry registry;
  metrics::AddProcessMetrics(registry);
  metrics::AddBuildInfo(registry);

  // --- caches --------------------------------------------------------------
  auto make = [&](kube::ResourceType type, const std::string& label_selector,
                  std::function<void(json&)> slim) {
    kube::InformerOptions io;
    io.namespace_ = options.watch_namespace;
    io.label_selector = label_selector;
    io.transform = [typed = TypedTransform(type), slim](json& object) {
      typed(object);
      if (slim) slim(object);
    };
    return std::make_unique<kube::Informer>(client.get(), type, io);
  };
  auto policies = make(kube::AllocatorPolicies(), "", nullptr);
  auto canaries = make(kube::ReplayCanaries(), "", nullptr);
  auto deployments = make(kube::Deployments(), "", controllers::SlimDeployment);
  auto pods = make(kube::Pods(), "", SlimPod);
  auto jobs =
      make(kube::Jobs(), std::string(api::kManagedByLabel) + "=" + api::kManagedByValue, nullptr);
  for (kube::Informer* i :
       {policies.get(), canaries.get(), deployments.get(), pods.get(), jobs.get()}) {
    controllers::AddNamespaceIndex(i->store());
  }
  controllers::AddCanaryJobIndex(pods->store());
  AddHeldIndex(deployments->store());
  registry.AddGaugeFunc("allocguard_governed_policies", "AllocatorPolicies in the cache.",
                        [&] { return static_cast<double>(policies->store().size()); });
  registry.AddGaugeFunc("allocguard_cached_deployments", "Deployments in the cache.",
                        [&] { return static_cast<double>(deployments->store().size()); });
  registry.AddGaugeFunc("allocguard_cached_pods", "Pods in the cache.",
                        [&] { return static_cast<double>(pods->store().size()); });
  AddHeldRolloutMetrics(registry, "Deployment", deployments->store());

  kube::EventRecorderOptions eo;
  eo.reporting_instance = options.pod_name;
  kube::EventRecorder events(client.get(), eo);

  // --- reconcilers (started when leading) --------------------------------------
  controllers::ControllerContext ctx;
  ctx.client = client.get();
  ctx.policies = &policies->store();
  ctx.canaries = &canaries->store();
  ctx.deployments = &deployments->store();
  ctx.pods = &pods->store();
  ctx.jobs = &jobs->store();
  ctx.events = &events;
  ctx.clock = clock;
  ctx.metrics = &registry;
  ctx.operator_namespace = options.operator_namespace;
  ctx.job_options.image = options.image;
  ctx.max_concurrent_canaries = options.max_concurrent_canaries;
  ctx.max_concurrent_canaries_per_namespace = options.max_concurrent_canaries_per_namespace;
  ControllerRunner policy_runner(std::make_unique<controllers::PolicyReconciler>(ctx), clock,
                                 &registry);
  ControllerRunner canary_runner(std::make_unique<controllers::CanaryReconciler>(ctx), clock,
                                 &registry);
  ControllerRunner rollout_runner(std::make_unique<controllers::RolloutReconciler>(ctx), clock,
                                  &registry);
  ControllerRunner drift_runner(std::make_unique<controllers::DriftReconciler>(ctx), clock,
                                &registry);
  std::vector<ControllerRunner*> runners = {&policy_runner, &canary_runner, &rollout_runner,
                                            &drift_runner};

  // Event routing: which keys of which reconciler an object change concerns.
  auto policies_in = [&](const std::string& ns) {
    for (const json& p : policies->store().ByIndex(controllers::kNamespaceIndex, ns)) {
      policy_runner.Enqueue(kube::ObjectKey(p));
    }
  };
  auto on_policy = [&](const json& p) {
    policy_runner.Enqueue(kube::ObjectKey(p));
    for (const json& d : deployments->store().ByIndex(controllers::kNamespaceIndex, Namespace(p))) {
      rollout_runner.Enqueue(kube::ObjectKey(d));
    }
  };
  auto on_canary = [&](const json& c) {
    canary_runner.Enqueue(kube::ObjectKey(c));
    const std::string target = Str(Field(Field(c, "spec"), "target"), "name");
    if (!target.empty()) rollout_runner.Enqueue(Namespace(c) + "/" + target);
    auto labels = Labels(c);
    auto policy = labels.find(controllers::kPolicyLabel);
    if (policy != labels.end()) policy_runner.Enqueue(Namespace(c) + "/" + policy->second);
  };
  auto on_deployment = [&](const json& d) {
    rollout_runner.Enqueue(kube::ObjectKey(d));
    policies_in(Namespace(d));
  };
  auto on_job_or_canary_pod = [&](const json& o) {
    auto labels = Labels(o);
    auto canary = labels.find(api::kCanaryLabel);
    if (canary != labels.end()) canary_runner.Enqueue(Namespace(o) + "/" + canary->second);
  };
  auto on_pod = [&](const json& p) {
    if (Labels(p).count(api::kCanaryLabel) > 0) {
      on_job_or_canary_pod(p);
      return;
    }
    drift_runner.Enqueue(kube::ObjectKey(p));
    policies_in(Namespace(p));
  };
  auto handlers = [](std::function<void(const json&)> f) {
    kube::EventHandlers h;
    h.on_add = f;
    h.on_update = [f](const json&, const json& n) { f(n); };
    h.on_delete = f;
    return h;
  };
  policies->store().SetHandlers(handlers(on_policy));
  // Verdicts are counted by the replica whose reconcilers write them.
  std::atomic<bool> leading{false};
  CanaryMetrics canary_metrics(registry);
  kube::EventHandlers canary_handlers = handlers(on_canary);
  canary_handlers.on_update = [&](const json& old_canary, const json& canary) {
    if (leading.load()) canary_metrics.OnUpdate(old_canary, canary);
    on_canary(canary);
  };
  canaries->store().SetHandlers(canary_handlers);
  deployments->store().SetHandlers(handlers(on_deployment));
  pods->store().SetHandlers(handlers(on_pod));
  jobs->store().SetHandlers(handlers(on_job_or_canary_pod));

  for (kube::Informer* i :
       {policies.get(), canaries.get(), deployments.get(), pods.get(), jobs.get()}) {
    i->Start();
  }

  // --- webhooks (every replica) -------------------------------------------
  WebhookServingDeps deps{client.get(),
                          &policies->store(),
                          &canaries->store(),
                          &deployments->store(),
                          &events,
                          &registry,
                          clock};
  AG_ASSIGN_OR_RETURN(std::unique_ptr<WebhookServing> webhooks,
                      WebhookServing::Start(options, deps));

  // --- probes and metrics --------------------------------------------------
  std::atomic<bool> synced{false};
  SideServer health;
  AG_RETURN_IF_ERROR(health.Start(options.health_probe_bind_address, [&](net::HttpServer& s) {
    // Alive while every reconciler worker and the webhook server's event
    // loop make progress; a wedged one fails this and the kubelet restarts us.
    s.Handle("GET", "/healthz", [&](const net::HttpRequest&) {
      const Clock::TimePoint now = clock->Now();
      std::vector<LoopProgress> loops;
      for (ControllerRunner* r : runners) {
        loops.push_back(
            {std::string("reconciler ") + r->name(), r->StalledFor(now), kReconcileStallBound});
      }
      loops.push_back({"webhook server", webhooks->StalledFor(now), kWebhookLoopStallBound});
      Status alive = CheckLiveness(loops);
      return alive.ok() ? Text(200, "ok\n") : Text(503, alive.message() + "\n");
    });
    s.Handle("GET", "/readyz", [&](const net::HttpRequest&) {
      if (!synced.load()) return Text(503, "informers not synced\n");
      std::string why;
      if (!webhooks->Ready(&why)) return Text(503, "webhooks not ready: " + why + "\n");
      return Text(200, "ok\n");
    });
  }));
  SideServer metrics_server;
  AG_RETURN_IF_ERROR(metrics_server.Start(options.metrics_bind_address, [&](net::HttpServer& s) {
    s.Handle("GET", "/metrics", [&](const net::HttpRequest&) {
      net::HttpResponse r = Text(200, registry.Render());
      r.headers.erase("Content-Type");
      r.headers.emplace("Content-Type", metrics::kContentType);
      return r;
    });
  }));
  spdlog::info("health probes on port {}, metrics on port {}, webhooks on port {}", health.port(),
               metrics_server.port(), webhooks->port());
  if (!options.bound_addresses_file.empty()) {
    std::ofstream out(options.bound_addresses_file + ".tmp");
    out << "health=" << health.port() << "\nmetrics=" << metrics_server.port()
        << "\nwebhook=" << webhooks->port() << "\n";
    out.close();
    std::rename((options.bound_addresses_file + ".tmp").c_str(),
                options.bound_addresses_file.c_str());
  }

  for (kube::Informer* i :
       {policies.get(), canaries.get(), deployments.get(), pods.get(), jobs.get()}) {
    if (!i->WaitForSync()) return Unavailable("stopped before the caches synced");
  }
  synced = true;
  spdlog::info("caches synced: {} policies, {} canaries, {} deployments, {} pods",
               policies->store().size(), canaries->store().size(), deployments->store().size(),
               pods->store().size());

  metrics::GaugeHandle is_leader =
      registry
          .AddGauge("allocguard_leader_election_is_leader",
                    "1 while this replica holds the leader lease and runs the reconcilers, else 0.",
                    {"lease"})
          .With({options.leader_election_id});
  auto start_controllers = [&] {
    spdlog::info("leading: starting the reconcilers");
    leading = true;
    is_leader.Set(1);
    for (ControllerRunner* r : runners) r->Start(options.workers);
    // Everything cached is looked at once after (re)gaining leadership.
    for (const json& p : policies->store().List()) on_policy(p);
    for (const json& c : canaries->store().List()) on_canary(c);
    for (const json& p : pods->store().List()) {
      if (Labels(p).count(api::kCanaryLabel) == 0) drift_runner.Enqueue(kube::ObjectKey(p));
    }
  };

  // Periodic work on every replica: certificate rotation and caBundle.
  std::thread ticker([&] {
    while (cancel->SleepFor(clock, std::chrono::seconds(30))) webhooks->Tick();
  });

  Status result = Status::Ok();
  if (options.leader_elect) {
    kube::LeaderElectionConfig le;
    le.lease_namespace = options.operator_namespace;
    le.lease_name = options.leader_election_id;
    le.identity = Identity(options);
    le.on_started_leading = start_controllers;
    le.on_new_leader = [](const std::string& holder) { spdlog::info("leader is {}", holder); };
    kube::LeaderElector elector(client.get(), le);
    result = elector.Run(cancel);
    if (!result.ok()) spdlog::error("leader election ended: {}", result.message());
  } else {
    start_controllers();
    while (cancel->SleepFor(clock, std::chrono::seconds(1))) {
    }
  }

  spdlog::info("stopping");
  cancel->Cancel();
  ticker.join();
  for (ControllerRunner* r : runners) r->Stop();
  webhooks->Stop();
  health.Stop();
  metrics_server.Stop();
  for (kube::Informer* i :
       {policies.get(), canaries.get(), deployments.get(), pods.get(), jobs.get()}) {
    i->Stop();
  }
  return result;
}

}  // namespace allocguard::manager
