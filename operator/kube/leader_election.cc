#include "operator/kube/leader_election.h"

#include <random>

#include "operator/common/rfc3339.h"

namespace allocguard::kube {

Status ValidateLeaderElectionConfig(const LeaderElectionConfig& c) {
  if (c.lease_name.empty() || c.lease_namespace.empty()) {
    return InvalidArgument("leader election needs a lease name and namespace");
  }
  if (c.identity.empty()) return InvalidArgument("leader election needs an identity");
  if (c.lease_duration <= c.renew_deadline) {
    return InvalidArgument("leader election: lease duration must exceed the renew deadline");
  }
  if (c.renew_deadline <= c.retry_period * 12 / 10) {
    return InvalidArgument("leader election: renew deadline must exceed 1.2 x the retry period");
  }
  return Status::Ok();
}

LeaderElector::LeaderElector(Client* client, LeaderElectionConfig config)
    : client_(client), config_(std::move(config)), clock_(client->clock()) {}

Clock::Duration LeaderElector::Jittered(Clock::Duration d) {
  static thread_local std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<double> dist(0.0, 1.2);
  return d + std::chrono::duration_cast<Clock::Duration>(d * dist(rng));
}

bool LeaderElector::TryAcquireOrRenew() {
  const std::string now = FormatRfc3339(clock_->WallNow(), /*micros=*/true);
  const int duration_s = static_cast<int>(
      std::chrono::duration_cast<std::chrono::seconds>(config_.lease_duration).count());
  ApiResult<Object> got = client_->Get(Leases(), config_.lease_namespace, config_.lease_name);
  if (!got.ok()) {
    if (!got.error().IsNotFound()) return false;
    Object lease = {
        {"apiVersion", "coordination.k8s.io/v1"},
        {"kind", "Lease"},
        {"metadata", {{"name", config_.lease_name}, {"namespace", config_.lease_namespace}}},
        {"spec",
         {{"holderIdentity", config_.identity},
          {"leaseDurationSeconds", duration_s},
          {"acquireTime", now},
          {"renewTime", now},
          {"leaseTransitions", 0}}}};
    ApiResult<Object> created = client_->Create(Leases(), config_.lease_namespace, lease);
    if (!created.ok()) return false;  // someone else created it first
    observed_spec_ = ObjectField(*created, "spec");
    observed_rv_ = ResourceVersionOf(*created);
    observed_at_ = clock_->Now();
    return true;
  }
  Object& lease = *got;
  if (!lease.is_object()) return false;
  Object spec = ObjectField(lease, "spec");
  std::string holder = StringField(spec, "holderIdentity");
  if (holder != last_holder_) {
    last_holder_ = holder;
    if (config_.on_new_leader && !holder.empty()) config_.on_new_leader(holder);
  }
  // Any change of the record restarts the local expiry clock.
  if (ResourceVersionOf(lease) != observed_rv_ || spec != observed_spec_) {
    observed_spec_ = spec;
    observed_rv_ = ResourceVersionOf(lease);
    observed_at_ = clock_->Now();
  }
  Clock::Duration their_duration = config_.lease_duration;
  if (auto d = spec.find("leaseDurationSeconds"); d != spec.end() && d->is_number_integer()) {
    their_duration = std::chrono::seconds(d->get<int>());
  }
  bool mine = holder == config_.identity;
  if (!holder.empty() && !mine && clock_->Now() < observed_at_ + their_duration) {
    return false;  // held by someone else and not expired
  }
  Object next = spec;
  if (!mine) {
    next["acquireTime"] = now;
    next["leaseTransitions"] = IntField(spec, "leaseTransitions") + 1;
  }
  next["holderIdentity"] = config_.identity;
  next["leaseDurationSeconds"] = duration_s;
  next["renewTime"] = now;
  lease["spec"] = next;
  ApiResult<Object> updated = client_->Update(Leases(), lease);
  if (!updated.ok()) return false;  // 409: another candidate won this round
  observed_spec_ = ObjectField(*updated, "spec");
  observed_rv_ = ResourceVersionOf(*updated);
  observed_at_ = clock_->Now();
  return true;
}

void LeaderElector::Release() {
  ApiResult<Object> got = client_->Get(Leases(), config_.lease_namespace, config_.lease_name);
  if (!got.ok()) return;
  Object& lease = *got;
  Object spec = ObjectField(lease, "spec");
  if (StringField(spec, "holderIdentity") != config_.identity) return;
  spec["holderIdentity"] = nullptr;
  spec["leaseDurationSeconds"] = 1;
  spec["renewTime"] = FormatRfc3339(clock_->WallNow(), true);
  lease["spec"] = spec;
  (void)client_->Update(Leases(), lease);
}

Status LeaderElector::Run(Canceller* cancel) {
  AG_RETURN_IF_ERROR(ValidateLeaderElectionConfig(config_));
  while (!TryAcquireOrRenew()) {
    if (!cancel->SleepFor(clock_, Jittered(config_.retry_period))) return Status::Ok();
  }
  leading_.store(true);
  if (config_.on_started_leading) config_.on_started_leading();
  Status result = Status::Ok();
  while (true) {
    if (!cancel->SleepFor(clock_, config_.retry_period)) break;
    Clock::TimePoint deadline = clock_->Now() + config_.renew_deadline;
    bool renewed = false;
    while (!cancel->cancelled()) {
      if (TryAcquireOrRenew()) {
        renewed = true;
        break;
      }
      if (clock_->Now() + config_.retry_period > deadline) break;
      if (!cancel->SleepFor(clock_, config_.retry_period)) break;
    }
    if (cancel->cancelled()) break;
    if (!renewed) {
      result = Unavailable("lost the lease " + config_.lease_namespace + "/" + config_.lease_name +
                           ": no renewal within the renew deadline");
      break;
    }
  }
  leading_.store(false);
  if (result.ok() && config_.release_on_cancel) Release();
  if (config_.on_stopped_leading) config_.on_stopped_leading();
  return result;
}

}  // namespace allocguard::kube
