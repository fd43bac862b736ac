#include "operator/memory/floor_trace_generator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>
#include <set>
#include <span>
#include <vector>

#include "operator/memory/floor_judge.h"

namespace allocguard::memory {
namespace {

TEST(GenerateFloorTraceTest, NoiselessTraceHasExactlyTheSlope) {
  TraceSpec spec{.slope_gib_per_h = 2.5, .noise_sd_mib = 0};
  auto floors = GenerateFloorTrace(spec, 1);
  ASSERT_EQ(floors.size(), 14u);  // minutes 1..14 of a 15-minute run
  EXPECT_EQ(floors.front().minute, 1);
  EXPECT_EQ(floors.back().minute, 14);
  EXPECT_NEAR(FitFloorSlope(floors).SlopeGiBPerHour(), 2.5, 1e-9);
  // 2.5 GiB/h = 42.667 MiB/min on a 300 MiB base.
  EXPECT_NEAR(floors[0].floor_bytes / kBytesPerMiB, 300 + 2560.0 / 60, 1e-9);
}

TEST(GenerateFloorTraceTest, StepOutlierAndLateGrowthLandWhereAsked) {
  TraceSpec spec{.slope_gib_per_h = 6,  // 102.4 MiB/min
                 .growth_start_minute = 10,
                 .noise_sd_mib = 0,
                 .step_minute = 4,
                 .step_mib = 50,
                 .outlier_minute = 7,
                 .outlier_mib = 300};
  auto f = GenerateFloorTrace(spec, 1);
  auto mib = [&](int minute) {
    return f[static_cast<size_t>(minute - 1)].floor_bytes / kBytesPerMiB;
  };
  EXPECT_DOUBLE_EQ(mib(3), 300);
  EXPECT_DOUBLE_EQ(mib(4), 350);
  EXPECT_DOUBLE_EQ(mib(7), 650);
  EXPECT_DOUBLE_EQ(mib(10), 350);
  EXPECT_NEAR(mib(12), 350 + 2 * 102.4, 1e-9);
}

TEST(GenerateFloorTraceTest, SameSeedSameTraceOtherSeedOtherTrace) {
  TraceSpec spec{.noise_sd_mib = 40, .noise_ar1 = 0.5};
  auto a = GenerateFloorTrace(spec, 42);
  auto b = GenerateFloorTrace(spec, 42);
  auto c = GenerateFloorTrace(spec, 43);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].floor_bytes, b[i].floor_bytes);
  EXPECT_NE(a[0].floor_bytes, c[0].floor_bytes);
}

struct NoiseMoments {
  double mean = 0;
  double sd = 0;
  double lag1 = 0;
};

NoiseMoments Moments(const std::vector<MinuteFloor>& f) {
  double mean = 0;
  for (const auto& x : f) mean += x.floor_bytes / kBytesPerMiB;
  mean /= static_cast<double>(f.size());
  double c0 = 0;
  double c1 = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const double d = f[i].floor_bytes / kBytesPerMiB - mean;
    c0 += d * d;
    if (i + 1 < f.size()) c1 += d * (f[i + 1].floor_bytes / kBytesPerMiB - mean);
  }
  return {.mean = mean, .sd = std::sqrt(c0 / static_cast<double>(f.size())), .lag1 = c1 / c0};
}

TEST(GenerateFloorTraceTest, NoiseHasTheAskedSizeAndCorrelation) {
  // One long trace (20000 minutes, fixed seed): sd and lag-1 within a few
  // standard errors of what was asked.
  TraceSpec spec{.base_mib = 0, .noise_sd_mib = 50, .noise_ar1 = 0.5, .minutes = 20001};
  const NoiseMoments m = Moments(GenerateFloorTrace(spec, 7));
  EXPECT_NEAR(m.sd, 50, 2);
  EXPECT_NEAR(m.lag1, 0.5, 0.03);
  EXPECT_NEAR(m.mean, 0, 3);
}

TEST(StandardCorpusTest, CoversTheSlopesAndNoisesWithTheTruthFromTheThreshold) {
  auto corpus = StandardCorpus(0.5);
  std::set<double> slopes;
  std::set<double> noises;
  bool ar = false;
  bool step = false;
  bool outlier = false;
  bool late = false;
  for (const TraceClass& c : corpus) {
    slopes.insert(c.spec.slope_gib_per_h);
    noises.insert(c.spec.noise_sd_mib);
    ar |= c.spec.noise_ar1 > 0;
    step |= c.spec.step_mib > 0;
    outlier |= c.spec.outlier_mib > 0;
    late |= c.varies == TraceClass::Varies::kGrowthStart;
    if (c.spec.step_mib == 0 && c.varies != TraceClass::Varies::kGrowthStart) {
      const double s = c.spec.slope_gib_per_h;
      const TraceTruth want = s <= 0.5   ? TraceTruth::kNotRatchet
                              : s >= 1.0 ? TraceTruth::kRatchet
                                         : TraceTruth::kEither;
      EXPECT_EQ(c.truth, want) << c.name;
    }
  }
  EXPECT_EQ(*slopes.begin(), -1);
  EXPECT_EQ(*slopes.rbegin(), 5);
  EXPECT_TRUE(noises.contains(10) && noises.contains(25) && noises.contains(50));
  EXPECT_TRUE(ar && step && outlier && late);
}

TEST(InstanceSpecTest, VaryingMinuteStaysInRangeAndVaries) {
  TraceClass c{.name = "late",
               .varies = TraceClass::Varies::kGrowthStart,
               .vary_first_minute = 3,
               .vary_last_minute = 9};
  std::set<int> seen;
  for (int i = 0; i < 200; ++i) {
    const int m = InstanceSpec(c, 1, i).growth_start_minute;
    EXPECT_GE(m, 3);
    EXPECT_LE(m, 9);
    seen.insert(m);
  }
  EXPECT_EQ(seen.size(), 7u);
  EXPECT_EQ(InstanceSpec(c, 1, 5).growth_start_minute, InstanceSpec(c, 1, 5).growth_start_minute);
}

std::vector<MinuteFloor> FloorsMib(std::initializer_list<double> mib) {
  std::vector<MinuteFloor> out;
  int minute = 1;
  for (double v : mib)
    out.push_back({.minute = minute++, .floor_bytes = v * kBytesPerMiB, .samples = 30});
  return out;
}

TEST(CombineReplicaFloorsTest, MeanAndMedianByHand) {
  const std::vector<std::vector<MinuteFloor>> replicas = {
      FloorsMib({100, 200, 400}), FloorsMib({110, 260, 300}), FloorsMib({130, 170, 900})};
  auto mib = [](const std::vector<MinuteFloor>& f, size_t i) {
    return f[i].floor_bytes / kBytesPerMiB;
  };
  // Two replicas: the mean, and the median of two is the same mean.
  for (ReplicaCombine how : {ReplicaCombine::kMean, ReplicaCombine::kMedian}) {
    const auto two = CombineReplicaFloors(std::span(replicas).first(2), how);
    ASSERT_EQ(two.size(), 3u);
    EXPECT_DOUBLE_EQ(mib(two, 0), 105);
    EXPECT_DOUBLE_EQ(mib(two, 1), 230);
    EXPECT_DOUBLE_EQ(mib(two, 2), 350);
    EXPECT_EQ(two[2].minute, 3);
    EXPECT_EQ(two[2].samples, 60);
  }
  // Three: the mean (340/3, 630/3, 1600/3) is pulled up by the 900 of one
  // replica; the median is the middle replica's floor.
  const auto mean = CombineReplicaFloors(replicas, ReplicaCombine::kMean);
  EXPECT_NEAR(mib(mean, 0), 113.333333, 1e-6);
  EXPECT_NEAR(mib(mean, 1), 210, 1e-9);
  EXPECT_NEAR(mib(mean, 2), 533.333333, 1e-6);
  const auto median = CombineReplicaFloors(replicas, ReplicaCombine::kMedian);
  EXPECT_DOUBLE_EQ(mib(median, 0), 110);
  EXPECT_DOUBLE_EQ(mib(median, 1), 200);
  EXPECT_DOUBLE_EQ(mib(median, 2), 400);
  EXPECT_EQ(median[0].samples, 90);
}

// One replica is today's corpus, to the bit, whatever the correlation: the
// evaluation with --replicas 1 must not move.
TEST(GenerateReplicaFloorTracesTest, OneReplicaIsTheTraceItself) {
  const TraceSpec spec{.slope_gib_per_h = 1,
                       .noise_sd_mib = 40,
                       .noise_ar1 = 0.8,
                       .outlier_minute = 6,
                       .outlier_mib = 300};
  const auto trace = GenerateFloorTrace(spec, 11);
  for (double r : {0.0, 0.5}) {
    const auto one = GenerateCombinedFloorTrace(spec, {.replicas = 1, .correlation = r}, 11);
    ASSERT_EQ(one.size(), trace.size());
    for (size_t i = 0; i < one.size(); ++i) EXPECT_EQ(one[i].floor_bytes, trace[i].floor_bytes);
  }
}

// With correlation 1 the replicas share all their noise: every replica's
// floors are the single trace's, and so is their mean.
TEST(GenerateReplicaFloorTracesTest, FullCorrelationGivesEveryReplicaTheSameNoise) {
  const TraceSpec spec{.slope_gib_per_h = 2.5, .noise_sd_mib = 30, .noise_ar1 = 0.5};
  const auto trace = GenerateFloorTrace(spec, 5);
  const auto replicas = GenerateReplicaFloorTraces(spec, {.replicas = 3, .correlation = 1}, 5);
  ASSERT_EQ(replicas.size(), 3u);
  for (const auto& r : replicas) {
    ASSERT_EQ(r.size(), trace.size());
    for (size_t i = 0; i < r.size(); ++i) EXPECT_EQ(r[i].floor_bytes, trace[i].floor_bytes);
  }
  const auto mean = GenerateCombinedFloorTrace(spec, {.replicas = 3, .correlation = 1}, 5);
  for (size_t i = 0; i < mean.size(); ++i) {
    EXPECT_NEAR(mean[i].floor_bytes, trace[i].floor_bytes, 1e-6 * trace[i].floor_bytes);
  }
}

// The truth is the same in every replica; an outlier minute is in one
// replica's floor or in all. Noiseless floors of 300 MiB, three replicas,
// minute 5 held 300 MiB high: the mean sees 300 / 3 = 100 of it from one
// replica, the median none of it, and both see all of it from every replica.
TEST(GenerateReplicaFloorTracesTest, OutlierInOneReplicaOrInAll) {
  const TraceSpec spec{.growth_start_minute = 20,
                       .noise_sd_mib = 0,
                       .step_minute = 8,
                       .step_mib = 50,
                       .outlier_minute = 5,
                       .outlier_mib = 300};
  auto mib = [](const std::vector<MinuteFloor>& f, int minute) {
    return f[static_cast<size_t>(minute - 1)].floor_bytes / kBytesPerMiB;
  };
  ReplicaOptions o{.replicas = 3};
  o.combine = ReplicaCombine::kMean;
  auto f = GenerateCombinedFloorTrace(spec, o, 1);
  EXPECT_DOUBLE_EQ(mib(f, 4), 300);
  EXPECT_DOUBLE_EQ(mib(f, 5), 400);
  EXPECT_DOUBLE_EQ(mib(f, 8), 350);  // the step is in every replica
  o.combine = ReplicaCombine::kMedian;
  EXPECT_DOUBLE_EQ(mib(GenerateCombinedFloorTrace(spec, o, 1), 5), 300);
  o.outlier = ReplicaOutlier::kEveryReplica;
  EXPECT_DOUBLE_EQ(mib(GenerateCombinedFloorTrace(spec, o, 1), 5), 600);
  o.combine = ReplicaCombine::kMean;
  EXPECT_DOUBLE_EQ(mib(GenerateCombinedFloorTrace(spec, o, 1), 5), 600);
}

double CrossCorrelation(const std::vector<MinuteFloor>& a, const std::vector<MinuteFloor>& b) {
  const auto n = static_cast<double>(a.size());
  double ma = 0;
  double mb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ma += a[i].floor_bytes / n;
    mb += b[i].floor_bytes / n;
  }
  double sab = 0;
  double saa = 0;
  double sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double da = a[i].floor_bytes - ma;
    const double db = b[i].floor_bytes - mb;
    sab += da * db;
    saa += da * da;
    sbb += db * db;
  }
  return sab / std::sqrt(saa * sbb);
}

// One long trace (20000 minutes, fixed seed) of AR(1) noise of sd 40 MiB and
// lag-1 correlation 0.5: each replica keeps the class's sd and correlation,
// two replicas correlate by the asked 0.5, and the mean of K replicas has sd
// 40 * sqrt(R + (1 - R) / K): 34.64 MiB for K = 2, R = 0.5; 32.66 for K = 3,
// R = 0.5; 23.09 for K = 3, R = 0; with the same lag-1 correlation.
TEST(GenerateReplicaFloorTracesTest, NoiseOfEachReplicaAndOfTheMeanHasTheHandComputedSd) {
  const TraceSpec spec{.base_mib = 0, .noise_sd_mib = 40, .noise_ar1 = 0.5, .minutes = 20001};
  const auto two = GenerateReplicaFloorTraces(spec, {.replicas = 2, .correlation = 0.5}, 3);
  ASSERT_EQ(two.size(), 2u);
  for (const auto& r : two) {
    EXPECT_NEAR(Moments(r).sd, 40, 1);
    EXPECT_NEAR(Moments(r).lag1, 0.5, 0.03);
  }
  EXPECT_NEAR(CrossCorrelation(two[0], two[1]), 0.5, 0.03);
  const auto mean2 = CombineReplicaFloors(two, ReplicaCombine::kMean);
  EXPECT_NEAR(Moments(mean2).sd, 34.641, 1);
  EXPECT_NEAR(Moments(mean2).lag1, 0.5, 0.03);
  const auto mean3 = GenerateCombinedFloorTrace(spec, {.replicas = 3, .correlation = 0.5}, 3);
  EXPECT_NEAR(Moments(mean3).sd, 32.660, 1);
  const auto independent = GenerateReplicaFloorTraces(spec, {.replicas = 3}, 3);
  EXPECT_NEAR(CrossCorrelation(independent[0], independent[2]), 0, 0.03);
  const auto mean3_independent = CombineReplicaFloors(independent, ReplicaCombine::kMean);
  EXPECT_NEAR(Moments(mean3_independent).sd, 23.094, 1);
  EXPECT_NEAR(Moments(mean3_independent).lag1, 0.5, 0.03);
  // The median of three independent Gaussians is wider than their mean (its
  // variance is about 0.449 sigma^2 against 1/3): about 26.8 MiB.
  EXPECT_NEAR(Moments(CombineReplicaFloors(independent, ReplicaCombine::kMedian)).sd, 26.8, 1.2);
}

}  // namespace
}  // namespace allocguard::memory
