#include "operator/metrics/registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

namespace allocguard::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(RegistryTest, CounterWithoutLabelsRendersFromRegistrationOn) {
  Registry registry;
  Counter& jobs = registry.AddCounter("allocguard_jobs_created_total", "Canary Jobs created.");
  EXPECT_EQ(registry.Render(),
            "# HELP allocguard_jobs_created_total Canary Jobs created.\n"
            "# TYPE allocguard_jobs_created_total counter\n"
            "allocguard_jobs_created_total 0\n");
  jobs.Inc();
  jobs.Add(2.5);
  EXPECT_EQ(registry.Render(),
            "# HELP allocguard_jobs_created_total Canary Jobs created.\n"
            "# TYPE allocguard_jobs_created_total counter\n"
            "allocguard_jobs_created_total 3.5\n");
}

TEST(RegistryTest, CounterIgnoresNegativeAndNaNDeltas) {
  Registry registry;
  Counter& c = registry.AddCounter("c_total", "h");
  c.Add(4);
  c.Add(-1);
  c.Add(std::nan(""));
  EXPECT_EQ(c.With({}).Value(), 4);
}

TEST(RegistryTest, LabelledCounterOrdersLabelSetsByValue) {
  Registry registry;
  Counter& reconciles =
      registry.AddCounter("reconcile_total", "Reconciles.", {"controller", "result"});
  reconciles.With({"policy", "success"}).Inc();
  reconciles.With({"canary", "error"}).Add(2);
  reconciles.With({"policy", "success"}).Inc();
  EXPECT_EQ(registry.Render(),
            "# HELP reconcile_total Reconciles.\n"
            "# TYPE reconcile_total counter\n"
            "reconcile_total{controller=\"canary\",result=\"error\"} 2\n"
            "reconcile_total{controller=\"policy\",result=\"success\"} 2\n");
}

TEST(RegistryTest, LabelledFamilyWithoutLabelSetsRendersNothing) {
  Registry registry;
  registry.AddGauge("held", "Held Deployments.", {"namespace"});
  registry.AddHistogram("latency_seconds", "Latency.", {"op"}, {1, 2});
  EXPECT_EQ(registry.Render(), "");
}

TEST(RegistryTest, GaugeSetAddIncDec) {
  Registry registry;
  Gauge& g = registry.AddGauge("queue_depth", "Items waiting.", {"queue"});
  GaugeHandle policy = g.With({"policy"});
  policy.Set(10);
  policy.Add(-0.25);
  policy.Inc();
  policy.Dec();
  policy.Dec();
  g.With({"canary"}).Set(-3);
  EXPECT_EQ(registry.Render(),
            "# HELP queue_depth Items waiting.\n"
            "# TYPE queue_depth gauge\n"
            "queue_depth{queue=\"canary\"} -3\n"
            "queue_depth{queue=\"policy\"} 8.75\n");
}

TEST(RegistryTest, HistogramBucketsAreCumulativeWithInclusiveUpperBounds) {
  Registry registry;
  Histogram& h =
      registry.AddHistogram("admission_seconds", "Admission latency.", {}, {0.25, 1, 10});
  // 0.25, 1 and 10 sit exactly on bounds and count in those buckets.
  for (double v : {0.25, 0.5, 1.0, 10.0, 11.0}) h.Observe(v);
  EXPECT_EQ(registry.Render(),
            "# HELP admission_seconds Admission latency.\n"
            "# TYPE admission_seconds histogram\n"
            "admission_seconds_bucket{le=\"0.25\"} 1\n"
            "admission_seconds_bucket{le=\"1\"} 3\n"
            "admission_seconds_bucket{le=\"10\"} 4\n"
            "admission_seconds_bucket{le=\"+Inf\"} 5\n"
            "admission_seconds_sum 22.75\n"
            "admission_seconds_count 5\n");
}

TEST(RegistryTest, HistogramJustAboveABoundGoesToTheNextBucket) {
  Registry registry;
  Histogram& h = registry.AddHistogram("h", "h", {}, {1, 2});
  h.Observe(std::nextafter(1.0, 2.0));
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("h_bucket{le=\"1\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("h_bucket{le=\"2\"} 1\n"));
}

TEST(RegistryTest, HistogramCountsNaNOnlyInInf) {
  Registry registry;
  Histogram& h = registry.AddHistogram("h", "h", {}, {1});
  h.Observe(std::nan(""));
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("h_bucket{le=\"1\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("h_bucket{le=\"+Inf\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("h_sum NaN\n"));
}

TEST(RegistryTest, HistogramWithLabelsPutsLeLastAndDropsTrailingInf) {
  Registry registry;
  Histogram& h = registry.AddHistogram("op_seconds", "Op.", {"op"},
                                       {0.5, std::numeric_limits<double>::infinity()});
  EXPECT_EQ(h.bounds(), std::vector<double>{0.5});
  h.With({"get"}).Observe(2);
  EXPECT_EQ(registry.Render(),
            "# HELP op_seconds Op.\n"
            "# TYPE op_seconds histogram\n"
            "op_seconds_bucket{op=\"get\",le=\"0.5\"} 0\n"
            "op_seconds_bucket{op=\"get\",le=\"+Inf\"} 1\n"
            "op_seconds_sum{op=\"get\"} 2\n"
            "op_seconds_count{op=\"get\"} 1\n");
}

TEST(RegistryTest, EscapesLabelValuesAndHelp) {
  Registry registry;
  Counter& c = registry.AddCounter("e_total", "Line one\nback\\slash \"quoted\"", {"v"});
  c.With({"a\\b\"c\nd"}).Inc();
  EXPECT_EQ(registry.Render(),
            "# HELP e_total Line one\\nback\\\\slash \"quoted\"\n"
            "# TYPE e_total counter\n"
            "e_total{v=\"a\\\\b\\\"c\\nd\"} 1\n");
}

TEST(RegistryTest, FormatsSpecialValues) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(3), "3");
  EXPECT_EQ(FormatValue(0.005), "0.005");
  EXPECT_EQ(FormatValue(123456789), "123456789");
  EXPECT_EQ(FormatValue(100000), "100000");
  EXPECT_EQ(FormatValue(-2), "-2");
  EXPECT_EQ(FormatValue(1e20), "1e+20");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
}

TEST(RegistryTest, FamiliesRenderInNameOrderWhateverTheRegistrationOrder) {
  Registry registry;
  registry.AddGauge("zeta", "z");
  registry.AddCounter("alpha_total", "a");
  registry.AddGaugeFunc("middle", "m", [] { return 7.0; });
  EXPECT_EQ(registry.Render(),
            "# HELP alpha_total a\n# TYPE alpha_total counter\nalpha_total 0\n"
            "# HELP middle m\n# TYPE middle gauge\nmiddle 7\n"
            "# HELP zeta z\n# TYPE zeta gauge\nzeta 0\n");
}

TEST(RegistryTest, RegisteringTheSameFamilyTwiceReturnsTheFirst) {
  Registry registry;
  Counter& a = registry.AddCounter("x_total", "x", {"k"});
  Counter& b = registry.AddCounter("x_total", "x", {"k"});
  EXPECT_EQ(&a, &b);
  Histogram& h1 = registry.AddHistogram("h", "h", {}, {1, 2});
  Histogram& h2 = registry.AddHistogram("h", "h", {}, {1, 2});
  EXPECT_EQ(&h1, &h2);
}

TEST(RegistryTest, RemovedLabelSetNoLongerRendersAndOldHandleStaysSafe) {
  Registry registry;
  Gauge& g = registry.AddGauge("policy_ready", "r", {"policy"});
  GaugeHandle gone = g.With({"gone"});
  g.With({"kept"}).Set(1);
  g.Remove({"gone"});
  gone.Set(5);  // must not crash, must not render
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("policy_ready{policy=\"kept\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("gone")));
  EXPECT_EQ(g.With({"gone"}).Value(), 0);  // a fresh label set starts at 0
}

TEST(RegistryTest, CollectorFamiliesMergeAndNameClashesAreLeftOut) {
  Registry registry;
  registry.AddGauge("owned", "registered");
  registry.AddCollector([] {
    return std::vector<CollectedFamily>{
        {"owned", "from collector", MetricType::kGauge, {{{}, 99}}},
        {"b_info", "info", MetricType::kUntyped, {{{{"version", "1.0"}}, 1}}},
        {"empty", "no samples", MetricType::kGauge, {}},
    };
  });
  registry.AddCollector([] {
    return std::vector<CollectedFamily>{{"b_info", "dup", MetricType::kGauge, {{{}, 2}}}};
  });
  EXPECT_EQ(registry.Render(),
            "# HELP b_info info\n# TYPE b_info untyped\nb_info{version=\"1.0\"} 1\n"
            "# HELP owned registered\n# TYPE owned gauge\nowned 0\n");
}

TEST(RegistryTest, CollectorsOfOneFamilyEachAddTheirLabelSets) {
  Registry registry;
  for (const char* controller : {"policy", "canary"}) {
    registry.AddCollector([controller] {
      return std::vector<CollectedFamily>{
          {"queue_depth",
           "Keys waiting.",
           MetricType::kGauge,
           {{{{"controller", controller}}, 3}, {{{"controller", "shared"}}, 1}}}};
    });
  }
  EXPECT_EQ(registry.Render(),
            "# HELP queue_depth Keys waiting.\n# TYPE queue_depth gauge\n"
            "queue_depth{controller=\"policy\"} 3\n"
            "queue_depth{controller=\"shared\"} 1\n"
            "queue_depth{controller=\"canary\"} 3\n");
}

TEST(RegistryDeathTest, ProgrammingErrorsAbortNamingTheMetric) {
  Registry registry;
  Counter& c = registry.AddCounter("two_labels_total", "h", {"a", "b"});
  EXPECT_DEATH(c.With({"only-one"}), "two_labels_total: 1 label values given for 2");
  EXPECT_DEATH(registry.AddCounter("bad-name", "h"), "invalid metric name");
  EXPECT_DEATH(registry.AddGauge("g", "h", {"__reserved"}), "invalid label name");
  EXPECT_DEATH(registry.AddHistogram("h", "h", {"le"}, {1}), "le");
  EXPECT_DEATH(registry.AddHistogram("h", "h", {}, {2, 1}), "strictly increasing");
  EXPECT_DEATH(registry.AddGauge("two_labels_total", "h", {"a", "b"}), "registered twice");
}

TEST(RegistryTest, ConcurrentUpdatesAndScrapesLoseNothing) {
  Registry registry;
  Counter& counter = registry.AddCounter("ops_total", "ops", {"worker"});
  Gauge& gauge = registry.AddGauge("in_flight", "in flight");
  Histogram& histogram = registry.AddHistogram("op_seconds", "op", {}, {0.5});
  CounterHandle shared = counter.With({"shared"});
  constexpr int kThreads = 8;
  constexpr int kIterations = 20000;
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      CounterHandle own = counter.With({"w" + std::to_string(t)});
      for (int i = 0; i < kIterations; ++i) {
        shared.Inc();
        own.Add(0.5);
        gauge.Inc();
        gauge.Dec();
        histogram.Observe(i % 2 == 0 ? 0.25 : 1.0);
        if (i % 5000 == 0) (void)registry.Render();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(shared.Value(), kThreads * kIterations);
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(counter.With({"w" + std::to_string(t)}).Value(), kIterations * 0.5);
  }
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("ops_total{worker=\"shared\"} 160000\n"));
  EXPECT_THAT(text, HasSubstr("in_flight 0\n"));
  EXPECT_THAT(text, HasSubstr("op_seconds_bucket{le=\"0.5\"} 80000\n"));
  EXPECT_THAT(text, HasSubstr("op_seconds_count 160000\n"));
  EXPECT_THAT(text, HasSubstr("op_seconds_sum 100000\n"));
}

TEST(BucketsTest, ExponentialLinearAndDefault) {
  EXPECT_EQ(ExponentialBuckets(0.001, 2, 4), (std::vector<double>{0.001, 0.002, 0.004, 0.008}));
  EXPECT_EQ(LinearBuckets(1, 2, 3), (std::vector<double>{1, 3, 5}));
  EXPECT_EQ(DefaultBuckets().front(), 0.005);
  EXPECT_EQ(DefaultBuckets().back(), 10);
}

}  // namespace
}  // namespace allocguard::metrics
