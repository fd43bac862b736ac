#include "operator/api/types.h"

namespace allocguard::api {

std::string AllocatorName(Allocator allocator) {
  switch (allocator) {
    case Allocator::kGlibc:
      return "glibc";
    case Allocator::kJemalloc:
      return "jemalloc";
    case Allocator::kMimalloc:
      return "mimalloc";
    case Allocator::kTcmalloc:
      return "tcmalloc";
  }
  return "unknown";
}

std::string RolloutModeName(RolloutMode mode) {
  switch (mode) {
    case RolloutMode::kEnforce:
      return "Enforce";
    case RolloutMode::kAudit:
      return "Audit";
    case RolloutMode::kOff:
      return "Off";
  }
  return "unknown";
}

std::string GuardActionName(GuardAction action) {
  switch (action) {
    case GuardAction::kNone:
      return "None";
    case GuardAction::kBackpressure:
      return "Backpressure";
    case GuardAction::kRestart:
      return "Restart";
  }
  return "unknown";
}

}  // namespace allocguard::api
