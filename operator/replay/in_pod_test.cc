#include "operator/replay/in_pod.h"

#include <gtest/gtest.h>

#include <cmath>

namespace allocguard::replay {
namespace {

TEST(ParseInPodLoadTest, PortSuppliesTheLocalhostBaseUrlForYamlAndJson) {
  const std::string yaml = "rate: 5\nrequests:\n  - path: /a\n";
  auto a = ParseInPodLoad(yaml, 8080);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->base_url, "http://127.0.0.1:8080");
  EXPECT_DOUBLE_EQ(a->rate, 5);

  const std::string json =
      R"({"base_url":"http://svc:80","rate":2,"ready":{"path":"/healthz","timeout":"5s"},)"
      R"("requests":[{"name":"get","path":"/k/{key}","key_space":10}]})";
  auto b = ParseInPodLoad(json, 9000);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->base_url, "http://127.0.0.1:9000");
  EXPECT_EQ(b->ready.path, "/healthz");
  ASSERT_EQ(b->requests.size(), 1u);
  EXPECT_EQ(b->requests[0].path, "/k/{key}");

  auto c = ParseInPodLoad(json, std::nullopt);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->base_url, "http://svc:80");
}

TEST(ParseInPodLoadTest, ErrorsNameTheProblem) {
  EXPECT_FALSE(ParseInPodLoad("rate: 5\nrequests: []\n", 0).ok());
  auto bad = ParseInPodLoad("rate: -1\nrequests:\n  - path: /a\n", 8080);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("rate"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(ParseInPodLoad("{not yaml: [", 8080).ok());
}

TEST(ToCanaryResultTest, CarriesTheAnalysis) {
  VariantResult v;
  v.variant = "glibc";
  v.allocator = "glibc";
  v.floors = {{.minute = 1, .floor_bytes = 100 * memory::kBytesPerMiB},
              {.minute = 2, .floor_bytes = 150 * memory::kBytesPerMiB}};
  v.judgement.slope_gib_per_h = 2.9;
  v.judgement.slope_low_gib_per_h = 1;
  v.judgement.slope_high_gib_per_h = std::nan("");
  v.verdict = {memory::Verdict::kFailed, "the workload died during the run in minute 2"};
  v.peak_bytes = 200 * memory::kBytesPerMiB;
  v.requests_completed = 10;
  v.unexpected_responses = 1;
  v.requests_late = 2;
  v.exit_minute = 2;
  v.duration_seconds = 179;
  CanaryResult r = ToCanaryResult(v, true);
  EXPECT_EQ(r.verdict, Verdict::kFailed);
  EXPECT_EQ(r.floors_mib, (std::vector<double>{100, 150}));
  EXPECT_DOUBLE_EQ(r.slope_gib_per_hour, 2.9);
  EXPECT_TRUE(std::isnan(r.slope_high));
  EXPECT_DOUBLE_EQ(r.peak_mib, 200);
  EXPECT_EQ(r.requests, 10);
  EXPECT_EQ(r.errors, 1);
  EXPECT_EQ(r.late, 2);
  EXPECT_TRUE(r.workload_exited);
  EXPECT_EQ(r.exit_minute, 2);
  EXPECT_TRUE(r.anon_only);
  EXPECT_EQ(r.minutes, 2);
  EXPECT_EQ(r.message, v.verdict.explanation);
}

}  // namespace
}  // namespace allocguard::replay
