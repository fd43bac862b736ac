#include "operator/guard/books_watch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "operator/guard/testdata/fake_books.h"

namespace allocguard::guard {
namespace {

namespace fs = std::filesystem;
using testing::FakeBooks;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::WriteBooks;

constexpr uint64_t kMiB = uint64_t{1024} * 1024;

class BooksWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("books_watch_test-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  BooksWatchOptions Options() {
    BooksWatchOptions o;
    o.dir = dir_.string();
    o.floors.warmup_minutes = 0;
    o.floors.sample_interval_seconds = 2;
    return o;
  }

  // Runs `minutes` of 2 s samples of one glibc process in container "app",
  // with in-use and retained given per second; returns the last reading.
  BooksReading Run(BooksWatch& watch, int minutes, const std::function<double(double)>& in_use,
                   const std::function<double(double)>& retained) {
    BooksReading last;
    for (int i = 0; i <= minutes * 30; ++i) {
      const double t = 2.0 * i;
      // Deterministic noise of +-2 MiB, so the floors are not a straight line.
      const double noise = 2.0 * kMiB * std::sin(i * 0.7);
      const auto now = wall_ + std::chrono::milliseconds(2000 * i);
      WriteBooks(dir_ / "app", {.pid = 7,
                                .in_use = static_cast<uint64_t>(in_use(t) + noise),
                                .retained = static_cast<uint64_t>(retained(t) + noise),
                                .held = static_cast<uint64_t>(in_use(t) + retained(t)),
                                .sampled = now});
      last = watch.Step(t, now);
    }
    return last;
  }

  fs::path dir_;
  std::chrono::system_clock::time_point wall_{std::chrono::hours(500000)};
  metrics::Registry registry_;
};

TEST_F(BooksWatchTest, SumsEachContainersFreshFilesAndCountsTheRest) {
  const auto now = wall_;
  FakeBooks a{
      .pid = 10, .in_use = 100 * kMiB, .retained = 30 * kMiB, .held = 140 * kMiB, .sampled = now};
  a.figures[AG_BOOKS_GLIBC_ARENAS] = 8;
  a.figures[AG_BOOKS_GLIBC_FREE_CHUNKS] = 1000;
  FakeBooks b = a;
  b.pid = 11;
  b.figures[AG_BOOKS_GLIBC_ARENAS] = 2;
  WriteBooks(dir_ / "app", a);
  WriteBooks(dir_ / "app", b);
  // Killed 10 s ago at a 2 s interval: stale, not summed.
  WriteBooks(dir_ / "app", {.pid = 12,
                            .in_use = 999 * kMiB,
                            .retained = 999 * kMiB,
                            .held = 999 * kMiB,
                            .sampled = now - std::chrono::seconds(10)});
  // A mimalloc process: held only.
  WriteBooks(dir_ / "app", {.pid = 13,
                            .allocator = AG_BOOKS_ALLOCATOR_MIMALLOC,
                            .flags = AG_BOOKS_FLAG_NO_SPLIT,
                            .held = 50 * kMiB,
                            .sampled = now});
  // Garbage under a books name.
  std::ofstream(dir_ / "app" / "books-14") << "not books";
  // A second container with jemalloc.
  FakeBooks j{.pid = 1,
              .allocator = AG_BOOKS_ALLOCATOR_JEMALLOC,
              .in_use = 10 * kMiB,
              .retained = 5 * kMiB,
              .held = 16 * kMiB,
              .sampled = now};
  j.figures[AG_BOOKS_JEMALLOC_RETAINED] = 77;
  WriteBooks(dir_ / "sidecar", j);
  // A plain file beside the container directories: not a container.
  std::ofstream(dir_ / "README") << "x";

  BooksWatch watch(Options(), &registry_);
  BooksReading r = watch.Step(0, now);
  ASSERT_TRUE(r.dir_present);
  ASSERT_EQ(r.containers.size(), 2u);
  const ContainerBooks& app = r.containers[0];
  EXPECT_EQ(app.container, "app");
  EXPECT_EQ(app.published, 2);
  EXPECT_EQ(app.no_split, 1);
  EXPECT_EQ(app.stale, 1);
  EXPECT_EQ(app.unreadable, 1);
  EXPECT_THAT(app.last_error, HasSubstr("books-14"));
  EXPECT_EQ(app.in_use_bytes, static_cast<int64_t>(200 * kMiB));
  EXPECT_EQ(app.retained_bytes, static_cast<int64_t>(60 * kMiB));
  EXPECT_EQ(app.held_bytes, static_cast<int64_t>(330 * kMiB));

  const std::string text = registry_.Render();
  EXPECT_THAT(text, HasSubstr("allocguard_allocator_in_use_bytes{container=\"app\"} 209715200"));
  EXPECT_THAT(text, HasSubstr("allocguard_allocator_retained_bytes{container=\"app\"} 62914560"));
  EXPECT_THAT(text, HasSubstr("allocguard_allocator_held_bytes{container=\"app\"} 346030080"));
  EXPECT_THAT(text, HasSubstr("allocguard_allocator_in_use_bytes{container=\"sidecar\"} 10485760"));
  EXPECT_THAT(text, HasSubstr("allocguard_allocator_figure{container=\"app\",allocator=\"glibc\","
                              "figure=\"arenas\"} 10"));
  EXPECT_THAT(text, HasSubstr("allocguard_allocator_figure{container=\"app\",allocator=\"glibc\","
                              "figure=\"free_chunks\"} 2000"));
  EXPECT_THAT(text, HasSubstr("allocguard_allocator_figure{container=\"sidecar\",allocator="
                              "\"jemalloc\",figure=\"retained_virtual_bytes\"} 77"));
  EXPECT_THAT(text, HasSubstr("allocguard_allocator_figure{container=\"app\",allocator="
                              "\"mimalloc\",figure=\"commit_bytes\"} 0"));
  EXPECT_THAT(text, HasSubstr("allocguard_allocator_books_processes{container=\"app\",state="
                              "\"stale\"} 1"));
  EXPECT_THAT(text, HasSubstr("allocguard_allocator_books_processes{container=\"app\",state="
                              "\"unreadable\"} 1"));
  EXPECT_THAT(text, Not(HasSubstr("container=\"README\"")));
  // Not judged yet: no conditions.
  EXPECT_FALSE(r.retaining.has_value());
  EXPECT_FALSE(r.heap_growing.has_value());
  EXPECT_THAT(text, Not(HasSubstr("allocguard_allocator_condition{")));

  // The sidecar container goes: its series go with it.
  fs::remove_all(dir_ / "sidecar");
  r = watch.Step(2, now + std::chrono::seconds(2));
  EXPECT_EQ(r.containers.size(), 1u);
  EXPECT_THAT(registry_.Render(), Not(HasSubstr("container=\"sidecar\"")));
}

TEST_F(BooksWatchTest, NoDirectoryIsNoBooks) {
  BooksWatch watch(Options(), &registry_);
  BooksReading r = watch.Step(0, wall_);
  EXPECT_FALSE(r.dir_present);
  EXPECT_TRUE(r.containers.empty());
  EXPECT_THAT(registry_.Render(), Not(HasSubstr("allocguard_allocator_in_use_bytes{")));
}

TEST_F(BooksWatchTest, RetainedRisingWhileInUseIsFlatIsAllocatorRetaining) {
  BooksWatch watch(Options(), &registry_);
  // In-use flat at 300 MiB; retained climbing 1 GiB per hour.
  BooksReading r = Run(
      watch, 12, [](double) { return 300.0 * kMiB; },
      [](double t) { return 100.0 * kMiB + 1024.0 * kMiB * t / 3600; });
  ASSERT_EQ(r.containers.size(), 1u);
  const ContainerBooks& c = r.containers[0];
  EXPECT_EQ(c.in_use.trend, BooksTrend::kFlat);
  EXPECT_EQ(c.retained.trend, BooksTrend::kRising);
  ASSERT_TRUE(r.retaining.has_value());
  EXPECT_TRUE(*r.retaining);
  EXPECT_THAT(r.retaining_message, HasSubstr("container app: in-use floor"));
  EXPECT_THAT(r.retaining_message, HasSubstr("(flat); retained floor"));
  EXPECT_THAT(r.retaining_message, HasSubstr("(rising)"));
  ASSERT_TRUE(r.heap_growing.has_value());
  EXPECT_FALSE(*r.heap_growing);
  const std::string text = registry_.Render();
  EXPECT_THAT(text, HasSubstr("allocguard_allocator_condition{container=\"app\",condition="
                              "\"AllocatorRetaining\"} 1"));
  EXPECT_THAT(text, HasSubstr("allocguard_allocator_condition{container=\"app\",condition="
                              "\"HeapGrowing\"} 0"));
  EXPECT_THAT(text, HasSubstr("allocguard_allocator_floor_slope_gib_per_hour{container=\"app\","
                              "books=\"retained\",estimate=\"least_squares\"} 0.9"));
  EXPECT_THAT(text, HasSubstr("allocguard_allocator_floor_bytes{container=\"app\",books="
                              "\"in_use\"}"));
}

TEST_F(BooksWatchTest, InUseRisingIsHeapGrowingNotRetention) {
  BooksWatch watch(Options(), &registry_);
  // Both rise (a leak makes the allocator's heap grow too).
  BooksReading r = Run(
      watch, 12, [](double t) { return 300.0 * kMiB + 512.0 * kMiB * t / 3600; },
      [](double t) { return 100.0 * kMiB + 256.0 * kMiB * t / 3600; });
  const ContainerBooks& c = r.containers.at(0);
  EXPECT_EQ(c.in_use.trend, BooksTrend::kRising);
  EXPECT_TRUE(c.heap_growing);
  EXPECT_FALSE(c.retaining);
  EXPECT_EQ(r.heap_growing, true);
  EXPECT_EQ(r.retaining, false);
  EXPECT_THAT(r.heap_growing_message, HasSubstr("in-use floor"));
  EXPECT_THAT(r.heap_growing_message, HasSubstr("(rising)"));
}

TEST_F(BooksWatchTest, BothFlatIsNeither) {
  BooksWatch watch(Options(), &registry_);
  BooksReading r = Run(
      watch, 12, [](double) { return 300.0 * kMiB; }, [](double) { return 80.0 * kMiB; });
  EXPECT_EQ(r.containers.at(0).in_use.trend, BooksTrend::kFlat);
  EXPECT_EQ(r.containers.at(0).retained.trend, BooksTrend::kFlat);
  EXPECT_EQ(r.heap_growing, false);
  EXPECT_EQ(r.retaining, false);
}

TEST_F(BooksWatchTest, AFewMinutesAreNotEnoughToJudge) {
  BooksWatch watch(Options(), &registry_);
  BooksReading r = Run(
      watch, 2, [](double) { return 300.0 * kMiB; },
      [](double t) { return 100.0 * kMiB + 1024.0 * kMiB * t / 3600; });
  EXPECT_EQ(r.containers.at(0).retained.trend, BooksTrend::kUnknown);
  EXPECT_FALSE(r.retaining.has_value());
  EXPECT_FALSE(r.heap_growing.has_value());
}

}  // namespace
}  // namespace allocguard::guard
