#include "operator/manager/controller_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

namespace allocguard::manager {
namespace {

using ::testing::HasSubstr;

// Keys containing "bad" fail, "throws" throw, "later" asks to come back in an
// hour, the rest succeed.
class FakeReconciler final : public controllers::Reconciler {
 public:
  const char* name() const override { return "fake"; }
  Result<controllers::ReconcileResult> Reconcile(const std::string& key) override {
    if (key.find("bad") != std::string::npos) return Internal("cannot reconcile " + key);
    if (key.find("throws") != std::string::npos) {
      const nlohmann::json number = 5;
      (void)number.get<std::string>();  // throws nlohmann::json::type_error
    }
    controllers::ReconcileResult result;
    if (key.find("later") != std::string::npos) result.requeue_after = std::chrono::hours(1);
    return result;
  }
};

// The value of the sample line that starts with `series ` in text, or -1.
double Sample(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

TEST(ControllerRunnerTest, MetricsShowResultsLatencyAndQueueDepthPerController) {
  metrics::Registry registry;
  ControllerRunner runner(std::make_unique<FakeReconciler>(), RealClock::Get(), &registry);

  // Before any reconcile: every result at 0, and the queue's depth.
  std::string text = registry.Render();
  EXPECT_EQ(Sample(text, R"(allocguard_reconcile_total{controller="fake",result="error"})"), 0);
  EXPECT_EQ(Sample(text, R"(allocguard_reconcile_duration_seconds_count{controller="fake"})"), 0);
  EXPECT_EQ(Sample(text, R"(allocguard_workqueue_depth{controller="fake"})"), 0);
  runner.Enqueue("ns/good");
  runner.Enqueue("ns/later");
  runner.Enqueue("bad/one");
  runner.Enqueue("ns/good");  // deduplicated while waiting
  text = registry.Render();
  EXPECT_EQ(Sample(text, R"(allocguard_workqueue_depth{controller="fake"})"), 3);
  EXPECT_THAT(text, HasSubstr("# TYPE allocguard_workqueue_depth gauge\n"));

  runner.Start(1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    text = registry.Render();
    if (Sample(text, R"(allocguard_reconcile_total{controller="fake",result="error"})") >= 2 &&
        Sample(text, R"(allocguard_reconcile_total{controller="fake",result="requeue"})") >= 1 &&
        Sample(text, R"(allocguard_reconcile_total{controller="fake",result="success"})") >= 1) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  runner.Stop();
  text = registry.Render();
  const double errors =
      Sample(text, R"(allocguard_reconcile_total{controller="fake",result="error"})");
  const double requeues =
      Sample(text, R"(allocguard_reconcile_total{controller="fake",result="requeue"})");
  const double successes =
      Sample(text, R"(allocguard_reconcile_total{controller="fake",result="success"})");
  // The failing key is retried with backoff; the others ran once.
  EXPECT_GE(errors, 2);
  EXPECT_EQ(requeues, 1);
  EXPECT_EQ(successes, 1);
  EXPECT_EQ(Sample(text, R"(allocguard_reconcile_duration_seconds_count{controller="fake"})"),
            errors + requeues + successes);
}

// A reconcile that throws (here nlohmann's type_error, as a reader meeting a
// number where it expects a string would) fails its key and is retried; the
// worker thread survives and the process does not abort.
TEST(ControllerRunnerTest, AnExceptionFailsTheKeyAndTheWorkerGoesOn) {
  metrics::Registry registry;
  ControllerRunner runner(std::make_unique<FakeReconciler>(), RealClock::Get(), &registry);
  runner.Enqueue("ns/throws");
  runner.Start(1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::string text;
  while (std::chrono::steady_clock::now() < deadline) {
    text = registry.Render();
    if (Sample(text, R"(allocguard_reconcile_panics_total{controller="fake"})") >= 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE(Sample(text, R"(allocguard_reconcile_panics_total{controller="fake"})"), 1) << text;
  // The same worker still reconciles other keys.
  runner.Enqueue("ns/good");
  while (std::chrono::steady_clock::now() < deadline) {
    text = registry.Render();
    if (Sample(text, R"(allocguard_reconcile_total{controller="fake",result="success"})") >= 1) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  runner.Stop();
  text = registry.Render();
  EXPECT_EQ(Sample(text, R"(allocguard_reconcile_total{controller="fake",result="success"})"), 1);
  EXPECT_GE(Sample(text, R"(allocguard_reconcile_total{controller="fake",result="error"})"), 1);
}

TEST(ControllerRunnerTest, AGoneRunnerLeavesTheScrapeWithoutItsQueue) {
  metrics::Registry registry;
  {
    ControllerRunner runner(std::make_unique<FakeReconciler>(), RealClock::Get(), &registry);
    runner.Enqueue("ns/a");
    EXPECT_THAT(registry.Render(), HasSubstr("allocguard_workqueue_depth{controller=\"fake\"} 1"));
  }
  EXPECT_THAT(registry.Render(), ::testing::Not(HasSubstr("allocguard_workqueue_depth")));
}

// Reconciles of "hang" block until Release().
class HangingReconciler final : public controllers::Reconciler {
 public:
  const char* name() const override { return "hanging"; }
  Result<controllers::ReconcileResult> Reconcile(const std::string& key) override {
    std::unique_lock<std::mutex> lock(mu_);
    entered_ = true;
    cv_.notify_all();
    if (key == "hang") cv_.wait(lock, [this] { return released_; });
    return controllers::ReconcileResult{};
  }
  bool WaitEntered() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [this] { return entered_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool entered_ = false;
  bool released_ = false;
};

TEST(ControllerRunnerTest, AWorkerStuckInAReconcileShowsAsStalledAndAnIdleOneDoesNot) {
  FakeClock clock;
  auto owned = std::make_unique<HangingReconciler>();
  HangingReconciler* reconciler = owned.get();
  ControllerRunner runner(std::move(owned), &clock, nullptr);
  runner.Start(1);
  clock.Advance(std::chrono::hours(1));
  EXPECT_EQ(runner.StalledFor(clock.Now()), Clock::Duration::zero()) << "idle, waiting for keys";
  runner.Enqueue("hang");
  ASSERT_TRUE(reconciler->WaitEntered());
  clock.Advance(std::chrono::minutes(6));
  EXPECT_GE(runner.StalledFor(clock.Now()), std::chrono::minutes(6));
  reconciler->Release();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (runner.StalledFor(clock.Now()) != Clock::Duration::zero() &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(runner.StalledFor(clock.Now()), Clock::Duration::zero()) << "done, idle again";
  runner.Stop();
}

}  // namespace
}  // namespace allocguard::manager
