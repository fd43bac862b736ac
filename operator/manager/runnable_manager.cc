#include "operator/manager/runnable_manager.h"

#include <condition_variable>

#include <spdlog/spdlog.h>

namespace allocguard::manager {

void WaitForCancel(kube::Canceller* cancel) {
  std::mutex mu;
  std::condition_variable cv;
  bool fired = false;
  const int id = cancel->Register([&] {
    std::lock_guard<std::mutex> lock(mu);
    fired = true;
    cv.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return fired; });
  }
  cancel->Unregister(id);
}

Manager::Manager(std::unique_ptr<LeaderElection> election) : election_(std::move(election)) {}

Manager::~Manager() { StopAll(); }

Runnable* Manager::Add(std::unique_ptr<Runnable> runnable) {
  runnables_.push_back(std::move(runnable));
  return runnables_.back().get();
}

Controller* Manager::AddController(std::unique_ptr<Controller> controller) {
  Controller* raw = controller.get();
  controllers_[raw->name()] = raw;
  Add(std::move(controller));
  return raw;
}

Manager::StoreRoutes& Manager::RoutesOf(kube::Store* store) {
  for (StoreRoutes& r : routes_) {
    if (r.store == store) return r;
  }
  routes_.push_back(StoreRoutes{store, {}, {}});
  return routes_.back();
}

void Manager::Watches(kube::Store* store, MapFunc on_event, MapFunc on_leading) {
  RoutesOf(store).watches.push_back(Watch{std::move(on_event), std::move(on_leading)});
}

void Manager::OnUpdate(kube::Store* store, UpdateObserver observer) {
  RoutesOf(store).observers.push_back(std::move(observer));
}

void Manager::OnSynced(std::function<void()> hook) { on_synced_.push_back(std::move(hook)); }

void Manager::OnStartedLeading(std::function<void()> hook) {
  on_started_leading_.push_back(std::move(hook));
}

void Manager::AddHealthzCheck(std::function<Status()> check) {
  healthz_.push_back(std::move(check));
}

void Manager::AddReadyzCheck(std::function<Status()> check) { readyz_.push_back(std::move(check)); }

Status Manager::Healthz() const {
  for (const auto& check : healthz_) {
    if (Status s = check(); !s.ok()) return s;
  }
  return Status::Ok();
}

Status Manager::Readyz() const {
  if (!synced_.load()) return Unavailable("informers not synced");
  for (const auto& check : readyz_) {
    if (Status s = check(); !s.ok()) return s;
  }
  return Status::Ok();
}

std::vector<ReconcileRequest> Manager::MapForTest(kube::Store* store,
                                                  const nlohmann::json& object) const {
  std::vector<ReconcileRequest> out;
  for (const StoreRoutes& r : routes_) {
    if (r.store != store) continue;
    for (const Watch& w : r.watches) {
      for (ReconcileRequest& request : w.on_event(object)) out.push_back(std::move(request));
    }
  }
  return out;
}

void Manager::Route(const std::vector<ReconcileRequest>& requests) {
  for (const ReconcileRequest& request : requests) {
    auto it = controllers_.find(request.controller);
    if (it == controllers_.end()) {
      spdlog::error("no controller {} for {}", request.controller, request.key);
      continue;
    }
    it->second->Enqueue(request.key);
  }
}

void Manager::InstallHandlers() {
  for (const StoreRoutes& r : routes_) {
    // routes_ no longer changes: Run has begun.
    const StoreRoutes* routes = &r;
    auto route = [this, routes](const nlohmann::json& object) {
      for (const Watch& w : routes->watches) Route(w.on_event(object));
    };
    kube::EventHandlers h;
    h.on_add = route;
    h.on_update = [routes, route](const nlohmann::json& old_object, const nlohmann::json& object) {
      for (const UpdateObserver& observe : routes->observers) observe(old_object, object);
      route(object);
    };
    h.on_delete = route;
    r.store->SetHandlers(std::move(h));
  }
}

void Manager::StartLeading(kube::Canceller* cancel) {
  leading_ = true;
  for (const auto& hook : on_started_leading_) hook();
  for (const auto& runnable : runnables_) {
    if (!runnable->NeedsLeaderElection()) continue;
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    Status s = runnable->Start(cancel);
    if (!s.ok()) {
      leader_start_error_ = s.WithContext(runnable->name());
      spdlog::error("{}: {}", runnable->name(), s.message());
      cancel->Cancel();
      return;
    }
    started_.push_back(runnable.get());
  }
  // Everything cached is looked at once after (re)gaining leadership.
  for (const StoreRoutes& r : routes_) {
    for (const Watch& w : r.watches) {
      if (!w.on_leading) continue;
      for (const nlohmann::json& object : r.store->List()) Route(w.on_leading(object));
    }
  }
}

void Manager::StopAll() {
  std::vector<Runnable*> started;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    started.swap(started_);
  }
  // Leader-only runnables first (they use the others), then the rest; each
  // group in reverse order of start.
  for (bool leader_group : {true, false}) {
    // A range-for over std::ranges::reverse_view, which clang-tidy proposes,
    // does not compile with clang 14 over libstdc++ 12's ranges.
    // NOLINTNEXTLINE(modernize-loop-convert)
    for (auto it = started.rbegin(); it != started.rend(); ++it) {
      if ((*it)->NeedsLeaderElection() == leader_group) (*it)->Stop();
    }
  }
}

Status Manager::Run(kube::Canceller* cancel) {
  InstallHandlers();
  for (const auto& runnable : runnables_) {
    if (runnable->NeedsLeaderElection()) continue;
    Status s = runnable->Start(cancel);
    if (!s.ok()) {
      cancel->Cancel();
      StopAll();
      return s;
    }
    std::lock_guard<std::mutex> lock(mu_);
    started_.push_back(runnable.get());
  }
  for (const auto& runnable : runnables_) {
    if (runnable->NeedsLeaderElection()) continue;
    if (!runnable->WaitForSync()) {
      cancel->Cancel();
      StopAll();
      return Unavailable("stopped before the caches synced");
    }
  }
  synced_ = true;
  for (const auto& hook : on_synced_) hook();

  Status result = Status::Ok();
  auto lead = [this, cancel] { StartLeading(cancel); };
  if (election_ != nullptr) {
    result = election_->Run(cancel, lead);
    if (!result.ok()) spdlog::error("leader election ended: {}", result.message());
  } else {
    lead();
    WaitForCancel(cancel);
  }

  spdlog::info("stopping");
  cancel->Cancel();
  StopAll();
  leading_ = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!leader_start_error_.ok()) return leader_start_error_;
  }
  return result;
}

}  // namespace allocguard::manager
