#include "operator/memory/floor_trace_generator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

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

TEST(GenerateFloorTraceTest, NoiseHasTheAskedSizeAndCorrelation) {
  // One long trace (20000 minutes, fixed seed): sd and lag-1 within a few
  // standard errors of what was asked.
  TraceSpec spec{.base_mib = 0, .noise_sd_mib = 50, .noise_ar1 = 0.5, .minutes = 20001};
  auto f = GenerateFloorTrace(spec, 7);
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
  EXPECT_NEAR(std::sqrt(c0 / static_cast<double>(f.size())), 50, 2);
  EXPECT_NEAR(c1 / c0, 0.5, 0.03);
  EXPECT_NEAR(mean, 0, 3);
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

}  // namespace
}  // namespace allocguard::memory
