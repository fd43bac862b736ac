#include "operator/api/types.h"

#include <cstdint>
#include <cstdio>

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

const char* CanaryPhaseName(CanaryPhase phase) {
  switch (phase) {
    case CanaryPhase::kPending:
      return "Pending";
    case CanaryPhase::kRunning:
      return "Running";
    case CanaryPhase::kCompleted:
      return "Completed";
    case CanaryPhase::kFailed:
      return "Failed";
  }
  return "Unknown";
}

std::optional<CanaryPhase> CanaryPhaseFromName(std::string_view name) {
  for (CanaryPhase p : {CanaryPhase::kPending, CanaryPhase::kRunning, CanaryPhase::kCompleted,
                        CanaryPhase::kFailed}) {
    if (name == CanaryPhaseName(p)) return p;
  }
  return std::nullopt;
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

std::string LibcName(Libc libc) {
  switch (libc) {
    case Libc::kAuto:
      return "auto";
    case Libc::kGlibc:
      return "glibc";
    case Libc::kMusl:
      return "musl";
  }
  return "unknown";
}

std::optional<Libc> LibcFromName(std::string_view name) {
  for (Libc libc : {Libc::kAuto, Libc::kGlibc, Libc::kMusl}) {
    if (LibcName(libc) == name) return libc;
  }
  return std::nullopt;
}

bool HasBuildFor(Allocator allocator, Libc libc) {
  if (allocator == Allocator::kGlibc) return false;
  return !(allocator == Allocator::kTcmalloc && libc == Libc::kMusl);
}

std::string ContentHash(std::string_view text) {
  uint64_t hash = 14695981039346656037ull;  // FNV-1a, 64 bits
  for (unsigned char ch : text) {
    hash ^= ch;
    hash *= 1099511628211ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

}  // namespace allocguard::api
