#pragma once

// Synthetic 2-second memory samples with a known truth, to compare ways of
// turning samples into floors (the minimum of each minute, a low quantile,
// shorter segments) before any judge sees them. The per-minute floor corpus
// (floor_trace_generator.h) cannot do that: it generates floors, not samples.
//
// A sample is the sum of
//   - the level: base_mib, rising at slope_gib_per_h from growth_start_minute;
//   - wander: a stationary Gaussian AR(1) process of the level with standard
//     deviation wander_sd_mib and correlation time wander_tau_s (lag-1
//     correlation exp(-interval / tau) between samples). This is memory the
//     workload really holds for a while; no floor statistic can remove it;
//   - request spikes, never negative: s_i = spike_carry * s_{i-1} +
//     (1 - spike_carry) * x_i with x_i zero with probability spike_free and
//     otherwise exponential with mean spike_mean_mib. In-flight work lifts
//     samples above the level; the minimum of a minute looks for the samples
//     that are not lifted;
//   - trim dips: with probability dip_probability a sample is pulled down by
//     a size uniform in [dip_min_mib, dip_max_mib] (glibc returning freed
//     memory to the kernel for a moment).
// Deterministic: the same spec and seed give the same samples everywhere.

#include <cstdint>
#include <string>
#include <vector>

#include "operator/memory/floor_trace_generator.h"
#include "operator/memory/memory_sample.h"

namespace allocguard::memory {

struct SampleTraceSpec {
  double slope_gib_per_h = 0;
  int growth_start_minute = 0;  // level before, rising from this minute on
  double base_mib = 300;
  double wander_sd_mib = 25;
  double wander_tau_s = 30;
  double spike_mean_mib = 40;
  double spike_free = 0.15;
  double spike_carry = 0.4;
  double dip_probability = 0;
  double dip_min_mib = 30;
  double dip_max_mib = 130;
  // A one-time level shift from step_minute on (a cache filling once).
  int step_minute = 0;
  double step_mib = 0;
  int minutes = 15;  // run length, warm-up included
  double sample_interval_s = 2;
};

// Samples at t = 0, interval, 2 interval, ... up to the end of the run; only
// anon_bytes is set (the judged figure).
std::vector<MemorySample> GenerateSampleTrace(const SampleTraceSpec& spec, uint64_t seed);

struct SampleTraceClass {
  std::string name;
  SampleTraceSpec spec;
  TraceTruth truth = TraceTruth::kNotRatchet;
  // When last > first, growth_start_minute (or step_minute when step_mib is
  // set) is uniform in [first, last], drawn per trace.
  int vary_first_minute = 0;
  int vary_last_minute = 0;
};

SampleTraceSpec InstanceSampleSpec(const SampleTraceClass& c, uint64_t seed, int index);

// The sample-level corpus, calibrated on the recorded replay runs in
// operator/memory/testdata (docs/verdicts.md): slopes -1 .. +5 GiB/h under a
// quiet level (jemalloc-like: wander sd 5 MiB), a glibc-like level (wander sd
// 25 MiB, correlation time 30 s, trim dips), the same with slow wander
// (120 s), and a noisy one (wander sd 50 MiB), plus steps and late growth.
std::vector<SampleTraceClass> SampleCorpus(double threshold_gib_per_h);

}  // namespace allocguard::memory
