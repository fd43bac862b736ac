#pragma once

// Liveness of the operator process: every loop that must keep making
// progress (each reconciler's workers, the webhook server's event loop)
// reports how long work has waited for it with no progress
// (Heartbeat::StalledFor). The process is alive while each is within its
// bound; a restart is the cure for one that is not.

#include <string>
#include <vector>

#include "operator/common/clock.h"
#include "operator/common/status.h"

namespace allocguard::manager {

struct LoopProgress {
  std::string name;             // "reconciler policy", "webhook server"
  Clock::Duration stalled_for;  // Heartbeat::StalledFor(now)
  Clock::Duration bound;        // longer than the slowest legitimate step
};

// OK when no loop has stalled beyond its bound; else kUnavailable naming
// every loop that has, and for how long.
Status CheckLiveness(const std::vector<LoopProgress>& loops);

}  // namespace allocguard::manager
