#include <gtest/gtest.h>

#include <thread>

#include "e2e/workloads/render_plan.h"
#include "e2e/workloads/render_service.h"
#include "operator/net/http.h"

namespace allocguard::workloads {
namespace {

RenderParams Params(const std::string& key, const std::string& size = "large") {
  RenderParams p;
  p.key = key;
  p.size = size;
  return p;
}

bool SamePlan(const RenderPlan& a, const RenderPlan& b) {
  if (a.seed != b.seed || a.threads.size() != b.threads.size()) return false;
  for (size_t t = 0; t < a.threads.size(); ++t) {
    const auto& sa = a.threads[t].steps;
    const auto& sb = b.threads[t].steps;
    if (sa.size() != sb.size()) return false;
    for (size_t s = 0; s < sa.size(); ++s) {
      if (sa[s].buffer_bytes != sb[s].buffer_bytes || sa[s].pins.size() != sb[s].pins.size()) {
        return false;
      }
      for (size_t p = 0; p < sa[s].pins.size(); ++p) {
        if (sa[s].pins[p].bytes != sb[s].pins[p].bytes ||
            sa[s].pins[p].lifetime_ms != sb[s].pins[p].lifetime_ms) {
          return false;
        }
      }
    }
  }
  return true;
}

TEST(RenderPlanTest, SameRequestGivesSamePlan) {
  PlanOptions options;
  for (const char* key : {"1", "42", "99999", "tile/7/3"}) {
    EXPECT_TRUE(SamePlan(PlanRender(Params(key), options), PlanRender(Params(key), options)))
        << key;
  }
}

TEST(RenderPlanTest, DifferentRequestsGiveDifferentPlans) {
  PlanOptions options;
  EXPECT_FALSE(SamePlan(PlanRender(Params("1"), options), PlanRender(Params("2"), options)));
  EXPECT_FALSE(
      SamePlan(PlanRender(Params("1"), options), PlanRender(Params("1", "small"), options)));
}

TEST(RenderPlanTest, ThreadsAreHeavyTailedWithinBounds) {
  PlanOptions options;
  int at_min = 0;
  int bursts = 0;
  int largest = 0;
  const int n = 20000;
  for (int k = 1; k <= n; ++k) {
    int threads = static_cast<int>(PlanRender(Params(std::to_string(k)), options).threads.size());
    ASSERT_GE(threads, options.min_threads);
    ASSERT_LE(threads, options.max_threads);
    at_min += threads == options.min_threads;
    bursts += threads >= 16 * options.min_threads;
    largest = std::max(largest, threads);
  }
  // Pareto(alpha 2, min 2): P(T < 3) = 1 - (2/3)^2 = 56 %, P(T >= 32) = 0.4 %.
  EXPECT_GT(at_min, n * 45 / 100);
  EXPECT_GT(bursts, n / 1000);
  EXPECT_LT(bursts, n / 100);
  EXPECT_GE(largest, 64);
}

TEST(RenderPlanTest, SizeClassAndWidthScaleBuffers) {
  PlanOptions options;
  uint64_t small = 0;
  uint64_t large = 0;
  uint64_t narrow = 0;
  for (int k = 1; k <= 200; ++k) {
    std::string key = std::to_string(k);
    small += PlanRender(Params(key, "small"), options).TotalBufferBytes();
    large += PlanRender(Params(key, "large"), options).TotalBufferBytes();
    RenderParams p = Params(key);
    p.width = 256;
    narrow += PlanRender(p, options).TotalBufferBytes();
  }
  EXPECT_LT(small * 3, large);
  EXPECT_LT(narrow * 2, large);
}

TEST(ParseRenderQueryTest, AcceptsKeySizeAndWidth) {
  auto p = ParseRenderQuery("/render?key=a%2Fb&size=small&w=512");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->key, "a/b");
  EXPECT_EQ(p->size, "small");
  EXPECT_EQ(p->width, 512);
  auto d = ParseRenderQuery("/render?key=7");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->size, "large");
  EXPECT_EQ(d->width, 0);
}

TEST(ParseRenderQueryTest, RejectsBadInputNamingTheField) {
  struct Case {
    const char* path;
    const char* field;
  } cases[] = {
      {"/render", "key"},
      {"/render?key=", "key"},
      {"/render?key=1&w=-1", "w"},
      {"/render?key=1&w=0", "w"},
      {"/render?key=1&w=", "w"},
      {"/render?key=1&w=12x", "w"},
      {"/render?key=1&w=9000", "w"},
      {"/render?key=1&size=huge", "size"},
  };
  for (const auto& c : cases) {
    auto p = ParseRenderQuery(c.path);
    ASSERT_FALSE(p.ok()) << c.path;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(p.status().message().rfind(c.field, 0), 0u) << c.path << ": " << p.status().message();
  }
}

TEST(PinStoreTest, ReleasesAtDeadlineUnlessLeaking) {
  FakeClock clock;
  for (bool leak : {false, true}) {
    PinStore store(leak);
    store.Add(std::make_unique<char[]>(100), 100, clock.Now() + std::chrono::seconds(1));
    store.Add(std::make_unique<char[]>(50), 50, clock.Now() + std::chrono::seconds(10));
    EXPECT_EQ(store.live_bytes(), 150u);
    store.ReleaseExpired(clock.Now() + std::chrono::seconds(5));
    EXPECT_EQ(store.live_bytes(), leak ? 150u : 50u) << "leak=" << leak;
    EXPECT_EQ(store.live_count(), leak ? 2u : 1u);
  }
}

class RatchetServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RenderServiceOptions options;
    options.plan.max_threads = 8;  // keeps the sanitizer build quick
    service_ = std::make_unique<RenderService>(options, &clock_);
    server_ = net::NewHttpServer({});
    service_->Register(*server_);
    ASSERT_TRUE(server_->Bind().ok());
    serving_ = std::thread([this] { server_->Serve(); });
    auto client = net::NewHttpClient(
        {.base_url = "http://127.0.0.1:" + std::to_string(server_->port()), .keep_alive = false});
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(client).value();
  }
  void TearDown() override {
    server_->Stop();
    serving_.join();
  }
  net::HttpResponse Get(const std::string& path) {
    auto res = client_->Send({.method = "GET", .path = path});
    EXPECT_TRUE(res.ok()) << res.status().ToString();
    return res.ok() ? *res : net::HttpResponse{};
  }

  FakeClock clock_;
  std::unique_ptr<RenderService> service_;
  std::unique_ptr<net::HttpServer> server_;
  std::thread serving_;
  std::unique_ptr<net::HttpClient> client_;
};

TEST_F(RatchetServiceTest, AnswersHealthz) {
  auto res = Get("/healthz");
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(res.body, "ok");
}

TEST_F(RatchetServiceTest, RenderIsDeterministicPerKey) {
  auto a = Get("/render?key=17&size=small");
  auto b = Get("/render?key=17&size=small");
  auto c = Get("/render?key=18&size=small");
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.body, b.body);
  EXPECT_NE(a.body, c.body);
  EXPECT_NE(a.body.find("\"threads\":"), std::string::npos);
}

TEST_F(RatchetServiceTest, BadWidthIs400) {
  auto res = Get("/render?key=5&w=-1");
  EXPECT_EQ(res.status, 400);
  EXPECT_NE(res.body.find("w:"), std::string::npos);
  EXPECT_EQ(Get("/render?size=small").status, 400);
}

TEST_F(RatchetServiceTest, StatsCountLivePins) {
  Get("/render?key=3&size=small");
  auto res = Get("/stats");
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(res.body.find("\"live_pins\":0,"), std::string::npos) << res.body;
}

}  // namespace
}  // namespace allocguard::workloads
