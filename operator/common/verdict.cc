#include "operator/common/verdict.h"

#include <ostream>

namespace allocguard {

const char* VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kFlat:
      return "Flat";
    case Verdict::kRatchet:
      return "Ratchet";
    case Verdict::kAllocatorRetention:
      return "AllocatorRetention";
    case Verdict::kLeak:
      return "Leak";
    case Verdict::kOOMKilled:
      return "OOMKilled";
    case Verdict::kErrors:
      return "Errors";
    case Verdict::kFailed:
      return "Failed";
    case Verdict::kInconclusive:
      return "Inconclusive";
  }
  return "Unknown";
}

std::optional<Verdict> VerdictFromName(std::string_view name) {
  for (Verdict v : kAllVerdicts) {
    if (name == VerdictName(v)) return v;
  }
  return std::nullopt;
}

int ExitCodeForVerdict(Verdict verdict) {
  switch (verdict) {
    case Verdict::kFlat:
      return 0;
    case Verdict::kRatchet:
      return 2;
    case Verdict::kAllocatorRetention:
      return 3;
    case Verdict::kLeak:
      return 4;
    case Verdict::kOOMKilled:
      return 5;
    case Verdict::kErrors:
      return 6;
    case Verdict::kFailed:
      return 7;
    case Verdict::kInconclusive:
      return 8;
  }
  return 1;
}

void PrintTo(Verdict verdict, std::ostream* os) { *os << VerdictName(verdict); }

}  // namespace allocguard
