#include "operator/memory/floor_trace_generator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <random>
#include <span>

#include "operator/memory/seeded_random.h"

namespace allocguard::memory {
TraceTruth TruthOfSlope(double slope_gib_per_h, double threshold_gib_per_h) {
  if (slope_gib_per_h <= threshold_gib_per_h) return TraceTruth::kNotRatchet;
  if (slope_gib_per_h >= 2 * threshold_gib_per_h) return TraceTruth::kRatchet;
  return TraceTruth::kEither;
}

const char* TraceTruthName(TraceTruth t) {
  switch (t) {
    case TraceTruth::kNotRatchet:
      return "not-ratchet";
    case TraceTruth::kRatchet:
      return "ratchet";
    case TraceTruth::kEither:
      return "either";
  }
  return "unknown";
}

namespace {

// The stationary Gaussian AR(1) noise of minutes 0 .. spec.minutes - 1, MiB,
// drawn in the order GenerateFloorTrace has always drawn it.
std::vector<double> NoiseSeries(const TraceSpec& spec, uint64_t seed) {
  SeededRandom rng(seed);
  const double innovation_sd = spec.noise_sd_mib * std::sqrt(1 - spec.noise_ar1 * spec.noise_ar1);
  std::vector<double> noise;
  noise.reserve(static_cast<size_t>(std::max(spec.minutes, 0)));
  double e = spec.noise_sd_mib * rng.Gaussian();  // stationary start
  for (int m = 0; m < spec.minutes; ++m) {
    if (m > 0) e = spec.noise_ar1 * e + innovation_sd * rng.Gaussian();
    noise.push_back(e);
  }
  return noise;
}

// The floors of minutes warmup_minutes .. minutes - 1 with noise[m] added to
// the true level of minute m; the outlier minute only when with_outlier.
std::vector<MinuteFloor> FloorsWithNoise(const TraceSpec& spec, std::span<const double> noise,
                                         bool with_outlier) {
  const double slope_mib_per_minute = spec.slope_gib_per_h * 1024.0 / 60.0;
  std::vector<MinuteFloor> floors;
  for (int m = spec.warmup_minutes; m < spec.minutes; ++m) {
    double mib = spec.base_mib + noise[static_cast<size_t>(m)];
    const int start = spec.growth_start_minute;
    if (m > start && spec.decel_minutes > 0) {
      mib += slope_mib_per_minute * spec.decel_minutes *
             (1 - std::exp(-(m - start) / spec.decel_minutes));
    } else if (m > start) {
      mib += slope_mib_per_minute * (m - start);
    }
    if (spec.step_mib != 0 && m >= spec.step_minute) mib += spec.step_mib;
    if (with_outlier && spec.outlier_mib != 0 && m == spec.outlier_minute) mib += spec.outlier_mib;
    floors.push_back({.minute = m, .floor_bytes = mib * kBytesPerMiB, .samples = 30});
  }
  return floors;
}

}  // namespace

std::vector<MinuteFloor> GenerateFloorTrace(const TraceSpec& spec, uint64_t seed) {
  return FloorsWithNoise(spec, NoiseSeries(spec, seed), /*with_outlier=*/true);
}

uint64_t ReplicaNoiseSeed(uint64_t trace_seed, int replica) {
  return SplitMix64(trace_seed ^ (0xD1B54A32D192ED03ULL * static_cast<uint64_t>(replica + 1)));
}

std::vector<std::vector<MinuteFloor>> GenerateReplicaFloorTraces(const TraceSpec& spec,
                                                                 const ReplicaOptions& options,
                                                                 uint64_t seed) {
  const int k = std::max(options.replicas, 1);
  if (k == 1) return {GenerateFloorTrace(spec, seed)};
  const double r = std::clamp(options.correlation, 0.0, 1.0);
  const double shared_weight = std::sqrt(r);
  const double own_weight = std::sqrt(1 - r);
  const std::vector<double> shared = NoiseSeries(spec, seed);
  std::vector<std::vector<MinuteFloor>> out;
  for (int j = 0; j < k; ++j) {
    const std::vector<double> own = NoiseSeries(spec, ReplicaNoiseSeed(seed, j));
    std::vector<double> noise(shared.size());
    for (size_t m = 0; m < noise.size(); ++m) {
      noise[m] = shared_weight * shared[m] + own_weight * own[m];
    }
    const bool with_outlier = options.outlier == ReplicaOutlier::kEveryReplica || j == 0;
    out.push_back(FloorsWithNoise(spec, noise, with_outlier));
  }
  return out;
}

std::vector<MinuteFloor> CombineReplicaFloors(std::span<const std::vector<MinuteFloor>> replicas,
                                              ReplicaCombine combine) {
  if (replicas.empty()) return {};
  if (replicas.size() == 1) return replicas[0];
  std::vector<MinuteFloor> out;
  const size_t minutes = replicas[0].size();
  std::vector<double> values(replicas.size());
  for (size_t i = 0; i < minutes; ++i) {
    MinuteFloor f{.minute = replicas[0][i].minute};
    for (size_t j = 0; j < replicas.size(); ++j) {
      values[j] = replicas[j][i].floor_bytes;
      f.samples += replicas[j][i].samples;
    }
    if (combine == ReplicaCombine::kMedian) {
      std::sort(values.begin(), values.end());
      const size_t mid = values.size() / 2;
      f.floor_bytes = values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
    } else {
      double sum = 0;
      for (double v : values) sum += v;
      f.floor_bytes = sum / static_cast<double>(values.size());
    }
    out.push_back(f);
  }
  return out;
}

std::vector<MinuteFloor> GenerateCombinedFloorTrace(const TraceSpec& spec,
                                                    const ReplicaOptions& options, uint64_t seed) {
  if (options.replicas <= 1) return GenerateFloorTrace(spec, seed);
  return CombineReplicaFloors(GenerateReplicaFloorTraces(spec, options, seed), options.combine);
}

TraceSpec InstanceSpec(const TraceClass& c, uint64_t seed, int index) {
  TraceSpec spec = c.spec;
  if (c.varies == TraceClass::Varies::kNothing) return spec;
  const int minute = InstanceMinute(seed, index, c.vary_first_minute, c.vary_last_minute);
  switch (c.varies) {
    case TraceClass::Varies::kGrowthStart:
      spec.growth_start_minute = minute;
      break;
    case TraceClass::Varies::kStepMinute:
      spec.step_minute = minute;
      break;
    case TraceClass::Varies::kOutlierMinute:
      spec.outlier_minute = minute;
      break;
    case TraceClass::Varies::kNothing:
      break;
  }
  return spec;
}

namespace {

struct NoiseClass {
  const char* name;
  double sd_mib;
  double ar1;
};

// One class per noise and slope, of runs of `minutes`.
std::vector<TraceClass> SlopeGrid(std::span<const NoiseClass> noises,
                                  std::span<const double> slopes, double threshold_gib_per_h,
                                  int minutes) {
  std::vector<TraceClass> corpus;
  char name[64];
  for (const NoiseClass& noise : noises) {
    for (double slope : slopes) {
      std::snprintf(name, sizeof name, "slope%+.2f %s", slope, noise.name);
      TraceClass c{.name = name, .truth = TruthOfSlope(slope, threshold_gib_per_h)};
      c.spec.slope_gib_per_h = slope;
      c.spec.noise_sd_mib = noise.sd_mib;
      c.spec.noise_ar1 = noise.ar1;
      c.spec.minutes = minutes;
      corpus.push_back(c);
    }
  }
  return corpus;
}

}  // namespace

std::vector<TraceClass> StandardCorpus(double threshold_gib_per_h) {
  auto truth_of = [&](double slope) { return TruthOfSlope(slope, threshold_gib_per_h); };
  const NoiseClass noises[] = {{"white10", 10, 0},
                               {"white25", 25, 0},
                               {"white50", 50, 0},
                               {"ar0.5-25", 25, 0.5},
                               {"ar0.5-50", 50, 0.5}};
  const double slopes[] = {-1, 0, 0.25, 0.5, 0.75, 1, 1.5, 2.5, 5};
  std::vector<TraceClass> corpus = SlopeGrid(noises, slopes, threshold_gib_per_h, 15);
  char name[64];
  // A one-time rise of the level mid-run: a cache filling once, not a ratchet.
  for (double step : {50.0, 150.0}) {
    std::snprintf(name, sizeof name, "step+%.0fMiB flat white25", step);
    TraceClass c{.name = name, .truth = TraceTruth::kNotRatchet};
    c.spec.step_mib = step;
    c.varies = TraceClass::Varies::kStepMinute;
    c.vary_first_minute = 3;
    c.vary_last_minute = 12;
    corpus.push_back(c);
  }
  // One minute held high by a long request, on a flat and on a ratcheting floor.
  for (double slope : {0.0, 0.5, 2.5}) {
    std::snprintf(name, sizeof name, "outlier+300MiB slope%+.2f white25", slope);
    TraceClass c{.name = name, .truth = truth_of(slope)};
    c.spec.slope_gib_per_h = slope;
    c.spec.outlier_mib = 300;
    c.varies = TraceClass::Varies::kOutlierMinute;
    c.vary_first_minute = 1;
    c.vary_last_minute = 14;
    corpus.push_back(c);
  }
  // Level, then a climb that starts somewhere in the middle of the run.
  for (double slope : {2.5, 5.0}) {
    std::snprintf(name, sizeof name, "late%+.1f from m3-9 white25", slope);
    TraceClass c{.name = name, .truth = truth_of(slope)};
    c.spec.slope_gib_per_h = slope;
    c.varies = TraceClass::Varies::kGrowthStart;
    c.vary_first_minute = 3;
    c.vary_last_minute = 9;
    corpus.push_back(c);
  }
  return corpus;
}

std::vector<TraceClass> WideCorpus(double threshold_gib_per_h, int minutes, int planned_minutes) {
  auto truth_of = [&](double slope) { return TruthOfSlope(slope, threshold_gib_per_h); };
  const NoiseClass noises[] = {{"white5", 5, 0},      {"white10", 10, 0},    {"white25", 25, 0},
                               {"white40", 40, 0},    {"white60", 60, 0},    {"ar0.5-25", 25, 0.5},
                               {"ar0.5-50", 50, 0.5}, {"ar0.8-30", 30, 0.8}, {"ar0.9-30", 30, 0.9},
                               {"ar0.9-60", 60, 0.9}};
  const double slopes[] = {-1, 0, 0.22, 0.5, 1, 1.5, 2.5, 5};
  std::vector<TraceClass> corpus = SlopeGrid(noises, slopes, threshold_gib_per_h, minutes);
  char name[80];
  auto add = [&](TraceClass c) {
    c.spec.minutes = minutes;
    corpus.push_back(std::move(c));
  };
  for (double step : {50.0, 150.0}) {
    std::snprintf(name, sizeof name, "step+%.0fMiB flat ar0.5-25", step);
    TraceClass c{.name = name, .truth = TraceTruth::kNotRatchet};
    c.spec.step_mib = step;
    c.spec.noise_ar1 = 0.5;
    c.varies = TraceClass::Varies::kStepMinute;
    c.vary_first_minute = 3;
    c.vary_last_minute = planned_minutes - 3;
    add(c);
  }
  for (double slope : {0.0, 0.5, 2.5}) {
    std::snprintf(name, sizeof name, "outlier+300MiB slope%+.2f white25", slope);
    TraceClass c{.name = name, .truth = truth_of(slope)};
    c.spec.slope_gib_per_h = slope;
    c.spec.outlier_mib = 300;
    c.varies = TraceClass::Varies::kOutlierMinute;
    c.vary_first_minute = 1;
    c.vary_last_minute = planned_minutes - 1;
    add(c);
  }
  for (int first : {3, 10}) {
    for (double slope : {2.5, 5.0}) {
      const int last = first == 3 ? 9 : 20;
      std::snprintf(name, sizeof name, "late%+.1f from m%d-%d white25", slope, first, last);
      TraceClass c{.name = name, .truth = truth_of(slope)};
      c.spec.slope_gib_per_h = slope;
      c.varies = TraceClass::Varies::kGrowthStart;
      c.vary_first_minute = first;
      c.vary_last_minute = last;
      add(c);
    }
  }
  struct Decel {
    double slope, tau, sd, ar1;
  };
  for (const Decel& d : {Decel{16, 4, 40, 0}, Decel{16, 4, 60, 0.5}, Decel{5, 6, 25, 0},
                         Decel{5, 6, 40, 0.5}, Decel{2.5, 10, 25, 0}}) {
    const double span = planned_minutes - 1;
    const double mean_slope = d.slope * d.tau * (1 - std::exp(-span / d.tau)) / span;
    std::snprintf(name, sizeof name, "decel%+.1f tau%.0f sd%.0f ar%.1f", d.slope, d.tau, d.sd,
                  d.ar1);
    TraceClass c{.name = name, .truth = truth_of(mean_slope)};
    c.spec.slope_gib_per_h = d.slope;
    c.spec.decel_minutes = d.tau;
    c.spec.noise_sd_mib = d.sd;
    c.spec.noise_ar1 = d.ar1;
    add(c);
  }
  return corpus;
}

}  // namespace allocguard::memory
