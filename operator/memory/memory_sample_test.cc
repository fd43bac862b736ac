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

}  // namespace
}  // namespace allocguard::memory
