#include "operator/manager/manager.h"
#include "operator/admission/allocator_injection.h"

#include <cstdio>
#include <fstream>
#include <string_view>
#include <thread>

#include <spdlog/spdlog.h>

#include "controllers/reconcilers.h"
#include "operator/api/names.h"
#include "operator/api/workload_kinds.h"
#include "operator/api/workloads.h"
#include "operator/kube/client.h"
#include "operator/kube/event_recorder.h"
#include "operator/kube/informer.h"
#include "operator/kube/leader_election.h"
#include "operator/kube/object.h"
#include "operator/manager/canary_metrics.h"
#include "operator/manager/controller_runner.h"
#include "operator/manager/event_routing.h"
#include "operator/manager/heap_return.h"
#include "operator/manager/http_server_runnable.h"
#include "operator/manager/liveness.h"
#include "operator/manager/rollout_metrics.h"
#include "operator/manager/runnable_manager.h"
#include "operator/manager/webhook_serving.h"
#include "operator/metrics/process_metrics.h"
#include "operator/metrics/registry.h"

namespace allocguard::manager {
namespace {

using nlohmann::json;

// One reconcile may make several API calls, each bounded by the client's
// 30 s timeouts; longer than this inside one key is a wedged worker.
constexpr Clock::Duration kReconcileStallBound = std::chrono::minutes(5);
// The webhook server's event loop turns at least once a second.
constexpr Clock::Duration kWebhookLoopStallBound = std::chrono::seconds(30);
// Certificate rotation and caBundle upkeep, on every replica.
constexpr Clock::Duration kWebhookUpkeepPeriod = std::chrono::seconds(30);
// How often the heap gives its free pages back (ReturnFreedHeap).
constexpr Clock::Duration kHeapTrimPeriod = std::chrono::seconds(10);

// --- runnables ---------------------------------------------------------------

class InformerRunnable final : public Runnable {
 public:
  InformerRunnable(std::string kind, kube::Informer* informer)
      : name_("informer " + std::move(kind)), informer_(informer) {}
  std::string name() const override { return name_; }
  Status Start(kube::Canceller* /*cancel*/) override {
    informer_->Start();
    return Status::Ok();
  }
  void Stop() override { informer_->Stop(); }
  bool WaitForSync() override { return informer_->WaitForSync(); }

 private:
  std::string name_;
  kube::Informer* informer_;
};

// Calls tick every period on its own thread until the manager cancels.
class Ticker final : public Runnable {
 public:
  Ticker(std::string name, Clock* clock, Clock::Duration period, std::function<void()> tick)
      : name_(std::move(name)), clock_(clock), period_(period), tick_(std::move(tick)) {}
  ~Ticker() override { Stop(); }
  std::string name() const override { return name_; }
  Status Start(kube::Canceller* cancel) override {
    thread_ = std::thread([this, cancel] {
      while (cancel->SleepFor(clock_, period_)) tick_();
    });
    return Status::Ok();
  }
  void Stop() override {
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::string name_;
  Clock* clock_;
  Clock::Duration period_;
  std::function<void()> tick_;
  std::thread thread_;
};

class LeaseLeaderElection final : public LeaderElection {
 public:
  LeaseLeaderElection(kube::Client* client, kube::LeaderElectionConfig config)
      : client_(client), config_(std::move(config)) {}
  Status Run(kube::Canceller* cancel, std::function<void()> on_started_leading) override {
    kube::LeaderElectionConfig le = config_;
    le.on_started_leading = std::move(on_started_leading);
    le.on_new_leader = [](const std::string& holder) { spdlog::info("leader is {}", holder); };
    kube::LeaderElector elector(client_, le);
    return elector.Run(cancel);
  }

 private:
  kube::Client* client_;
  kube::LeaderElectionConfig config_;
};

// --- caches ------------------------------------------------------------------

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

struct Caches {
  std::unique_ptr<kube::Informer> policies, canaries, deployments, pods, jobs;
  std::unique_ptr<kube::Informer> statefulsets, daemonsets;

  std::vector<std::pair<std::string, kube::Informer*>> All() const {
    return {{"allocatorpolicies", policies.get()},
            {"replaycanaries", canaries.get()},
            {"deployments", deployments.get()},
            {"pods", pods.get()},
            {"jobs", jobs.get()},
            {"statefulsets", statefulsets.get()},
            {"daemonsets", daemonsets.get()}};
  }
  WatchedStores Stores() const {
    WatchedStores stores{&policies->store(), &canaries->store(), &deployments->store(),
                         &pods->store(), &jobs->store()};
    stores.statefulsets = &statefulsets->store();
    stores.daemonsets = &daemonsets->store();
    return stores;
  }
};

Caches MakeCaches(kube::Client* client, const ManagerOptions& options) {
  // Packed caches (kube::Store::SetPacked) hold the workloads, Pods and
  // canaries, which a cluster has by the ten thousand (a canary per distinct
  // template) and the reconcilers read a few at a time through their
  // indexes; policies, which every admission reads, stay trees.
  // A slim cache's filter leaves out, while each object is parsed, what its
  // transform drops anyway (api::KeptBySlimDeployment and the like).
  auto make = [&](const kube::ResourceType& type, const std::string& label_selector,
                  const std::function<void(json&)>& slim, bool packed = false,
                  MemberFilter member_filter = nullptr) {
    kube::InformerOptions io;
    io.namespace_ = options.watch_namespace;
    io.label_selector = label_selector;
    io.packed = packed;
    io.member_filter = std::move(member_filter);
    io.transform = [typed = TypedTransform(type), slim](json& object) {
      typed(object);
      if (slim) slim(object);
    };
    return std::make_unique<kube::Informer>(client, type, io);
  };
  Caches c;
  c.policies = make(kube::AllocatorPolicies(), "", nullptr);
  c.canaries = make(kube::ReplayCanaries(), "", nullptr, /*packed=*/true);
  c.deployments = make(kube::Deployments(), "", api::SlimDeployment, /*packed=*/true,
                       api::KeptBySlimDeployment);
  c.statefulsets = make(kube::StatefulSets(), "", api::SlimStatefulSet, /*packed=*/true,
                        api::KeptBySlimStatefulSet);
  c.daemonsets =
      make(kube::DaemonSets(), "", api::SlimDeployment, /*packed=*/true, api::KeptBySlimDeployment);
  c.pods = make(kube::Pods(), "", api::SlimPod, /*packed=*/true, api::KeptBySlimPod);
  c.jobs =
      make(kube::Jobs(), std::string(api::kManagedByLabel) + "=" + api::kManagedByValue, nullptr);
  for (const auto& [kind, informer] : c.All()) controllers::AddNamespaceIndex(informer->store());
  controllers::AddCanaryJobIndex(c.pods->store());
  controllers::AddCanaryIndexes(c.canaries->store());
  for (kube::Informer* workloads :
       {c.deployments.get(), c.statefulsets.get(), c.daemonsets.get()}) {
    AddHeldIndex(workloads->store());
    controllers::AddMeasuredTemplateIndex(workloads->store());
  }
  return c;
}

void AddCacheMetrics(metrics::Registry& registry, const Caches& c) {
  kube::Store* policies = &c.policies->store();
  kube::Store* deployments = &c.deployments->store();
  kube::Store* pods = &c.pods->store();
  registry.AddGaugeFunc("allocguard_governed_policies", "AllocatorPolicies in the cache.",
                        [policies] { return static_cast<double>(policies->size()); });
  registry.AddGaugeFunc("allocguard_cached_deployments", "Deployments in the cache.",
                        [deployments] { return static_cast<double>(deployments->size()); });
  registry.AddGaugeFunc("allocguard_cached_pods", "Pods in the cache.",
                        [pods] { return static_cast<double>(pods->size()); });
  AddHeldRolloutMetrics(registry, "Deployment", *deployments);
  AddHeldRolloutMetrics(registry, "StatefulSet", c.statefulsets->store());
  AddHeldRolloutMetrics(registry, "DaemonSet", c.daemonsets->store());
}

// --- reconcilers -------------------------------------------------------------

controllers::ControllerContext MakeControllerContext(const ManagerOptions& options,
                                                     kube::Client* client, const Caches& c,
                                                     kube::EventRecorder* events, Clock* clock,
                                                     metrics::Registry* registry) {
  controllers::ControllerContext ctx;
  ctx.client = client;
  ctx.policies = &c.policies->store();
  ctx.canaries = &c.canaries->store();
  ctx.deployments = &c.deployments->store();
  ctx.statefulsets = &c.statefulsets->store();
  ctx.daemonsets = &c.daemonsets->store();
  ctx.pods = &c.pods->store();
  ctx.jobs = &c.jobs->store();
  ctx.events = events;
  ctx.clock = clock;
  ctx.metrics = registry;
  ctx.operator_namespace = options.operator_namespace;
  ctx.job_options.image = options.image;
  // The operator runs in the image the canary Jobs install from.
  ctx.job_options.stats_agent = admission::StatsAgentShipped(ctx.job_options.allocator_dir);
  ctx.max_concurrent_canaries = options.max_concurrent_canaries;
  ctx.max_concurrent_canaries_per_namespace = options.max_concurrent_canaries_per_namespace;
  return ctx;
}

// Adds the reconcilers (a rollout reconciler per workload kind) as
// leader-only controllers; returns their runners.
std::vector<ControllerRunner*> AddControllers(Manager& manager,
                                              const controllers::ControllerContext& ctx,
                                              int workers, Clock* clock,
                                              metrics::Registry* registry) {
  std::vector<std::unique_ptr<controllers::Reconciler>> reconcilers;
  reconcilers.push_back(std::make_unique<controllers::PolicyReconciler>(ctx));
  reconcilers.push_back(std::make_unique<controllers::CanaryReconciler>(ctx));
  for (controllers::WorkloadKind kind :
       {controllers::WorkloadKind::kDeployment, controllers::WorkloadKind::kStatefulSet,
        controllers::WorkloadKind::kDaemonSet}) {
    reconcilers.push_back(std::make_unique<controllers::RolloutReconciler>(ctx, kind));
  }
  reconcilers.push_back(std::make_unique<controllers::DriftReconciler>(ctx));
  std::vector<ControllerRunner*> runners;
  for (auto& reconciler : reconcilers) {
    auto runnable = std::make_unique<ControllerRunnable>(
        std::make_unique<ControllerRunner>(std::move(reconciler), clock, registry), workers);
    runners.push_back(&runnable->runner());
    manager.AddController(std::move(runnable));
  }
  return runners;
}

// --- probes, metrics, bound addresses ----------------------------------------

net::HttpResponse ProbeResponse(const Status& status) {
  return status.ok() ? TextResponse(200, "ok\n") : TextResponse(503, status.message() + "\n");
}

// Alive while every reconciler worker and the webhook server's event loop
// make progress; a wedged one fails /healthz and the kubelet restarts us.
// Ready once the caches synced and while the webhooks answer.
void AddProbeChecks(Manager& manager, const std::vector<ControllerRunner*>& runners,
                    const WebhookServing* webhooks, Clock* clock) {
  manager.AddHealthzCheck([runners, webhooks, clock] {
    const Clock::TimePoint now = clock->Now();
    std::vector<LoopProgress> loops;
    loops.reserve(runners.size() + 1);
    for (ControllerRunner* r : runners) {
      loops.push_back(
          {std::string("reconciler ") + r->name(), r->StalledFor(now), kReconcileStallBound});
    }
    loops.push_back({"webhook server", webhooks->StalledFor(now), kWebhookLoopStallBound});
    return CheckLiveness(loops);
  });
  manager.AddReadyzCheck([webhooks] {
    std::string why;
    if (!webhooks->Ready(&why)) return Unavailable("webhooks not ready: " + why);
    return Status::Ok();
  });
}

// Logs the bound ports and writes them to options.bound_addresses_file
// (atomically: a reader never sees half of it).
Status ReportBoundAddresses(const ManagerOptions& options, int health, int metrics, int webhook) {
  spdlog::info("health probes on port {}, metrics on port {}, webhooks on port {}", health, metrics,
               webhook);
  if (options.bound_addresses_file.empty()) return Status::Ok();
  std::ofstream out(options.bound_addresses_file + ".tmp");
  out << "health=" << health << "\nmetrics=" << metrics << "\nwebhook=" << webhook << "\n";
  out.close();
  std::rename((options.bound_addresses_file + ".tmp").c_str(),
              options.bound_addresses_file.c_str());
  return Status::Ok();
}

void AddServers(Manager& manager, const ManagerConfig& config, metrics::Registry* registry,
                const WebhookServing* webhooks) {
  auto* health = static_cast<HttpServerRunnable*>(manager.Add(std::make_unique<HttpServerRunnable>(
      "health probe server", config.health_probe_address, [&manager](net::HttpServer& s) {
        s.Handle("GET", "/healthz",
                 [&manager](const net::HttpRequest&) { return ProbeResponse(manager.Healthz()); });
        s.Handle("GET", "/readyz",
                 [&manager](const net::HttpRequest&) { return ProbeResponse(manager.Readyz()); });
      })));
  auto* metrics_server =
      static_cast<HttpServerRunnable*>(manager.Add(std::make_unique<HttpServerRunnable>(
          "metrics server", config.metrics_address, [registry](net::HttpServer& s) {
            s.Handle("GET", "/metrics", [registry](const net::HttpRequest&) {
              net::HttpResponse r = TextResponse(200, registry->Render());
              r.headers.erase("Content-Type");
              r.headers.emplace("Content-Type", metrics::kContentType);
              return r;
            });
          })));
  const ManagerOptions* options = &config.options;
  manager.Add(std::make_unique<FunctionRunnable>(
      "bound addresses", [options, health, metrics_server, webhooks](kube::Canceller*) {
        return ReportBoundAddresses(*options, health->port(), metrics_server->port(),
                                    webhooks->port());
      }));
}

}  // namespace

Status RunManager(const ManagerOptions& options, kube::Canceller* cancel) {
  Clock* clock = RealClock::Get();
  AG_ASSIGN_OR_RETURN(const ManagerConfig config, LoadManagerConfig(options));
  AG_ASSIGN_OR_RETURN(std::unique_ptr<kube::Client> client, kube::Client::Create(config.rest));

  metrics::Registry registry;
  metrics::AddProcessMetrics(registry);
  metrics::AddBuildInfo(registry);
  Caches caches = MakeCaches(client.get(), options);
  AddCacheMetrics(registry, caches);
  kube::EventRecorderOptions eo;
  eo.reporting_instance = options.pod_name;
  kube::EventRecorder events(client.get(), eo);
  const controllers::ControllerContext ctx =
      MakeControllerContext(options, client.get(), caches, &events, clock, &registry);
  CanaryMetrics canary_metrics(registry);
  metrics::GaugeHandle is_leader =
      registry
          .AddGauge("allocguard_leader_election_is_leader",
                    "1 while this replica holds the leader lease and runs the reconcilers, else 0.",
                    {"lease"})
          .With({options.leader_election_id});

  Manager manager(options.leader_elect
                      ? std::make_unique<LeaseLeaderElection>(client.get(), config.leader_election)
                      : nullptr);
  // Every replica: caches, webhooks and their upkeep, probes, metrics.
  for (const auto& [kind, informer] : caches.All()) {
    manager.Add(std::make_unique<InformerRunnable>(kind, informer));
  }
  auto* webhooks = static_cast<WebhookServing*>(manager.Add(std::make_unique<WebhookServing>(
      options,
      WebhookServingDeps{client.get(), &caches.policies->store(), &caches.canaries->store(),
                         &caches.deployments->store(), &events, &registry, clock,
                         &caches.statefulsets->store(), &caches.daemonsets->store()})));
  spdlog::info("heap: {} malloc, free pages returned every {} s",
               HeapAllocatorName(RunningHeapAllocator()),
               std::chrono::duration_cast<std::chrono::seconds>(kHeapTrimPeriod).count());
  manager.Add(std::make_unique<Ticker>("heap trim", clock, kHeapTrimPeriod, ReturnFreedHeap));
  manager.Add(std::make_unique<Ticker>("webhook upkeep", clock, kWebhookUpkeepPeriod,
                                       [webhooks] { webhooks->Tick(); }));
  AddServers(manager, config, &registry, webhooks);
  // The leader: the reconcilers, fed by the caches' events.
  std::vector<ControllerRunner*> runners =
      AddControllers(manager, ctx, options.workers, clock, &registry);
  AddEventRouting(manager, caches.Stores());
  // A canary that ends wakes the canaries waiting for its slot.
  for (ControllerRunner* runner : runners) {
    if (std::string_view(runner->name()) == kCanaryController) {
      ctx.canary_slots->SetWake([runner](const std::string& key) { runner->Enqueue(key); });
    }
  }
  AddProbeChecks(manager, runners, webhooks, clock);
  // Verdicts are counted by the replica whose reconcilers write them.
  manager.OnUpdate(&caches.canaries->store(),
                   [&manager, &canary_metrics](const json& before, const json& after) {
                     if (manager.leading()) canary_metrics.OnUpdate(before, after);
                   });
  manager.OnSynced([&caches] {
    spdlog::info("caches synced: {} policies, {} canaries, {} deployments, {} pods",
                 caches.policies->store().size(), caches.canaries->store().size(),
                 caches.deployments->store().size(), caches.pods->store().size());
  });
  manager.OnStartedLeading([&is_leader] {
    spdlog::info("leading: starting the reconcilers");
    is_leader.Set(1);
  });
  return manager.Run(cancel);
}

}  // namespace allocguard::manager
