#include "operator/replay/load_driver.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

namespace allocguard::replay {
namespace {

// A real HTTP server on an ephemeral port: /ok answers 200, /bad 500, /slow
// 200 after 300 ms.
class TestServer {
 public:
  TestServer() : server_(net::NewHttpServer({.worker_threads = 16})) {
    server_->Handle("GET", "/ok", [this](const net::HttpRequest&) {
      ++hits_;
      return net::HttpResponse{.status = 200, .body = "ok"};
    });
    server_->Handle("GET", "/bad", [this](const net::HttpRequest&) {
      ++hits_;
      return net::HttpResponse{.status = 500, .body = "no"};
    });
    server_->Handle("GET", "/slow", [this](const net::HttpRequest&) {
      ++hits_;
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      return net::HttpResponse{.status = 200};
    });
    EXPECT_TRUE(server_->Bind().ok());
    thread_ = std::thread([this] { server_->Serve(); });
  }
  ~TestServer() {
    server_->Stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }
  int hits() const { return hits_; }

 private:
  std::unique_ptr<net::HttpServer> server_;
  std::thread thread_;
  std::atomic<int> hits_{0};
};

LoadSpec Spec(const std::string& url) {
  LoadSpec spec;
  spec.base_url = url;
  spec.rate = 100;
  spec.workers = 4;
  spec.arrival = Arrival::kUniform;
  spec.requests = {{.name = "ok", .path = "/ok?k={key}", .weight = 3, .key_space = 50},
                   {.name = "bad", .path = "/bad?k={key}", .weight = 1, .key_space = 50}};
  return spec;
}

HttpClientFactory Factory(const std::string& url) {
  return [url] { return net::NewHttpClient({.base_url = url}); };
}

TEST(LoadDriverTest, UnexpectedResponsesAreCountedAndEachOneReported) {
  TestServer server;
  LoadSpec spec = Spec(server.url());
  std::mutex mu;
  std::vector<UnexpectedResponse> unexpected;
  LoadDriver driver(spec, Factory(server.url()), RealClock::Get(),
                    [&](const UnexpectedResponse& u) {
                      std::lock_guard<std::mutex> lock(mu);
                      unexpected.push_back(u);
                    });
  ASSERT_TRUE(driver.Start().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  driver.Stop();
  LoadStats s = driver.Snapshot();
  EXPECT_GT(s.completed, 20);
  EXPECT_EQ(s.completed, s.sent);
  EXPECT_EQ(s.in_flight, 0);
  EXPECT_EQ(server.hits(), s.completed);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(static_cast<int64_t>(unexpected.size()), s.errors);
  EXPECT_GT(s.errors, 0);
  EXPECT_LT(s.errors, s.completed);
  for (const auto& u : unexpected) {
    EXPECT_EQ(u.request_name, "bad");
    EXPECT_EQ(u.status, 500);
    EXPECT_EQ(u.path.rfind("/bad?k=", 0), 0u);
  }
}

TEST(LoadDriverTest, SameScheduleReachesTheServerInTheSameOrder) {
  // Two runs of the same spec send the same request sequence (one worker, so
  // the server sees them in schedule order).
  std::vector<std::string> seen[2];
  for (auto& run : seen) {
    auto server = net::NewHttpServer({.worker_threads = 1});
    server->Handle("GET", "/ok", [&run](const net::HttpRequest& r) {
      run.push_back(r.path);
      return net::HttpResponse{.status = 200};
    });
    server->Handle("GET", "/bad", [&run](const net::HttpRequest& r) {
      run.push_back(r.path);
      return net::HttpResponse{.status = 500};
    });
    ASSERT_TRUE(server->Bind().ok());
    std::thread t([&] { server->Serve(); });
    std::string url = "http://127.0.0.1:" + std::to_string(server->port());
    LoadSpec spec = Spec(url);
    spec.workers = 1;
    spec.rate = 50;
    LoadDriver driver(spec, Factory(url), RealClock::Get(), nullptr);
    ASSERT_TRUE(driver.Start().ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    driver.Stop();
    server->Stop();
    t.join();
  }
  size_t n = std::min(seen[0].size(), seen[1].size());
  ASSERT_GT(n, 10u);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(seen[0][i], seen[1][i]) << i;
}

TEST(LoadDriverTest, SlowWorkloadMakesRequestsLateInsteadOfSlowingTheLoad) {
  TestServer server;
  LoadSpec spec = Spec(server.url());
  // 20/s of 300 ms requests over 2 connections: capacity ~6.7/s, so the
  // schedule runs ahead of the workload; open loop keeps releasing requests.
  spec.rate = 20;
  spec.workers = 2;
  spec.late_after = std::chrono::milliseconds(200);
  spec.requests = {{.name = "slow", .path = "/slow"}};
  LoadDriver driver(spec, Factory(server.url()), RealClock::Get(), nullptr);
  ASSERT_TRUE(driver.Start().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  LoadStats mid = driver.Snapshot();
  driver.Stop();
  EXPECT_GT(mid.released, mid.completed + 5);  // a backlog in flight
  EXPECT_GT(mid.in_flight, spec.workers);
  EXPECT_GT(mid.late, 0);
  EXPECT_GT(mid.p50_ms, 300);  // latency counts from the scheduled time
  EXPECT_EQ(mid.errors, 0);
}

}  // namespace
}  // namespace allocguard::replay
