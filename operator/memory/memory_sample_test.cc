#include "operator/memory/memory_sample.h"

#include <gtest/gtest.h>

namespace allocguard::memory {
namespace {

MemorySample At(double t, int64_t anon, int64_t dirty = 0) {
  MemorySample s;
  s.t_seconds = t;
  s.anon_bytes = anon;
  if (dirty) s.cgroup_dirty_bytes = dirty;
  return s;
}

TEST(MemorySampleTest, JudgedFigureIsAnonPlusDirtyPlusWritebackNotResident) {
  MemorySample s = At(0, 100, 20);
  s.cgroup_writeback_bytes = 5;
  s.rss_bytes = 10'000;  // clean file pages: never judged
  EXPECT_EQ(s.JudgedBytes(), 125);
}

TEST(ComputeMinuteFloorsTest, LowestSampleEachMinuteAfterWarmup) {
  // Samples every 20 s over three minutes; minute 0 is warm-up.
  std::vector<MemorySample> s = {At(0, 1),     At(20, 900),      At(40, 950),   // minute 0
                                 At(60, 500),  At(80, 300),      At(100, 400),  // minute 1
                                 At(120, 700), At(140, 200, 50), At(160, 600),  // minute 2
                                 At(180, 999)};
  auto floors = ComputeMinuteFloors(s, {.warmup_minutes = 1, .sample_interval_seconds = 20});
  ASSERT_EQ(floors.size(), 2u);  // minute 3 has one sample only: incomplete
  EXPECT_EQ(floors[0].minute, 1);
  EXPECT_EQ(floors[0].floor_bytes, 300);
  EXPECT_EQ(floors[0].samples, 3);
  EXPECT_EQ(floors[1].minute, 2);
  EXPECT_EQ(floors[1].floor_bytes, 250);  // 200 anon + 50 dirty
}

TEST(ComputeMinuteFloorsTest, MinuteCutShortIsNotCounted) {
  std::vector<MemorySample> s = {At(60, 10), At(62, 10), At(64, 10)};
  EXPECT_TRUE(ComputeMinuteFloors(s, {.warmup_minutes = 1}).empty());
  s.push_back(At(118, 12));  // within one 2 s interval of the minute's end
  EXPECT_EQ(ComputeMinuteFloors(s, {.warmup_minutes = 1}).size(), 1u);
}

TEST(ComputeMinuteFloorsTest, MinuteWithoutSamplesIsSkippedNotInvented) {
  std::vector<MemorySample> s = {At(60, 10), At(118, 10), At(180, 30), At(238, 30)};
  auto floors = ComputeMinuteFloors(s, {.warmup_minutes = 0});
  ASSERT_EQ(floors.size(), 2u);
  EXPECT_EQ(floors[0].minute, 1);
  EXPECT_EQ(floors[1].minute, 3);
}

TEST(ComputeSegmentFloorsTest, QuantileInterpolatesBetweenOrderStatistics) {
  // Two 40 s segments after a 60 s warm-up, samples every 10 s; minute 0 is
  // warm-up. Segment 1 [40, 80) starts inside the warm-up: only 60 and 70
  // count, and it is still complete.
  std::vector<MemorySample> s = {At(0, 1),     At(50, 2),    // warm-up
                                 At(60, 400),  At(70, 100),  // segment 1
                                 At(80, 500),  At(90, 200), At(100, 300),
                                 At(110, 900), At(120, 5)};  // segment 3: one sample, incomplete
  const SegmentFloorOptions min_opts{
      .segment_seconds = 40, .warmup_minutes = 1, .sample_interval_seconds = 10};
  auto floors = ComputeSegmentFloors(s, min_opts);
  ASSERT_EQ(floors.size(), 2u);
  EXPECT_EQ(floors[0].minute, 1);
  EXPECT_EQ(floors[0].floor_bytes, 100);
  EXPECT_EQ(floors[0].samples, 2);
  EXPECT_EQ(floors[1].minute, 2);
  EXPECT_EQ(floors[1].floor_bytes, 200);
  // Quantile 0.25 of segment 2's sorted {200, 300, 500, 900}: position
  // 0.25 * 3 = 0.75, so 200 + 0.75 * (300 - 200) = 275; of {100, 400}:
  // position 0.25, 100 + 0.25 * 300 = 175.
  SegmentFloorOptions q = min_opts;
  q.quantile = 0.25;
  floors = ComputeSegmentFloors(s, q);
  ASSERT_EQ(floors.size(), 2u);
  EXPECT_DOUBLE_EQ(floors[0].floor_bytes, 175);
  EXPECT_DOUBLE_EQ(floors[1].floor_bytes, 275);
}

TEST(ComputeSegmentFloorsTest, TenthPercentileOfThirtySamplesIgnoresOneDip) {
  // One minute of 30 samples 1000, 1001, ..., 1029 with one dip to 10: the
  // minimum is the dip; the 10th percentile (position 2.9 in the sorted
  // values 10, 1000, 1001, 1002, ...) is 1001 + 0.9 * 1 = 1001.9.
  std::vector<MemorySample> s;
  s.reserve(30);
  for (int i = 0; i < 30; ++i) s.push_back(At(60 + 2 * i, i == 17 ? 10 : 1000 + i));
  auto p10 = ComputeSegmentFloors(s, {.quantile = 0.1});
  ASSERT_EQ(p10.size(), 1u);
  EXPECT_NEAR(p10[0].floor_bytes, 1001.9, 1e-9);
  auto minimum = ComputeSegmentFloors(s, {});
  ASSERT_EQ(minimum.size(), 1u);
  EXPECT_EQ(minimum[0].floor_bytes, 10);
}

TEST(ComputeSegmentFloorsTest, MinuteSegmentsOfTheMinimumAreTheMinuteFloors) {
  std::vector<MemorySample> s;
  s.reserve(200);
  for (int i = 0; i < 200; ++i) s.push_back(At(2 * i, (i * 7919) % 1000 + 10 * i));
  auto a = ComputeMinuteFloors(s, {});
  auto b = ComputeSegmentFloors(s, {});
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.size(), 5u);  // minutes 1..5 of 400 s; minute 6 is incomplete
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].minute, b[i].minute);
    EXPECT_EQ(a[i].floor_bytes, b[i].floor_bytes);
    EXPECT_EQ(a[i].samples, b[i].samples);
  }
}

}  // namespace
}  // namespace allocguard::memory
