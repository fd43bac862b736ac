#pragma once

// Lease-based leader election (coordination.k8s.io/v1), client-go's algorithm:
//   - every retry_period (jittered by up to 1.2x), GET the Lease or create it;
//   - another holder's lease counts as expired only when its record has not
//     changed for lease_duration as measured by OUR monotonic clock since we
//     last saw it change (no comparison of renewTime with local time, so
//     clock skew between nodes does not matter);
//   - take over or renew with an Update carrying the resourceVersion, so a
//     409 means someone else won;
//   - the leader renews every retry_period and gives up leadership when no
//     renewal succeeded within renew_deadline;
//   - on a clean shutdown the leader releases the lease (empty holder), so a
//     successor need not wait for it to expire.

#include <atomic>
#include <functional>
#include <mutex>
#include <string>

#include "operator/kube/client.h"

namespace allocguard::kube {

struct LeaderElectionConfig {
  std::string lease_namespace;
  std::string lease_name;
  std::string identity;  // unique per process, e.g. hostname + "_" + random
  Clock::Duration lease_duration = std::chrono::seconds(15);
  Clock::Duration renew_deadline = std::chrono::seconds(10);
  Clock::Duration retry_period = std::chrono::seconds(2);
  bool release_on_cancel = true;
  // Called on the elector's thread; must return promptly (start work on
  // another thread). on_stopped_leading runs after leadership ended, either
  // lost or released.
  std::function<void()> on_started_leading;
  std::function<void()> on_stopped_leading;
  std::function<void(const std::string& holder)> on_new_leader;  // holder changed
};

// Checks lease_duration > renew_deadline > 1.2 * retry_period and the names.
Status ValidateLeaderElectionConfig(const LeaderElectionConfig& config);

class LeaderElector {
 public:
  LeaderElector(Client* client, LeaderElectionConfig config);

  // Campaigns until leading, then leads until the lease is lost or cancel
  // fires. Returns OK after a clean cancel (lease released), kUnavailable when
  // leadership was lost (the process should exit, as controller-runtime's
  // managers do), kInvalidArgument on a bad config.
  Status Run(Canceller* cancel);

  bool IsLeader() const { return leading_.load(); }

  // One acquire-or-renew attempt; true when we hold the lease afterwards.
  bool TryAcquireOrRenewForTest() { return TryAcquireOrRenew(); }

 private:
  bool TryAcquireOrRenew();
  void Release();
  Clock::Duration Jittered(Clock::Duration d);

  Client* client_;
  LeaderElectionConfig config_;
  Clock* clock_;
  std::atomic<bool> leading_{false};
  // What we last saw of the lease and when (monotonic) it last changed.
  Object observed_spec_;
  std::string observed_rv_;
  Clock::TimePoint observed_at_{};
  std::string last_holder_;
};

}  // namespace allocguard::kube
