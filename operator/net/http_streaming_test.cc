#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <thread>

#include "operator/net/http.h"

namespace allocguard::net {
namespace {

class ServerThread {
 public:
  explicit ServerThread(std::unique_ptr<HttpServer> server) : server_(std::move(server)) {
    EXPECT_TRUE(server_->Bind().ok());
    thread_ = std::thread([this] { server_->Serve(); });
  }
  ~ServerThread() {
    server_->Stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }

 private:
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
};

TEST(StreamingHttpClientTest, StreamsTheWholeBodyInPieces) {
  auto server = NewHttpServer({});
  std::string body;
  for (int i = 0; i < 5000; ++i) body += "{\"line\":" + std::to_string(i) + "}\n";
  server->Handle("GET", "/stream", [&](const HttpRequest&) {
    HttpResponse r;
    r.status = 200;
    r.body = body;
    return r;
  });
  ServerThread running(std::move(server));
  auto client = NewStreamingHttpClient({.base_url = running.url()});
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  int status = 0;
  std::string received;
  int pieces = 0;
  Status s = (*client)->Stream({.path = "/stream"},
                               {[&](int st, const Headers&) { return status = st, true; },
                                [&](std::string_view p) {
                                  received.append(p);
                                  ++pieces;
                                  return true;
                                }});
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(status, 200);
  EXPECT_EQ(received, body);
  EXPECT_GT(pieces, 1);
}

TEST(StreamingHttpClientTest, CancelInterruptsARequestWaitingForTheServer) {
  auto server = NewHttpServer({});
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<bool> request_arrived{false};
  server->Handle("GET", "/slow", [&](const HttpRequest&) {
    request_arrived = true;
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return release; });
    return HttpResponse{200, {}, "late"};
  });
  ServerThread running(std::move(server));
  auto client = NewStreamingHttpClient({.base_url = running.url()});
  ASSERT_TRUE(client.ok());
  Status result;
  std::thread caller([&] { result = (*client)->Stream({.path = "/slow"}, {}); });
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!request_arrived && std::chrono::steady_clock::now() < limit) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(request_arrived) << "the request did not reach the server within 30 s";
  (*client)->Cancel();
  caller.join();  // returns although the server has not answered
  EXPECT_EQ(result.code(), StatusCode::kUnavailable);
  EXPECT_NE(result.message().find("cancelled"), std::string::npos) << result.ToString();
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
}

TEST(StreamingHttpClientTest, UnreachableHttpsServerIsAClearError) {
  // Bind and close a port so that nothing listens there.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  close(fd);
  auto client = NewStreamingHttpClient({.base_url = "https://127.0.0.1:" + std::to_string(port),
                                        .tls = {.insecure_skip_verify = true}});
  ASSERT_TRUE(client.ok());
  auto res = (*client)->Send({.path = "/version"});
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(res.status().message().find("GET /version"), std::string::npos);
}

TEST(StreamingHttpClientTest, BadTlsInputFailsAtConstruction) {
  auto bad_ca =
      NewStreamingHttpClient({.base_url = "https://127.0.0.1:1", .tls = {.ca_pem = "junk"}});
  EXPECT_EQ(bad_ca.status().code(), StatusCode::kInvalidArgument);
  auto missing = NewStreamingHttpClient(
      {.base_url = "https://127.0.0.1:1", .tls = {.ca_file = "/nonexistent/ca.crt"}});
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  auto half =
      NewStreamingHttpClient({.base_url = "https://127.0.0.1:1", .tls = {.client_cert_pem = "x"}});
  EXPECT_EQ(half.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace allocguard::net
