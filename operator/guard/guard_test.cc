#include "operator/guard/guard.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <deque>
#include <filesystem>
#include <thread>

#include "operator/guard/testdata/fake_books.h"

namespace allocguard::guard {
namespace {

using ::testing::HasSubstr;
constexpr int64_t kMiB = 1 << 20;

// Readings from a table; each Read() takes the next row (the last repeats).
class FakeSource final : public WorkloadSource {
 public:
  struct Row {
    int64_t anon_mib;
    std::vector<pid_t> pids = {100};
    std::optional<int64_t> limit_mib;
  };
  explicit FakeSource(const std::vector<Row>& rows) : rows_(rows.begin(), rows.end()) {}

  Result<WorkloadReading> Read() override {
    std::lock_guard<std::mutex> lock(mu_);
    ++reads_;
    if (rows_.empty()) return NotFound("no workload process is running");
    const Row row = rows_.size() > 1 ? rows_.front() : rows_.back();
    if (rows_.size() > 1) rows_.pop_front();
    WorkloadReading r;
    r.pids = row.pids;
    r.main_pids = row.pids;
    r.sample.anon_bytes = row.anon_mib * kMiB;
    if (row.limit_mib) r.limit_bytes = *row.limit_mib * kMiB;
    return r;
  }
  AllocatorObservation ObserveAllocator(pid_t pid) override {
    AllocatorObservation o;
    o.pid = pid;
    if (pid == 666) {
      o.not_loaded_reason = "static binary: no shared libraries are mapped";
    } else {
      o.allocator = replay::Allocator::kJemalloc;
      o.library = "/opt/allocguard/inject/libjemalloc.so.2";
    }
    return o;
  }
  Status Terminate(pid_t pid) override {
    std::lock_guard<std::mutex> lock(mu_);
    terminated_.push_back(pid);
    return Status::Ok();
  }
  std::vector<pid_t> terminated() {
    std::lock_guard<std::mutex> lock(mu_);
    return terminated_;
  }
  int reads() {
    std::lock_guard<std::mutex> lock(mu_);
    return reads_;
  }

 private:
  std::mutex mu_;
  std::deque<Row> rows_;
  std::vector<pid_t> terminated_;
  int reads_ = 0;
};

// Records what would go to the API server. With block set, every call waits
// until released: an API server that does not answer.
class FakeReporter final : public PodReporter {
 public:
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    bool block = false;
    int calls_started = 0;
    std::vector<PodCondition> conditions;
    std::vector<PodEvent> events;
  };
  explicit FakeReporter(std::shared_ptr<Shared> shared) : s_(std::move(shared)) {}
  Status SetCondition(const PodCondition& c) override {
    std::unique_lock<std::mutex> lock(s_->mu);
    ++s_->calls_started;
    s_->cv.wait(lock, [&] { return !s_->block; });
    s_->conditions.push_back(c);
    return Status::Ok();
  }
  Status RecordEvent(const PodEvent& e) override {
    std::unique_lock<std::mutex> lock(s_->mu);
    ++s_->calls_started;
    s_->cv.wait(lock, [&] { return !s_->block; });
    s_->events.push_back(e);
    return Status::Ok();
  }

 private:
  std::shared_ptr<Shared> s_;
};

template <typename F>
bool Eventually(F cond) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return cond();
}

class GuardTest : public ::testing::Test {
 protected:
  std::unique_ptr<Guard> NewGuard(const GuardOptions& options,
                                  const std::vector<FakeSource::Row>& rows) {
    source_ = std::make_unique<FakeSource>(rows);
    reporter_ = std::make_unique<AsyncReporter>(std::make_unique<FakeReporter>(shared_),
                                                AsyncReporterOptions{});
    return std::make_unique<Guard>(options, source_.get(), reporter_.get(), &registry_, &clock_,
                                   [this](const std::string& l) { log_.push_back(l); });
  }
  // Waits until the reporter has written everything queued so far.
  void Drain(size_t conditions, size_t events) {
    ASSERT_TRUE(Eventually([&] {
      std::lock_guard<std::mutex> lock(shared_->mu);
      return shared_->conditions.size() >= conditions && shared_->events.size() >= events;
    })) << "conditions "
        << shared_->conditions.size() << " events " << shared_->events.size();
  }
  std::vector<PodCondition> Conditions(const std::string& type) {
    std::lock_guard<std::mutex> lock(shared_->mu);
    std::vector<PodCondition> out;
    for (const auto& c : shared_->conditions) {
      if (c.type == type) out.push_back(c);
    }
    return out;
  }

  FakeClock clock_;
  metrics::Registry registry_;
  std::shared_ptr<FakeReporter::Shared> shared_ = std::make_shared<FakeReporter::Shared>();
  std::unique_ptr<FakeSource> source_;
  std::unique_ptr<AsyncReporter> reporter_;
  std::vector<std::string> log_;
};

TEST_F(GuardTest, BackpressureFlipsTheReadinessConditionWithHysteresis) {
  GuardOptions o;
  o.action = GuardAction::kBackpressure;
  o.threshold_bytes = 1000 * kMiB;
  o.expected_allocator = replay::Allocator::kJemalloc;
  auto guard = NewGuard(o, {{500}, {1100}, {950}, {880}, {880}, {880}, {880}});
  for (int i = 0; i < 7; ++i) {
    guard->Step();
    clock_.Advance(std::chrono::seconds(2));
    if (i == 0) Drain(2, 0);  // headroom True at start, allocator True
    if (i == 1) Drain(3, 1);  // headroom False + Warning event
  }
  Drain(4, 2);
  auto headroom = Conditions(kMemoryHeadroomCondition);
  ASSERT_EQ(headroom.size(), 3u);
  EXPECT_TRUE(headroom[0].status);
  EXPECT_FALSE(headroom[1].status);
  EXPECT_EQ(headroom[1].reason, "AboveThreshold");
  EXPECT_THAT(headroom[1].message, HasSubstr("1100 MiB exceeds the guard threshold 1000 MiB"));
  EXPECT_TRUE(headroom[2].status);
  EXPECT_EQ(headroom[2].reason, "BelowThreshold");
  std::lock_guard<std::mutex> lock(shared_->mu);
  EXPECT_EQ(shared_->events[0].reason, "MemoryBackpressure");
  EXPECT_TRUE(shared_->events[0].warning);
  EXPECT_EQ(shared_->events[1].reason, "MemoryBackpressureReleased");
  EXPECT_EQ(
      registry_.Render().find("allocguard_guard_actions_total{action=\"backpressure_on\"} 1") !=
          std::string::npos,
      true)
      << registry_.Render();
}

TEST_F(GuardTest, RestartSignalsTheMainProcessesOnceBeforeTheLimit) {
  GuardOptions o;
  o.action = GuardAction::kRestart;
  o.restart_grace = std::chrono::seconds(30);
  // Limit 1000 MiB: the trigger is 900 MiB (10 % margin).
  auto guard = NewGuard(o, {{800, {100, 101}, 1000},
                            {899, {100, 101}, 1000},
                            {905, {100, 101}, 1000},
                            {950, {100, 101}, 1000},
                            {950, {100, 101}, 1000}});
  guard->Step();
  guard->Step();
  EXPECT_TRUE(source_->terminated().empty());
  guard->Step();  // 905 >= 900
  EXPECT_EQ(source_->terminated(), (std::vector<pid_t>{100, 101}));
  clock_.Advance(std::chrono::seconds(2));
  guard->Step();  // within the grace period: no second SIGTERM
  EXPECT_EQ(source_->terminated().size(), 2u);
  EXPECT_EQ(guard->Snapshot().state, GuardState::kRestarting);
  clock_.Advance(std::chrono::seconds(31));
  guard->Step();  // still there after the grace period: signalled again
  EXPECT_EQ(source_->terminated().size(), 4u);
  Drain(1, 2);
  std::lock_guard<std::mutex> lock(shared_->mu);
  EXPECT_EQ(shared_->events[0].reason, "MemoryRestart");
  EXPECT_THAT(shared_->events[0].note, HasSubstr("sent SIGTERM to process(es) 100, 101"));
  EXPECT_THAT(shared_->events[0].note, HasSubstr("memory limit 1000 MiB"));
}

TEST_F(GuardTest, NoneOnlyWatches) {
  GuardOptions o;
  o.threshold_bytes = 100 * kMiB;
  auto guard = NewGuard(o, {{5000, {100}, 1000}});
  for (int i = 0; i < 3; ++i) guard->Step();
  EXPECT_TRUE(source_->terminated().empty());
  EXPECT_EQ(guard->Snapshot().state, GuardState::kWatching);
  EXPECT_TRUE(Conditions(kMemoryHeadroomCondition).empty());
}

TEST_F(GuardTest, AllocatorMismatchBecomesAConditionAndAWarningEvent) {
  GuardOptions o;
  o.expected_allocator = replay::Allocator::kJemalloc;
  auto guard = NewGuard(o, {{100, {100}}, {100, {100, 666}}, {100, {100, 666}}});
  guard->Step();
  Drain(1, 0);
  guard->Step();  // a new process appears: checked at once
  guard->Step();  // unchanged: not reported again
  Drain(2, 1);
  auto loaded = Conditions(kAllocatorLoadedCondition);
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_TRUE(loaded[0].status);
  EXPECT_FALSE(loaded[1].status);
  EXPECT_EQ(loaded[1].reason, "AllocatorNotLoaded");
  EXPECT_THAT(loaded[1].message, HasSubstr("process 666: allocator not loaded: static binary"));
  std::lock_guard<std::mutex> lock(shared_->mu);
  ASSERT_EQ(shared_->events.size(), 1u);
  EXPECT_TRUE(shared_->events[0].warning);
  EXPECT_EQ(shared_->events[0].reason, "AllocatorNotLoaded");
}

// The stats agent's books in the injected volume: retained climbing while
// in-use stays flat becomes the pod condition AllocatorRetaining (once, with a
// Warning event), HeapGrowing False, and the per-container metrics.
TEST_F(GuardTest, AllocatorBooksBecomeConditionsAndMetrics) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("guard_books_test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  GuardOptions o;
  o.floors.warmup_minutes = 0;
  o.books = BooksWatchOptions{.dir = dir.string(), .floors = o.floors};
  auto guard = NewGuard(o, {{500, {100}}});
  for (int i = 0; i <= 12 * 30; ++i) {
    const double t = 2.0 * i;
    const double noise = 2.0 * kMiB * std::sin(i * 0.7);
    testing::WriteBooks(
        dir / "app",
        {.pid = 7,
         .in_use = static_cast<uint64_t>(300.0 * kMiB + noise),
         .retained = static_cast<uint64_t>(100.0 * kMiB + 1024.0 * kMiB * t / 3600 + noise),
         .held = 900 * kMiB,
         .sampled = clock_.WallNow()});
    guard->Step();
    clock_.Advance(std::chrono::seconds(2));
  }
  Drain(3, 1);  // AllocatorLoaded, AllocatorRetaining, HeapGrowing; the Warning event
  auto retaining = Conditions(kAllocatorRetainingCondition);
  ASSERT_EQ(retaining.size(), 1u) << "reported once, when judged";
  EXPECT_TRUE(retaining[0].status);
  EXPECT_EQ(retaining[0].reason, "RetainedRisingInUseFlat");
  EXPECT_THAT(retaining[0].message, HasSubstr("container app: in-use floor"));
  auto growing = Conditions(kHeapGrowingCondition);
  ASSERT_EQ(growing.size(), 1u);
  EXPECT_FALSE(growing[0].status);
  EXPECT_EQ(growing[0].reason, "InUseNotRising");
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    ASSERT_EQ(shared_->events.size(), 1u);
    EXPECT_TRUE(shared_->events[0].warning);
    EXPECT_EQ(shared_->events[0].reason, "AllocatorRetaining");
  }
  auto snapshot = guard->Snapshot();
  ASSERT_TRUE(snapshot.books.has_value());
  EXPECT_EQ(snapshot.books->retaining, true);
  const std::string text = registry_.Render();
  EXPECT_THAT(text, HasSubstr("allocguard_allocator_retained_bytes{container=\"app\"}"));
  EXPECT_THAT(text, HasSubstr("allocguard_allocator_condition{container=\"app\",condition="
                              "\"AllocatorRetaining\"} 1"));
  fs::remove_all(dir);
}

TEST_F(GuardTest, MetricsShowAnonPressureFloorAndState) {
  GuardOptions o;
  o.threshold_bytes = 1000 * kMiB;
  o.floors.warmup_minutes = 0;
  std::vector<FakeSource::Row> rows;
  rows.reserve(31);
  for (int i = 0; i < 31; ++i) rows.push_back({i == 10 ? 200 : 500, {100}, 2000});
  auto guard = NewGuard(o, rows);
  for (int i = 0; i < 31; ++i) {
    guard->Step();
    clock_.Advance(std::chrono::seconds(2));
  }
  const std::string text = registry_.Render();
  EXPECT_THAT(text, HasSubstr("allocguard_guard_anon_bytes 524288000"));
  EXPECT_THAT(text, HasSubstr("allocguard_guard_pressure_ratio{relative_to=\"threshold\"} 0.5"));
  EXPECT_THAT(text, HasSubstr("allocguard_guard_pressure_ratio{relative_to=\"limit\"} 0.25"));
  EXPECT_THAT(text, HasSubstr("allocguard_guard_floor_bytes 209715200"));  // the 200 MiB dip
  EXPECT_THAT(text, HasSubstr("allocguard_guard_state{state=\"watching\"} 1"));
  EXPECT_THAT(text, HasSubstr("allocguard_guard_allocator_processes{allocator=\"jemalloc\"} 1"));
}

TEST_F(GuardTest, NoWorkloadIsWaiting) {
  auto guard = NewGuard({}, {});
  guard->Step();
  EXPECT_EQ(guard->Snapshot().state, GuardState::kWaiting);
  EXPECT_EQ(guard->Snapshot().sample_errors, 1);
  EXPECT_THAT(registry_.Render(), HasSubstr("allocguard_guard_state{state=\"waiting\"} 1"));
}

// Seed 003: a guard on a blocking loop does not guard. With an API server
// that never answers, the loop keeps sampling and acting; reports wait in a
// bounded queue.
TEST(GuardLoopTest, AnApiServerThatNeverAnswersDoesNotDelayASample) {
  auto shared = std::make_shared<FakeReporter::Shared>();
  shared->block = true;
  AsyncReporterOptions ro;
  ro.max_pending_events = 4;
  AsyncReporter reporter(std::make_unique<FakeReporter>(shared), ro);
  // Every other sample crosses the threshold, so every sample queues a
  // condition and an event.
  std::vector<FakeSource::Row> rows;
  rows.reserve(400);
  for (int i = 0; i < 400; ++i) rows.push_back({i % 2 == 0 ? 2000 : 100});
  FakeSource source(rows);
  GuardOptions o;
  o.action = GuardAction::kBackpressure;
  o.threshold_bytes = 1000 * kMiB;
  o.hysteresis.samples_below_to_open = 1;
  o.interval = std::chrono::milliseconds(1);
  Guard guard(o, &source, &reporter, nullptr, RealClock::Get(), nullptr);
  std::thread loop([&] { guard.Run(); });
  // The first report is stuck in the API server...
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(shared->mu);
    return shared->calls_started == 1;
  }));
  // ...while the loop takes hundreds of samples and flips the gate each time.
  EXPECT_TRUE(Eventually([&] { return guard.Snapshot().samples >= 300; }))
      << "samples: " << guard.Snapshot().samples;
  guard.Stop();
  loop.join();
  {
    std::lock_guard<std::mutex> lock(shared->mu);
    EXPECT_EQ(shared->calls_started, 1);  // nothing got past the stuck call
    shared->block = false;
  }
  shared->cv.notify_all();
  // The queue stayed bounded: all but the newest 4 events were dropped.
  EXPECT_GT(reporter.dropped_events(), 100);
}

TEST(AsyncReporterTest, LatestConditionPerTypeWinsAndFailuresAreRetried) {
  struct Flaky final : PodReporter {
    std::shared_ptr<FakeReporter::Shared> s;
    std::shared_ptr<std::atomic<int>> failures_left;
    Status SetCondition(const PodCondition& c) override {
      if (failures_left->fetch_sub(1) > 0) return Unavailable("connection refused");
      std::lock_guard<std::mutex> lock(s->mu);
      s->conditions.push_back(c);
      return Status::Ok();
    }
    Status RecordEvent(const PodEvent&) override { return Status::Ok(); }
  };
  auto shared = std::make_shared<FakeReporter::Shared>();
  auto flaky = std::make_unique<Flaky>();
  flaky->s = shared;
  flaky->failures_left = std::make_shared<std::atomic<int>>(2);
  AsyncReporterOptions o;
  o.initial_retry = std::chrono::milliseconds(1);
  o.max_retry = std::chrono::milliseconds(2);
  AsyncReporter reporter(std::move(flaky), o);
  reporter.SetCondition({"allocguard.io/MemoryHeadroom", false, "AboveThreshold", "m"});
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(shared->mu);
    return !shared->conditions.empty();
  }));
  EXPECT_EQ(reporter.failed_writes(), 2);
  std::lock_guard<std::mutex> lock(shared->mu);
  ASSERT_EQ(shared->conditions.size(), 1u);
  EXPECT_FALSE(shared->conditions[0].status);
}

}  // namespace
}  // namespace allocguard::guard
