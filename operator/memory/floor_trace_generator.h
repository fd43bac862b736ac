#pragma once

// Synthetic per-minute floor traces with a known truth, to calibrate and
// evaluate floor judges. Deterministic: the same spec and seed give the same
// floors on every platform (own Gaussian sampler over std::mt19937_64, whose
// output sequence the standard fixes).

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "operator/memory/memory_sample.h"

namespace allocguard::memory {

struct TraceSpec {
  double slope_gib_per_h = 0;
  // The floor is level before this minute and rises at slope_gib_per_h from it
  // on; 0 means from the start of the run.
  int growth_start_minute = 0;
  double base_mib = 300;
  // Floor noise: a stationary Gaussian AR(1) series with this standard
  // deviation and lag-1 autocorrelation (0: independent minutes).
  double noise_sd_mib = 25;
  double noise_ar1 = 0;
  // A one-time level shift of step_mib from step_minute on (a cache filling
  // once, not a ratchet); 0 for none.
  int step_minute = 0;
  double step_mib = 0;
  // One minute whose floor is displaced by outlier_mib (a request that held
  // memory through a whole minute); 0 for none.
  int outlier_minute = 0;
  double outlier_mib = 0;
  // When positive, the climb decelerates: it starts at slope_gib_per_h and
  // its pace falls by e every decel_minutes, so the floor approaches
  // slope * decel_minutes above its start (arenas filling up, then full).
  double decel_minutes = 0;
  int minutes = 15;  // run length, warm-up included
  int warmup_minutes = 1;
};

// Floors of minutes warmup_minutes .. minutes - 1.
std::vector<MinuteFloor> GenerateFloorTrace(const TraceSpec& spec, uint64_t seed);

// Several canary replicas of one variant run side by side on the same load
// share (canary.replicas): each replica's floor has the trace's true level,
// slope, step and growth start, and noise of its own with the trace's
// marginal sd and lag-1 correlation, correlated with the other replicas'
// noise in the same minute by `correlation` (what the replicas share: the
// node, the load's swings). The judge sees one floor a minute, combined
// across the replicas.
enum class ReplicaCombine { kMean, kMedian };
// Whether the outlier minute (TraceSpec::outlier_mib, a request that held
// memory through a minute) is in one replica's floor, as when a load balancer
// sends each request to one replica, or in every replica's.
enum class ReplicaOutlier { kOneReplica, kEveryReplica };

struct ReplicaOptions {
  int replicas = 1;
  // Correlation of two replicas' noise in the same minute, in [0, 1]. Replica
  // j's noise is sqrt(correlation) * s + sqrt(1 - correlation) * u_j, where s
  // and every u_j are independent AR(1) series of the trace's sd and lag-1
  // correlation; so is their sum. The mean of K replicas then has noise of sd
  // noise_sd_mib * sqrt(correlation + (1 - correlation) / K).
  double correlation = 0;
  ReplicaCombine combine = ReplicaCombine::kMean;
  ReplicaOutlier outlier = ReplicaOutlier::kOneReplica;
};

// The seed of replica `replica`'s own noise in the trace generated from
// `trace_seed`.
uint64_t ReplicaNoiseSeed(uint64_t trace_seed, int replica);

// One floor trace per replica. With one replica (or fewer) this is exactly
// GenerateFloorTrace(spec, seed). Otherwise the shared noise s is the noise
// GenerateFloorTrace(spec, seed) would add, and u_j that of seed
// ReplicaNoiseSeed(seed, j); so with correlation 1 every replica's floors are
// those of GenerateFloorTrace (the outlier aside). The outlier minute is in
// replica 0 only under ReplicaOutlier::kOneReplica.
std::vector<std::vector<MinuteFloor>> GenerateReplicaFloorTraces(const TraceSpec& spec,
                                                                 const ReplicaOptions& options,
                                                                 uint64_t seed);

// Per minute, the mean or the median (of an even count: the mean of the two
// middle ones) of the replicas' floors; samples are summed. REQUIRES: every
// replica has floors of the same minutes, in the same order.
std::vector<MinuteFloor> CombineReplicaFloors(std::span<const std::vector<MinuteFloor>> replicas,
                                              ReplicaCombine combine);

// What a judge of several replicas sees: CombineReplicaFloors of
// GenerateReplicaFloorTraces; with one replica, GenerateFloorTrace(spec, seed).
std::vector<MinuteFloor> GenerateCombinedFloorTrace(const TraceSpec& spec,
                                                    const ReplicaOptions& options, uint64_t seed);

// What a judge should conclude about a class of traces. The sequential rule's
// error budget is stated against these: a Ratchet verdict on kNotRatchet is a
// false Ratchet; anything but Ratchet on kRatchet is a missed one.
enum class TraceTruth {
  kNotRatchet,  // true slope at or below the threshold, or only a one-time step
  kRatchet,     // true slope at least twice the threshold
  kEither,      // between: any verdict is acceptable
};

const char* TraceTruthName(TraceTruth t);

// What a trace with this true floor slope is, against the threshold: not a
// ratchet up to it, a ratchet from twice it, either in between.
TraceTruth TruthOfSlope(double slope_gib_per_h, double threshold_gib_per_h);

// A family of traces that share a spec; one feature may vary per trace.
struct TraceClass {
  std::string name;
  TraceSpec spec;
  TraceTruth truth = TraceTruth::kNotRatchet;
  enum class Varies { kNothing, kGrowthStart, kStepMinute, kOutlierMinute };
  Varies varies = Varies::kNothing;
  int vary_first_minute = 0;  // the varying minute is uniform in [first, last]
  int vary_last_minute = 0;
};

// The spec of trace number `index` of a class: the class spec with its varying
// minute drawn from (seed, index). Deterministic.
TraceSpec InstanceSpec(const TraceClass& c, uint64_t seed, int index);

// The evaluation corpus for a threshold (GiB/h), fixed in advance of any rule:
// true slopes -1 .. +5 GiB/h under white noise of 10, 25 and 50 MiB and AR(1)
// noise (lag-1 correlation 0.5) of 25 and 50 MiB, plus steps, outliers and
// growth that starts mid-run.
std::vector<TraceClass> StandardCorpus(double threshold_gib_per_h);

// A wider corpus for judges that may run longer than they plan
// (JudgeOptions::planned_minutes): noise of 5 to 60 MiB with lag-1
// correlation 0 to 0.9 (slow wander), slopes -1 .. +5 GiB/h, one-time steps,
// outlier minutes, growth starting at minutes 3-9 and 10-20, and climbs that
// decelerate as the demo's glibc ratchet does. Truth of a decelerating class
// is that of its mean slope over the first planned_minutes.
std::vector<TraceClass> WideCorpus(double threshold_gib_per_h, int minutes, int planned_minutes);

}  // namespace allocguard::memory
