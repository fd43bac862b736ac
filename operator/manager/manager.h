#pragma once

// The operator process: what `allocguard operator` runs. RunManager wires
// these runnables into a Manager (runnable_manager.h) and runs it:
//
//   - informers on AllocatorPolicies, ReplayCanaries, Deployments, Pods and
//     allocguard's canary Jobs (cluster-wide or one namespace), whose events
//     reach the reconcilers' queues through the maps of event_routing.h;
//   - the admission webhooks over TLS (webhook_serving.h), served by every
//     replica (they read the informer caches and need no leadership), and
//     their certificate upkeep every 30 s;
//   - the reconcilers (policy, canary, rollout, drift), run only by the
//     replica that holds the leader lease, so two replicas never both start
//     a canary; losing the lease ends the process, as controller-runtime's
//     managers do, and the Deployment restarts it as a follower;
//   - /healthz and /readyz on the health probe address, /metrics on the
//     metrics address.

#include "operator/common/status.h"
#include "operator/kube/cancel.h"
#include "operator/manager/manager_config.h"

namespace allocguard::manager {

// Runs the operator until cancel fires (OK) or leadership is lost
// (kUnavailable). Configuration and start-up errors return at once.
Status RunManager(const ManagerOptions& options, kube::Canceller* cancel);

}  // namespace allocguard::manager
