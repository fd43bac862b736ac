#include "operator/replay/load_spec.h"

#include <gtest/gtest.h>

#include <set>

namespace allocguard::replay {
namespace {

constexpr const char* kGood = R"(base_url: http://127.0.0.1:{port}
rate: 20
workers: 4
seed: 7
arrival: uniform
late_after: 500ms
ready: {path: /healthz, timeout: 10s}
requests:
  - name: big
    path: /render?key={key}
    weight: 3
    key_space: 1000
  - name: bad
    method: POST
    path: /render?w=-1
    body: '{"key": {key}}'
    expect: [400, 422]
)";

TEST(ParseLoadSpecTest, ReadsEveryField) {
  auto spec = ParseLoadSpec(kGood);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->base_url, "http://127.0.0.1:{port}");
  EXPECT_EQ(spec->rate, 20);
  EXPECT_EQ(spec->workers, 4);
  EXPECT_EQ(spec->seed, 7u);
  EXPECT_EQ(spec->arrival, Arrival::kUniform);
  EXPECT_EQ(spec->late_after, std::chrono::milliseconds(500));
  EXPECT_EQ(spec->ready.path, "/healthz");
  EXPECT_EQ(spec->ready.timeout, std::chrono::seconds(10));
  ASSERT_EQ(spec->requests.size(), 2u);
  EXPECT_EQ(spec->requests[0].expect, std::vector<int>{200});
  EXPECT_EQ(spec->requests[1].method, "POST");
  EXPECT_EQ(spec->requests[1].expect, (std::vector<int>{400, 422}));
}

struct BadCase {
  const char* yaml;
  const char* want;  // the error must contain this
};

TEST(ParseLoadSpecTest, BadFilesNameTheFieldAndLine) {
  const BadCase cases[] = {
      {"rate: 1\nrequests: [{path: /}]\n", "base_url is required"},
      {"base_url: ftp://x\nrate: 1\nrequests: [{path: /}]\n",
       "line 1: base_url must start with http://"},
      {"base_url: http://x\nrate: -3\nrequests: [{path: /}]\n", "line 2: rate must be between"},
      {"base_url: http://x\nrate: fast\nrequests: [{path: /}]\n", "line 2: rate must be a number"},
      {"base_url: http://x\nrate: 1\nrequests: []\n", "requests must be a non-empty list"},
      {"base_url: http://x\nrate: 1\nrequests:\n  - path: /a\n  - path: /b\n    weight: -2\n",
       "line 6: requests[1].weight must be positive, got -2"},
      {"base_url: http://x\nrate: 1\nrequests:\n  - path: nope\n",
       "line 4: requests[0].path must start with '/'"},
      {"base_url: http://x\nrate: 1\nrequests:\n  - path: /a\n    expect: [200, 999]\n",
       "line 5: requests[0].expect[1] must be an HTTP status code (100-599), got 999"},
      {"base_url: http://x\nrate: 1\nrequests:\n  - path: /a\n    key_space: 0\n",
       "requests[0].key_space must be at least 1"},
      {"base_url: http://x\nrate: 1\nrequests:\n  - path: /a\n    wieght: 2\n",
       "line 5: requests[0].wieght is not a known field"},
      {"base_url: http://x\nrate: 1\nworkers: 0\nrequests: [{path: /}]\n",
       "line 3: workers must be between 1 and 1024"},
      {"base_url: http://x\nrate: 1\nlate_after: 5 parsecs\nrequests: [{path: /}]\n",
       "line 3: late_after is not a duration"},
      {"base_url: http://x\nrate: 1\nrequests:\n  - {name: a, path: /}\n  - {name: a, path: /b}\n",
       "\"a\" is used twice"},
      {"base_url: [unclosed\n", "not valid YAML"},
      {"- just\n- a list\n", "top level must be a map"},
  };
  for (const BadCase& c : cases) {
    auto spec = ParseLoadSpec(c.yaml);
    ASSERT_FALSE(spec.ok()) << c.yaml;
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(spec.status().message().find(c.want), std::string::npos)
        << "got: " << spec.status().message() << "\nwant: " << c.want;
  }
}

TEST(ParseLoadSpecTest, ReadsThePolicysCamelCaseSpellingToo) {
  // A policy's canary.load (the CRD's camelCase) copied into a load file.
  auto spec = ParseLoadSpec(R"(baseUrl: http://127.0.0.1:{port}
rate: 20
lateAfter: 500ms
requestTimeout: 3s
requests:
  - {name: get, path: "/items/{key}", keySpace: 1000, contentType: text/plain, body: x}
)");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->base_url, "http://127.0.0.1:{port}");
  EXPECT_EQ(spec->late_after, std::chrono::milliseconds(500));
  EXPECT_EQ(spec->request_timeout, std::chrono::seconds(3));
  ASSERT_EQ(spec->requests.size(), 1u);
  EXPECT_EQ(spec->requests[0].key_space, 1000);
  EXPECT_EQ(spec->requests[0].content_type, "text/plain");
}

TEST(ParseLoadSpecTest, BothSpellingsOfOneFieldAreRefusedByName) {
  auto both =
      ParseLoadSpec("base_url: http://a\nbaseUrl: http://b\nrate: 1\nrequests: [{path: /}]\n");
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("baseUrl and base_url are the same field"),
            std::string::npos)
      << both.status().message();
  // An error names the field as it was written.
  auto bad = ParseLoadSpec("baseUrl: http://a\nrate: 1\nrequests: [{path: /, keySpace: 0}]\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("requests[0].keySpace must be at least 1"),
            std::string::npos)
      << bad.status().message();
}

TEST(LoadScheduleTest, SameSeedSameRequestsDifferentSeedDifferent) {
  auto spec = ParseLoadSpec(kGood).value();
  spec.arrival = Arrival::kPoisson;
  LoadSchedule a(spec);
  LoadSchedule b(spec);
  auto other_spec = spec;
  other_spec.seed = 8;
  LoadSchedule c(other_spec);
  bool differs = false;
  for (int i = 0; i < 1000; ++i) {
    ScheduledRequest x = a.Next();
    ScheduledRequest y = b.Next();
    ScheduledRequest z = c.Next();
    ASSERT_EQ(x.offset, y.offset);
    ASSERT_EQ(x.path, y.path);
    differs = differs || x.path != z.path || x.offset != z.offset;
  }
  EXPECT_TRUE(differs);
}

TEST(LoadScheduleTest, RateWeightsAndKeysFollowTheSpec) {
  auto spec = ParseLoadSpec(kGood).value();
  spec.arrival = Arrival::kPoisson;
  LoadSchedule s(spec);
  const int n = 20000;
  int big = 0;
  std::set<int64_t> keys;
  ScheduledRequest last;
  for (int i = 0; i < n; ++i) {
    last = s.Next();
    if (last.request_index == 0) {
      ++big;
      keys.insert(last.key);
      EXPECT_EQ(last.path, "/render?key=" + std::to_string(last.key));
      EXPECT_GE(last.key, 1);
      EXPECT_LE(last.key, 1000);
    } else {
      EXPECT_EQ(last.body, "{\"key\": " + std::to_string(last.key) + "}");
    }
  }
  // Weights 3:1 → 75 % big; 20000 Poisson arrivals at 20/s take ~1000 s.
  EXPECT_NEAR(big / static_cast<double>(n), 0.75, 0.02);
  EXPECT_NEAR(std::chrono::duration<double>(last.offset).count(), 1000, 30);
  EXPECT_GT(keys.size(), 990u);  // key variety, so caches cannot absorb the load
}

TEST(LoadScheduleTest, UniformArrivalsAreEvenlySpaced) {
  auto spec = ParseLoadSpec(kGood).value();  // uniform, 20/s
  LoadSchedule s(spec);
  EXPECT_EQ(s.Next().offset.count(), 0);
  EXPECT_EQ(s.Next().offset, std::chrono::milliseconds(50));
  EXPECT_EQ(s.Next().offset, std::chrono::milliseconds(100));
}

}  // namespace
}  // namespace allocguard::replay
