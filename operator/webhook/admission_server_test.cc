#include "operator/webhook/admission_server.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace allocguard::webhook {
namespace {

using nlohmann::json;

std::string Review(const std::string& uid, const std::string& ns = "shop") {
  json j = {{"apiVersion", "admission.k8s.io/v1"},
            {"kind", "AdmissionReview"},
            {"request",
             {{"uid", uid},
              {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
              {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
              {"operation", "CREATE"},
              {"namespace", ns},
              {"object", {{"metadata", {{"name", "p"}}}}}}}};
  return j.dump();
}

json Response(const net::HttpResponse& r) {
  EXPECT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.body;
  return j.is_discarded() ? json() : j["response"];
}

TEST(AdmissionServerTest, ServesHandlersAndHealthzOverHttp) {
  auto server = net::NewHttpServer({});
  AdmissionServer admission(server.get());
  admission.Handle("/mutate", [](const AdmissionRequest& r) {
    AdmissionResponse out;
    out.patch =
        json::array({{{"op", "add"}, {"path", "/metadata/labels"}, {"value", json::object()}}});
    out.warnings = {"namespace " + r.namespace_};
    return out;
  });
  ASSERT_TRUE(server->Bind().ok());
  std::thread serving([&] { server->Serve(); });
  auto client =
      net::NewHttpClient({.base_url = "http://127.0.0.1:" + std::to_string(server->port())});
  ASSERT_TRUE(client.ok());

  auto ok = (*client)->Send({.method = "POST",
                             .path = "/mutate",
                             .body = Review("u-1"),
                             .content_type = "application/json"});
  ASSERT_TRUE(ok.ok());
  json response = Response(*ok);
  EXPECT_EQ(response["uid"], "u-1");
  EXPECT_EQ(response["allowed"], true);
  EXPECT_EQ(response["patchType"], "JSONPatch");
  EXPECT_EQ(response["warnings"][0], "namespace shop");

  auto bad = (*client)->Send(
      {.method = "POST", .path = "/mutate", .body = "{", .content_type = "application/json"});
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("not JSON"), std::string::npos) << bad->body;

  auto health = (*client)->Send({.path = "/healthz"});
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->status, 200);

  client->reset();  // close the kept-alive connection so Stop() need not wait for it
  server->Stop();
  serving.join();
}

TEST(AdmissionServerTest, AThrowingHandlerIsAnsweredByItsFailurePolicy) {
  auto server = net::NewHttpServer({});
  AdmissionServer admission(server.get());
  auto thrower = [](const AdmissionRequest&) -> AdmissionResponse {
    throw std::runtime_error("policy cache not ready");
  };
  admission.Handle("/ignore", thrower, FailurePolicy::kIgnore);
  admission.Handle("/fail", thrower, FailurePolicy::kFail);
  admission.Handle(
      "/int", [](const AdmissionRequest&) -> AdmissionResponse { throw 42; }, FailurePolicy::kFail);

  json ignored = Response(admission.Review("/ignore", Review("u-1")));
  EXPECT_EQ(ignored["uid"], "u-1");
  EXPECT_EQ(ignored["allowed"], true);
  EXPECT_NE(ignored["warnings"][0].get<std::string>().find("policy cache not ready"),
            std::string::npos);
  EXPECT_FALSE(ignored.contains("patch"));

  json failed = Response(admission.Review("/fail", Review("u-2")));
  EXPECT_EQ(failed["allowed"], false);
  EXPECT_EQ(failed["status"]["code"], 500);
  EXPECT_NE(failed["status"]["message"].get<std::string>().find("policy cache not ready"),
            std::string::npos);

  json odd = Response(admission.Review("/int", Review("u-3")));
  EXPECT_EQ(odd["allowed"], false);

  auto metrics = admission.Metrics();
  EXPECT_EQ(metrics.paths["/ignore"].handler_errors, 1u);
  EXPECT_EQ(metrics.paths["/ignore"].allowed, 1u);
  EXPECT_EQ(metrics.paths["/fail"].handler_errors, 1u);
  EXPECT_EQ(metrics.paths["/fail"].denied, 1u);
}

TEST(AdmissionServerTest, CountsRequestsOutcomesAndLatencyPerPath) {
  FakeClock clock;
  auto server = net::NewHttpServer({});
  AdmissionServer admission(server.get(), &clock);
  admission.Handle("/slow", [&](const AdmissionRequest& r) {
    clock.Advance(std::chrono::milliseconds(30));  // the handler "takes" 30 ms
    return r.namespace_ == "deny" ? AdmissionResponse::Deny("no") : AdmissionResponse::Allow();
  });
  admission.Handle("/unused", [](const AdmissionRequest&) { return AdmissionResponse::Allow(); });
  (void)admission.Review("/slow", Review("a"));
  (void)admission.Review("/slow", Review("b", "deny"));
  EXPECT_EQ(admission.Review("/slow", "garbage").status, 400);

  auto m = admission.Metrics();
  ASSERT_EQ(m.paths.count("/unused"), 1u);
  EXPECT_EQ(m.paths["/unused"].requests, 0u);
  const PathMetrics& slow = m.paths["/slow"];
  EXPECT_EQ(slow.requests, 3u);
  EXPECT_EQ(slow.allowed, 1u);
  EXPECT_EQ(slow.denied, 1u);
  EXPECT_EQ(slow.malformed, 1u);
  EXPECT_DOUBLE_EQ(slow.latency_seconds_sum, 0.06);
  // Bucket le=0.025 holds only the malformed one (0 s); le=0.05 all three.
  EXPECT_EQ(slow.latency_buckets[5], 1u);
  EXPECT_EQ(slow.latency_buckets[6], 3u);
  EXPECT_EQ(slow.latency_buckets.back(), 3u);
}

TEST(AdmissionServerTest, RegistryShowsRequestsRejectionsAndLatencyPerPath) {
  FakeClock clock;
  metrics::Registry registry;
  auto server = net::NewHttpServer({});
  AdmissionServer admission(server.get(), &clock, &registry);
  admission.Handle("/validate", [&](const AdmissionRequest& r) {
    clock.Advance(std::chrono::milliseconds(30));
    return r.namespace_ == "deny" ? AdmissionResponse::Deny("no") : AdmissionResponse::Allow();
  });
  admission.Handle(
      "/broken",
      [](const AdmissionRequest&) -> AdmissionResponse { throw std::runtime_error("x"); },
      FailurePolicy::kIgnore);

  // Registered paths render every outcome at 0 before their first request.
  std::string text = registry.Render();
  EXPECT_NE(
      text.find("allocguard_webhook_requests_total{path=\"/validate\",outcome=\"denied\"} 0\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("allocguard_webhook_latency_seconds_count{path=\"/broken\"} 0\n"),
            std::string::npos);

  (void)admission.Review("/validate", Review("a"));
  (void)admission.Review("/validate", Review("b", "deny"));
  (void)admission.Review("/validate", Review("c", "deny"));
  (void)admission.Review("/validate", "garbage");
  (void)admission.Review("/broken", Review("d"));
  text = registry.Render();
  for (const char* line : {
           "allocguard_webhook_requests_total{path=\"/validate\",outcome=\"allowed\"} 1\n",
           "allocguard_webhook_requests_total{path=\"/validate\",outcome=\"denied\"} 2\n",
           "allocguard_webhook_requests_total{path=\"/validate\",outcome=\"malformed\"} 1\n",
           "allocguard_webhook_requests_total{path=\"/validate\",outcome=\"handler_error\"} 0\n",
           // A handler that threw is counted once, as handler_error, though it
           // was admitted.
           "allocguard_webhook_requests_total{path=\"/broken\",outcome=\"handler_error\"} 1\n",
           "allocguard_webhook_requests_total{path=\"/broken\",outcome=\"allowed\"} 0\n",
           "# TYPE allocguard_webhook_latency_seconds histogram\n",
           "allocguard_webhook_latency_seconds_bucket{path=\"/validate\",le=\"0.025\"} 1\n",
           "allocguard_webhook_latency_seconds_bucket{path=\"/validate\",le=\"0.05\"} 4\n",
           "allocguard_webhook_latency_seconds_count{path=\"/validate\"} 4\n",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\nin\n" << text;
  }
}

// Captures what spdlog's default logger writes while it lives.
class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    sink->set_pattern("%l %v");
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("captured", sink));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;
  std::string text() const { return out_.str(); }

 private:
  std::shared_ptr<spdlog::logger> previous_;
  std::ostringstream out_;
};

// A request at or above the slow-request threshold is counted and logged with
// the object it was for and where its time went; one below it is neither.
TEST(AdmissionServerTest, ASlowRequestIsCountedAndLoggedWithWhereItsTimeWent) {
  FakeClock clock;
  metrics::Registry registry;
  auto server = net::NewHttpServer({});
  AdmissionServer admission(server.get(), &clock, &registry);
  admission.set_slow_request_threshold(std::chrono::milliseconds(100));
  admission.Handle("/mutate", [&](const AdmissionRequest& r) {
    clock.Advance(std::chrono::milliseconds(r.namespace_ == "busy" ? 250 : 99));
    return AdmissionResponse::Allow();
  });
  CapturedLog log;
  (void)admission.Review("/mutate", Review("quick"));
  (void)admission.Review("/mutate", Review("uid-7", "busy"));
  // A name only generated (no name yet, generateName set), and a name of the
  // wrong type: the line names what it can.
  json generated = json::parse(Review("uid-8", "busy"));
  generated["request"]["object"]["metadata"] = {{"generateName", "web-7d9-"}};
  (void)admission.Review("/mutate", generated.dump());
  json odd = json::parse(Review("uid-9", "busy"));
  odd["request"]["object"]["metadata"] = {{"name", 5}};
  (void)admission.Review("/mutate", odd.dump());

  const PathMetrics m = admission.Metrics().paths["/mutate"];
  EXPECT_EQ(m.requests, 4u);
  EXPECT_EQ(m.slow, 3u);
  EXPECT_DOUBLE_EQ(m.latency_seconds_max, 0.25);
  EXPECT_NE(registry.Render().find("allocguard_webhook_slow_requests_total{path=\"/mutate\"} 3\n"),
            std::string::npos)
      << registry.Render();
  EXPECT_EQ(log.text(),
            "warning slow admission request on /mutate: CREATE Pod busy/p (uid uid-7, allowed) "
            "answered in 250.0 ms (parse 0.0 ms, decision 250.0 ms, encoding 0.0 ms); the "
            "threshold is 100 ms (--webhook-slow-request)\n"
            "warning slow admission request on /mutate: CREATE Pod busy/web-7d9-(generated) (uid "
            "uid-8, allowed) answered in 250.0 ms (parse 0.0 ms, decision 250.0 ms, encoding 0.0 "
            "ms); the threshold is 100 ms (--webhook-slow-request)\n"
            "warning slow admission request on /mutate: CREATE Pod busy/(generated) (uid uid-9, "
            "allowed) answered in 250.0 ms (parse 0.0 ms, decision 250.0 ms, encoding 0.0 ms); "
            "the threshold is 100 ms (--webhook-slow-request)\n");
}

// An AdmissionServer on a fake clock whose handler for /mutate allows,
// taking `takes` of the clock's time; reviews that take `threshold` or more
// are slow.
struct TimedServer {
  FakeClock clock;
  std::unique_ptr<net::HttpServer> server = net::NewHttpServer({});
  AdmissionServer admission{server.get(), &clock};

  TimedServer(Clock::Duration threshold, Clock::Duration takes) {
    admission.set_slow_request_threshold(threshold);
    admission.Handle("/mutate", [this, takes](const AdmissionRequest&) {
      clock.Advance(takes);
      return AdmissionResponse::Allow();
    });
  }
};

TEST(AdmissionServerTest, AZeroThresholdLogsNothing) {
  TimedServer t(std::chrono::milliseconds(0), std::chrono::seconds(3));
  CapturedLog log;
  (void)t.admission.Review("/mutate", Review("a"));
  EXPECT_EQ(t.admission.Metrics().paths["/mutate"].slow, 0u);
  EXPECT_EQ(log.text(), "");
}

// A client that can make reviews slow cannot flood the log: ten warnings at
// once, then one a second, each slow request still counted, and the next
// line written says how many were left out.
TEST(AdmissionServerTest, SlowRequestWarningsAreRateLimitedButAllCounted) {
  TimedServer t(std::chrono::milliseconds(1), std::chrono::milliseconds(1));
  AdmissionServer& admission = t.admission;
  FakeClock& clock = t.clock;
  CapturedLog log;
  auto lines = [&log] {
    const std::string text = log.text();
    return std::count(text.begin(), text.end(), '\n');
  };
  // 15 slow reviews within 15 ms: the first 10 are logged.
  for (int i = 0; i < 15; ++i) (void)admission.Review("/mutate", Review("burst"));
  EXPECT_EQ(lines(), 10);
  EXPECT_EQ(log.text().find("not logged"), std::string::npos);
  // A second later the limit has gained one line, which names the 5 left out.
  clock.Advance(std::chrono::seconds(1));
  (void)admission.Review("/mutate", Review("after"));
  EXPECT_EQ(lines(), 11);
  EXPECT_NE(log.text().find("(uid after, allowed) answered in 1.0 ms (parse 0.0 ms, decision "
                            "1.0 ms, encoding 0.0 ms); the threshold is 1 ms "
                            "(--webhook-slow-request); 5 more slow requests were not logged since "
                            "the last line (at most 10 lines at once, then one every 1 s)\n"),
            std::string::npos)
      << log.text();
  // After a quiet minute the whole burst is available again.
  clock.Advance(std::chrono::minutes(1));
  for (int i = 0; i < 12; ++i) (void)admission.Review("/mutate", Review("later"));
  EXPECT_EQ(lines(), 21);
  EXPECT_EQ(admission.Metrics().paths["/mutate"].slow, 28u);

  // With no limit (webhook_bench), every slow review is a line.
  TimedServer unlimited(std::chrono::milliseconds(1), std::chrono::milliseconds(1));
  unlimited.admission.set_slow_log_limit(0, {});
  for (int i = 0; i < 15; ++i) (void)unlimited.admission.Review("/mutate", Review("each"));
  EXPECT_EQ(lines(), 36);
}

TEST(AdmissionServerTest, ReviewOfAnUnknownPathIs404) {
  auto server = net::NewHttpServer({});
  AdmissionServer admission(server.get());
  EXPECT_EQ(admission.Review("/nope", Review("x")).status, 404);
}

}  // namespace
}  // namespace allocguard::webhook
