#pragma once

// The guard's actions as pure state machines over its samples, so their
// rules are tested on hand-made tables: the readiness gate's hysteresis for
// Backpressure and the trigger for Restart.

#include <cstdint>
#include <optional>
#include <string>

#include "operator/api/types.h"

namespace allocguard::guard {

// The policy's spec.guard.action; api::GuardActionName and
// api::GuardActionFromName spell and parse it.
using GuardAction = api::GuardAction;

struct HysteresisOptions {
  // The gate closes (not ready) when judged bytes exceed the threshold on
  // this many consecutive samples.
  int samples_above_to_close = 1;
  // It opens again when judged bytes stay at or below release_fraction *
  // threshold on this many consecutive samples.
  double release_fraction = 0.9;
  int samples_below_to_open = 3;
};

// Backpressure's readiness gate. Starts open (ready).
class BackpressureGate {
 public:
  BackpressureGate(int64_t threshold_bytes, HysteresisOptions options)
      : threshold_(threshold_bytes), options_(options) {}

  // Feeds one sample's judged bytes; returns true when the gate changed.
  bool Observe(int64_t judged_bytes);
  bool open() const { return open_; }
  int64_t threshold_bytes() const { return threshold_; }
  int64_t release_bytes() const;

 private:
  int64_t threshold_;
  HysteresisOptions options_;
  bool open_ = true;
  int above_ = 0;
  int below_ = 0;
};

struct RestartOptions {
  // Act when judged bytes reach limit - margin, where margin is the larger of
  // margin_fraction * limit and margin_min_bytes; or the guard threshold, if
  // that is lower.
  double margin_fraction = 0.1;
  int64_t margin_min_bytes = 32LL << 20;
};

// The judged-bytes level at which Restart acts: the lower of the threshold
// and the limit minus its margin; nullopt when neither is known.
std::optional<int64_t> RestartTriggerBytes(std::optional<int64_t> threshold_bytes,
                                           std::optional<int64_t> limit_bytes,
                                           const RestartOptions& options);

}  // namespace allocguard::guard
