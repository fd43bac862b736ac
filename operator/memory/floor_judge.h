#pragma once

// Judging a series of per-minute floors: is the floor flat or ratcheting?
//
// A FloorJudge is asked after every complete minute (final == false) and once
// at the end of the run (final == true). It may decide early; the replay
// engine stops the run when it does and early stopping is enabled. The
// judgement carries the numbers behind it, which flow unchanged into the CSV
// and JSON summaries, the HTML report, ReplayCanary status and the one-line
// explanation users read.

#include <memory>
#include <span>
#include <string>

#include "operator/memory/memory_sample.h"

namespace allocguard::memory {

enum class FloorDecision {
  kContinue,      // not enough evidence yet; ask again after the next minute
  kFlat,          // the floor stays within ±max slope
  kRatchet,       // the floor rises faster than max slope
  kInconclusive,  // the run ended without enough evidence either way
};

const char* FloorDecisionName(FloorDecision d);

struct FloorJudgement {
  FloorDecision decision = FloorDecision::kContinue;
  // Least-squares slope of the floors against time, GiB per hour.
  double slope_gib_per_h = 0;
  // Confidence interval of the slope; equal to the estimate when the judge has
  // no interval (too few floors).
  double slope_low_gib_per_h = 0;
  double slope_high_gib_per_h = 0;
  // Robust companions; NaN when not computed.
  double theil_sen_gib_per_h = 0;
  double trend_p_value = 1;
  int minutes_used = 0;  // floors the decision rests on
  std::string method;    // which rule decided, e.g. "fixed-duration" or "sequential"
  std::string explanation;
};

struct JudgeOptions {
  double max_slope_gib_per_h = 0.5;
  // No decision before this many floors exist.
  int min_floors = 3;
};

class FloorJudge {
 public:
  virtual ~FloorJudge() = default;
  // floors are the complete post-warm-up minutes so far, in order.
  virtual FloorJudgement Judge(std::span<const MinuteFloor> floors, bool final) const = 0;
};

// The seed's rule: wait for the end of the run, fit one least-squares slope
// and compare it with the threshold. Never decides early.
std::unique_ptr<FloorJudge> NewFixedDurationJudge(const JudgeOptions& options);

// The default judge of this build (see floor_judge.cc for which one).
std::unique_ptr<FloorJudge> NewDefaultJudge(const JudgeOptions& options);

struct SlopeFit {
  double slope_bytes_per_minute = 0;
  double intercept_bytes = 0;
  double slope_std_error = 0;  // bytes per minute; 0 when fewer than 3 points
  int n = 0;
  double SlopeGiBPerHour() const { return slope_bytes_per_minute * 60.0 / kBytesPerGiB; }
};

// Ordinary least squares of floor_bytes against minute. REQUIRES: floors.size() >= 2.
SlopeFit FitFloorSlope(std::span<const MinuteFloor> floors);

}  // namespace allocguard::memory
