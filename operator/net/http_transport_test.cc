#include <gtest/gtest.h>

#include <thread>

#include "operator/net/http.h"

namespace allocguard::net {
namespace {

TEST(ParseHttpUrlTest, AcceptsHostPortAndIpv6) {
  auto a = ParseHttpUrl("http://127.0.0.1:8080/base/");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 8080);
  EXPECT_EQ(a->path_prefix, "/base");
  auto b = ParseHttpUrl("http://[::1]:9000");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->host, "::1");
  EXPECT_EQ(b->port, 9000);
  EXPECT_EQ(ParseHttpUrl("http://example").value().port, 80);
}

TEST(ParseHttpUrlTest, RejectsMalformedUrlsWithReason) {
  EXPECT_NE(ParseHttpUrl("localhost:80").status().message().find("no scheme"), std::string::npos);
  EXPECT_NE(ParseHttpUrl("ftp://x").status().message().find("scheme"), std::string::npos);
  EXPECT_NE(ParseHttpUrl("http://x:abc").status().message().find("not a number"),
            std::string::npos);
  EXPECT_NE(ParseHttpUrl("http://x:70000").status().message().find("range"), std::string::npos);
}

TEST(QueryParamTest, DecodesValues) {
  EXPECT_EQ(QueryParam("/a?x=1&key=a%20b+c", "key"), "a b c");
  EXPECT_EQ(QueryParam("/a?x=1", "key"), "");
  EXPECT_EQ(QueryParam("/a", "x"), "");
}

TEST(HttpTransportTest, ClientAndServerRoundTripOnEphemeralPort) {
  auto server = NewHttpServer({});
  server->Handle("GET", "/echo", [](const HttpRequest& req) {
    HttpResponse res;
    res.status = 201;
    res.body = "id=" + QueryParam(req.path, "id");
    return res;
  });
  ASSERT_TRUE(server->Bind().ok());
  std::thread serving([&] { server->Serve(); });

  auto client = NewHttpClient(
      {.base_url = "http://127.0.0.1:" + std::to_string(server->port()), .keep_alive = false});
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto res = (*client)->Send({.method = "GET", .path = "/echo?id=7"});
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->status, 201);
  EXPECT_EQ(res->body, "id=7");
  auto missing = (*client)->Send({.method = "GET", .path = "/nope"});
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->status, 404);

  server->Stop();
  serving.join();
}

TEST(HttpTransportTest, RefusedConnectionIsUnavailable) {
  // Port 1 (tcpmux) is privileged and unused on any machine that runs these tests.
  auto client = NewHttpClient(
      {.base_url = "http://127.0.0.1:1", .connect_timeout = std::chrono::milliseconds(500)});
  ASSERT_TRUE(client.ok());
  auto res = (*client)->Send({.method = "GET", .path = "/"});
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace allocguard::net
