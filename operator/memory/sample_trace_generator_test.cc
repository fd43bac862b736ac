#include "operator/memory/sample_trace_generator.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace allocguard::memory {
namespace {

double Mib(const MemorySample& s) { return static_cast<double>(s.anon_bytes) / kBytesPerMiB; }

TEST(GenerateSampleTraceTest, WithoutNoiseSamplesLieOnTheLine) {
  SampleTraceSpec spec{.slope_gib_per_h = 3.6,  // 1.024 MiB/s
                       .growth_start_minute = 2,
                       .wander_sd_mib = 0,
                       .spike_mean_mib = 0};
  auto s = GenerateSampleTrace(spec, 1);
  ASSERT_EQ(s.size(), 450u);  // 15 minutes of 2 s samples
  EXPECT_EQ(s[1].t_seconds, 2);
  EXPECT_NEAR(Mib(s[60]), 300, 1e-6);  // t = 120 s, the climb starts
  EXPECT_NEAR(Mib(s[90]), 300 + 60 * 1.024, 1e-6);
}

TEST(GenerateSampleTraceTest, SpikesOnlyLiftDipsOnlyLower) {
  SampleTraceSpec spikes{.wander_sd_mib = 0, .spike_mean_mib = 40};
  auto s = GenerateSampleTrace(spikes, 7);
  int lifted = 0;
  for (const MemorySample& m : s) {
    EXPECT_GE(Mib(m), 300 - 1e-6);
    lifted += Mib(m) > 301;
  }
  EXPECT_GT(lifted, 300);  // most samples carry in-flight work

  SampleTraceSpec dips{.wander_sd_mib = 0, .spike_mean_mib = 0, .dip_probability = 1};
  for (const MemorySample& m : GenerateSampleTrace(dips, 7)) {
    EXPECT_LE(Mib(m), 300 - 30 + 1e-6);
    EXPECT_GE(Mib(m), 300 - 130 - 1e-6);
  }
}

TEST(GenerateSampleTraceTest, SameSeedSameTraceOtherSeedOtherTrace) {
  SampleTraceSpec spec{.dip_probability = 0.01};
  auto a = GenerateSampleTrace(spec, 3);
  auto b = GenerateSampleTrace(spec, 3);
  auto c = GenerateSampleTrace(spec, 4);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].anon_bytes, b[i].anon_bytes);
  EXPECT_NE(a[100].anon_bytes, c[100].anon_bytes);
}

TEST(SampleCorpusTest, TruthFollowsTheThreshold) {
  for (const SampleTraceClass& c : SampleCorpus(0.5)) {
    const double s = c.spec.slope_gib_per_h;
    if (c.spec.step_mib != 0 || s <= 0.5) {
      EXPECT_EQ(c.truth, TraceTruth::kNotRatchet) << c.name;
    } else if (s >= 1) {
      EXPECT_EQ(c.truth, TraceTruth::kRatchet) << c.name;
    } else {
      EXPECT_EQ(c.truth, TraceTruth::kEither) << c.name;
    }
  }
}

}  // namespace
}  // namespace allocguard::memory
