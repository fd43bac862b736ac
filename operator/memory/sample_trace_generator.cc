#include "operator/memory/sample_trace_generator.h"

#include <cmath>
#include <cstdio>
#include <numbers>
#include <random>

#include "operator/memory/seeded_random.h"

namespace allocguard::memory {
std::vector<MemorySample> GenerateSampleTrace(const SampleTraceSpec& spec, uint64_t seed) {
  SeededRandom rng(seed);
  const double dt = spec.sample_interval_s;
  const double slope_mib_per_s = spec.slope_gib_per_h * 1024.0 / 3600.0;
  const double phi = spec.wander_tau_s > 0 ? std::exp(-dt / spec.wander_tau_s) : 0;
  const double innovation_sd = spec.wander_sd_mib * std::sqrt(1 - phi * phi);
  double wander = spec.wander_sd_mib * rng.Gaussian();  // stationary start
  double spike = 0;
  const int count = static_cast<int>(std::floor(60.0 * spec.minutes / dt + 1e-9));
  std::vector<MemorySample> samples;
  samples.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    const double t = i * dt;
    if (i > 0) wander = phi * wander + innovation_sd * rng.Gaussian();
    const double x = rng.Uniform() < spec.spike_free ? 0 : rng.Exponential(spec.spike_mean_mib);
    spike = spec.spike_carry * spike + (1 - spec.spike_carry) * x;
    double mib = spec.base_mib + wander + spike;
    const double start_s = 60.0 * spec.growth_start_minute;
    if (t > start_s) mib += slope_mib_per_s * (t - start_s);
    if (spec.step_mib != 0 && t >= 60.0 * spec.step_minute) mib += spec.step_mib;
    if (spec.dip_probability > 0 && rng.Uniform() < spec.dip_probability) {
      mib -= spec.dip_min_mib + (spec.dip_max_mib - spec.dip_min_mib) * rng.Uniform();
    }
    MemorySample s;
    s.t_seconds = t;
    s.anon_bytes = static_cast<int64_t>(std::llround(mib * kBytesPerMiB));
    samples.push_back(s);
  }
  return samples;
}

SampleTraceSpec InstanceSampleSpec(const SampleTraceClass& c, uint64_t seed, int index) {
  SampleTraceSpec spec = c.spec;
  if (c.vary_last_minute <= c.vary_first_minute) return spec;
  const int minute = InstanceMinute(seed, index, c.vary_first_minute, c.vary_last_minute);
  if (spec.step_mib != 0) {
    spec.step_minute = minute;
  } else {
    spec.growth_start_minute = minute;
  }
  return spec;
}

std::vector<SampleTraceClass> SampleCorpus(double threshold_gib_per_h) {
  auto truth_of = [&](double slope) { return TruthOfSlope(slope, threshold_gib_per_h); };
  struct Level {
    const char* name;
    double wander_sd_mib;
    double wander_tau_s;
    double spike_mean_mib;
    double dip_probability;
    double dip_min_mib;
    double dip_max_mib;
  };
  // Calibrated on the recorded runs (docs/verdicts.md, "A sample-level
  // corpus"): jemalloc's per-minute 10th percentiles move by 3 MiB around a
  // line, glibc's by 32 MiB with no lag-1 correlation from minute to minute;
  // samples sit a median 11-24 MiB above the local floor; glibc trimmed 3 of
  // 420 samples by 30-130 MiB.
  const Level levels[] = {{"quiet", 3, 30, 40, 0.01, 5, 20},
                          {"glibc", 40, 40, 30, 0.007, 40, 150},
                          {"glibc-slow", 40, 120, 30, 0.007, 40, 150},
                          {"noisy", 60, 40, 30, 0.007, 40, 150}};
  const double slopes[] = {-1, 0, 0.25, 0.5, 0.75, 1, 1.5, 2.5, 5};
  // A class named `n` with the noise of `level`.
  auto level_class = [](const char* n, TraceTruth truth, const Level& level) {
    SampleTraceClass c{.name = n, .truth = truth};
    c.spec.wander_sd_mib = level.wander_sd_mib;
    c.spec.wander_tau_s = level.wander_tau_s;
    c.spec.spike_mean_mib = level.spike_mean_mib;
    c.spec.dip_probability = level.dip_probability;
    c.spec.dip_min_mib = level.dip_min_mib;
    c.spec.dip_max_mib = level.dip_max_mib;
    return c;
  };
  std::vector<SampleTraceClass> corpus;
  char name[64];
  for (const Level& level : levels) {
    for (double slope : slopes) {
      std::snprintf(name, sizeof name, "slope%+.2f %s", slope, level.name);
      SampleTraceClass c = level_class(name, truth_of(slope), level);
      c.spec.slope_gib_per_h = slope;
      corpus.push_back(c);
    }
  }
  const Level& glibc = levels[1];
  auto glibc_class = [&](const char* n, TraceTruth truth) { return level_class(n, truth, glibc); };
  for (double step : {50.0, 150.0}) {
    std::snprintf(name, sizeof name, "step+%.0fMiB flat glibc", step);
    SampleTraceClass c = glibc_class(name, TraceTruth::kNotRatchet);
    c.spec.step_mib = step;
    c.vary_first_minute = 3;
    c.vary_last_minute = 12;
    corpus.push_back(c);
  }
  for (double slope : {2.5, 5.0}) {
    std::snprintf(name, sizeof name, "late%+.1f from m3-9 glibc", slope);
    SampleTraceClass c = glibc_class(name, truth_of(slope));
    c.spec.slope_gib_per_h = slope;
    c.vary_first_minute = 3;
    c.vary_last_minute = 9;
    corpus.push_back(c);
  }
  return corpus;
}

}  // namespace allocguard::memory
