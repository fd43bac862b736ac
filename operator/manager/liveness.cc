#include "operator/manager/liveness.h"

namespace allocguard::manager {

Status CheckLiveness(const std::vector<LoopProgress>& loops) {
  std::string wedged;
  for (const LoopProgress& loop : loops) {
    if (loop.stalled_for <= loop.bound) continue;
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(loop.stalled_for);
    const auto bound = std::chrono::duration_cast<std::chrono::seconds>(loop.bound);
    if (!wedged.empty()) wedged += "; ";
    wedged += loop.name + " has made no progress for " + std::to_string(seconds.count()) +
              " s with work waiting (bound " + std::to_string(bound.count()) + " s)";
  }
  if (wedged.empty()) return Status::Ok();
  return Unavailable(wedged);
}

}  // namespace allocguard::manager
