#pragma once

// Verdicts: the one list of what a canary run can conclude, carried as an
// enum from the replay engine (memory::DecideVariantVerdict,
// memory::ClassifyVariants) through the driver's termination message, the
// ReplayCanary status and the rollout gate, and written as its name only
// where a person or the API reads it. Every other module compares values of
// this enum, never the names.

#include <array>
#include <iosfwd>
#include <optional>
#include <string_view>

namespace allocguard {

enum class Verdict {
  kFlat,                // the floor stays within ±max slope
  kRatchet,             // the floor climbs faster than max slope
  kAllocatorRetention,  // the candidate ratchets while another allocator stays flat (a canary's)
  kLeak,                // every variant ratchets on the same load (a canary's)
  kOOMKilled,           // the kernel's OOM killer fired in the workload's cgroup
  kErrors,              // responses outside the expected set
  kFailed,              // the workload did not start, or died, or nothing was measured
  kInconclusive,        // too few minutes, too noisy, or the workload fell behind
};

inline constexpr std::array<Verdict, 8> kAllVerdicts = {
    Verdict::kFlat,   Verdict::kRatchet,     Verdict::kAllocatorRetention,
    Verdict::kLeak,   Verdict::kOOMKilled,   Verdict::kErrors,
    Verdict::kFailed, Verdict::kInconclusive};

// "Flat", "AllocatorRetention", ...: the name in status, events, metrics and
// the CLI's output.
const char* VerdictName(Verdict verdict);

// The verdict a name written by VerdictName stands for; nullopt for any
// other text (the caller says what an unknown name means where it reads it).
std::optional<Verdict> VerdictFromName(std::string_view name);

// The exit code of `allocguard replay` and `analyze` for a run's overall
// verdict: 0 Flat, 2 Ratchet, 3 AllocatorRetention, 4 Leak, 5 OOMKilled,
// 6 Errors, 7 Failed, 8 Inconclusive (1 is left for a command that failed).
int ExitCodeForVerdict(Verdict verdict);

// For test failure messages (GoogleTest finds it): the name.
void PrintTo(Verdict verdict, std::ostream* os);

}  // namespace allocguard
