// The HTTPS server (NewHttpsServer) with certificates from operator/certs.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "operator/certs/x509.h"
#include "operator/net/http.h"

namespace allocguard::net {
namespace {

using std::chrono::hours;

struct Authority {
  std::string ca_pem;
  std::shared_ptr<const TlsKeyPair> pair;  // serving 127.0.0.1 and "localhost"
};

Authority NewAuthority(const std::string& name) {
  const auto now = std::chrono::system_clock::now();
  auto ca = certs::GenerateCa(name, now - hours(1), now + hours(24));
  EXPECT_TRUE(ca.ok()) << ca.status().ToString();
  certs::ServingCertificateRequest request{
      "localhost", {"localhost"}, {"127.0.0.1"}, now - hours(1), now + hours(12)};
  auto serving = certs::IssueServingCertificate(request, ca->cert_pem, ca->key_pem);
  EXPECT_TRUE(serving.ok()) << serving.status().ToString();
  auto pair = std::make_shared<TlsKeyPair>();
  pair->cert_chain_pem = serving->cert_pem;
  pair->key_pem = serving->key_pem;
  return {ca->cert_pem, pair};
}

// The pair a test server presents; swappable while it runs.
class SwappablePair {
 public:
  void Set(std::shared_ptr<const TlsKeyPair> pair) {
    std::lock_guard<std::mutex> lock(mu_);
    pair_ = std::move(pair);
  }
  TlsKeyPairProvider Provider() {
    return [this] {
      std::lock_guard<std::mutex> lock(mu_);
      return pair_;
    };
  }

 private:
  std::mutex mu_;
  std::shared_ptr<const TlsKeyPair> pair_;
};

class RunningServer {
 public:
  explicit RunningServer(const HttpsServerOptions& options) {
    auto server = NewHttpsServer(options);
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    server_->Handle("GET", "/hello", [](const HttpRequest&) {
      return HttpResponse{200, {}, "hello"};
    });
    server_->Handle("POST", "/echo", [](const HttpRequest& r) {
      return HttpResponse{200, {}, std::to_string(r.body.size())};
    });
    EXPECT_TRUE(server_->Bind().ok());
    thread_ = std::thread([this] { server_->Serve(); });
  }
  ~RunningServer() {
    server_->Stop();
    thread_.join();
  }
  std::string url() const { return "https://127.0.0.1:" + std::to_string(server_->port()); }
  int port() const { return server_->port(); }

 private:
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
};

Result<HttpResponse> Get(const std::string& url, const std::string& ca_pem,
                         const std::string& path = "/hello") {
  auto client = NewStreamingHttpClient({.base_url = url, .tls = {.ca_pem = ca_pem}});
  if (!client.ok()) return client.status();
  return (*client)->Send({.path = path});
}

TEST(HttpsServerTest, ServesATrustingClientAndRefusesAnUntrustingOne) {
  Authority a = NewAuthority("ca-a");
  Authority b = NewAuthority("ca-b");
  SwappablePair pair;
  pair.Set(a.pair);
  RunningServer server({.key_pair = pair.Provider()});
  auto ok = Get(server.url(), a.ca_pem);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->body, "hello");
  EXPECT_FALSE(Get(server.url(), b.ca_pem).ok());
}

// The names under `dir` that start with `prefix` and, for /proc/self/fd, the
// descriptors whose target does.
std::vector<std::string> Entries(const std::string& dir, const std::string& prefix,
                                 bool follow_links) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (follow_links) name = std::filesystem::read_symlink(entry.path(), ec).string();
    if (name.rfind(prefix, 0) == 0) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A CA given in memory (a kubeconfig's certificate-authority-data) reaches
// OpenSSL as an anonymous memory file, never as a file in /tmp: a file there
// outlived every client that was killed with SIGKILL.
TEST(HttpsServerTest, AnInMemoryCaIsTrustedAndLeavesNoFileBehind) {
  Authority a = NewAuthority("ca-a");
  SwappablePair pair;
  pair.Set(a.pair);
  RunningServer server({.key_pair = pair.Provider()});
  const auto tmp_before = Entries("/tmp", "allocguard-ca-", false);
  const auto memfds_before = Entries("/proc/self/fd", "/memfd:allocguard-ca", true);
  {
    auto client = NewStreamingHttpClient({.base_url = server.url(), .tls = {.ca_pem = a.ca_pem}});
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    auto response = (*client)->Send({.path = "/hello"});
    ASSERT_TRUE(response.ok()) << response.status().ToString();
    EXPECT_EQ(response->status, 200);
    EXPECT_EQ(Entries("/tmp", "allocguard-ca-", false), tmp_before) << "the CA was written to /tmp";
    EXPECT_EQ(Entries("/proc/self/fd", "/memfd:allocguard-ca", true).size(),
              memfds_before.size() + 1)
        << "the live client holds its CA in one memory file";
  }
  EXPECT_EQ(Entries("/proc/self/fd", "/memfd:allocguard-ca", true), memfds_before)
      << "the memory file outlived its client";
}

TEST(HttpsServerTest, ACertificateSwappedUnderALiveServerIsPresentedOnTheNextConnection) {
  Authority a = NewAuthority("ca-a");
  Authority b = NewAuthority("ca-b");
  SwappablePair pair;
  pair.Set(a.pair);
  RunningServer server({.key_pair = pair.Provider()});
  // A kept-alive connection opened before the swap keeps working.
  auto kept = NewStreamingHttpClient({.base_url = server.url(), .tls = {.ca_pem = a.ca_pem}});
  ASSERT_TRUE(kept.ok());
  ASSERT_TRUE((*kept)->Send({.path = "/hello"}).ok());

  pair.Set(b.pair);
  auto after = Get(server.url(), b.ca_pem);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->status, 200);
  EXPECT_FALSE(Get(server.url(), a.ca_pem).ok()) << "the old certificate is still presented";
  auto on_kept = (*kept)->Send({.path = "/hello"});
  ASSERT_TRUE(on_kept.ok()) << on_kept.status().ToString();
  EXPECT_EQ(on_kept->status, 200);
}

TEST(HttpsServerTest, AnUnusablePairKeepsTheLastGoodOne) {
  Authority a = NewAuthority("ca-a");
  Authority b = NewAuthority("ca-b");
  SwappablePair pair;
  RunningServer server({.key_pair = pair.Provider()});
  EXPECT_FALSE(Get(server.url(), a.ca_pem).ok()) << "no pair yet: the handshake fails";
  pair.Set(a.pair);
  EXPECT_TRUE(Get(server.url(), a.ca_pem).ok());
  auto mismatched = std::make_shared<TlsKeyPair>();
  mismatched->cert_chain_pem = b.pair->cert_chain_pem;
  mismatched->key_pem = a.pair->key_pem;  // not b's key
  pair.Set(mismatched);
  auto still = Get(server.url(), a.ca_pem);
  EXPECT_TRUE(still.ok()) << still.status().ToString();
  pair.Set(nullptr);
  EXPECT_TRUE(Get(server.url(), a.ca_pem).ok());
}

TEST(HttpsServerTest, AnOversizeBodyIsAnswered413AndTheServerGoesOn) {
  Authority a = NewAuthority("ca-a");
  SwappablePair pair;
  pair.Set(a.pair);
  RunningServer server({.max_request_body_bytes = 1024, .key_pair = pair.Provider()});
  auto client = NewStreamingHttpClient({.base_url = server.url(), .tls = {.ca_pem = a.ca_pem}});
  ASSERT_TRUE(client.ok());
  auto small = (*client)->Send(
      {.method = "POST", .path = "/echo", .body = std::string(1024, 'x'), .content_type = "a/b"});
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  EXPECT_EQ(small->status, 200);
  EXPECT_EQ(small->body, "1024");
  auto big_client = NewStreamingHttpClient({.base_url = server.url(), .tls = {.ca_pem = a.ca_pem}});
  ASSERT_TRUE(big_client.ok());
  auto big = (*big_client)
                 ->Send({.method = "POST",
                         .path = "/echo",
                         .body = std::string(4u << 20, 'x'),
                         .content_type = "a/b"});
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ(big->status, 413);
  auto after = Get(server.url(), a.ca_pem);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->status, 200);
}

// A raw OpenSSL client: handshakes with exactly [min, max] protocol versions
// and the given ALPN offer. Returns "" on success, else the error reason.
struct Handshake {
  bool ok = false;
  int reason = 0;  // ERR_GET_REASON of the first error
  std::string alpn;
  int version = 0;
};

// A TCP connection to the server on loopback; its reads give up after 20 s.
int ConnectTcp(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  timeval tv{20, 0};  // no read in these tests waits longer
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

Handshake RawHandshake(int port, int min_version, int max_version,
                       const std::string& alpn_wire = "") {
  Handshake out;
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_security_level(ctx, 0);  // let the client offer old protocols at all
  SSL_CTX_set_min_proto_version(ctx, min_version);
  SSL_CTX_set_max_proto_version(ctx, max_version);
  SSL_CTX_set_cipher_list(ctx, "ALL:@SECLEVEL=0");
  if (!alpn_wire.empty()) {
    SSL_CTX_set_alpn_protos(ctx, reinterpret_cast<const unsigned char*>(alpn_wire.data()),
                            static_cast<unsigned>(alpn_wire.size()));
  }
  int fd = ConnectTcp(port);
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  ERR_clear_error();
  out.ok = SSL_connect(ssl) == 1;
  out.reason = ERR_GET_REASON(ERR_peek_error());
  if (out.ok) {
    const unsigned char* selected = nullptr;
    unsigned len = 0;
    SSL_get0_alpn_selected(ssl, &selected, &len);
    out.alpn.assign(reinterpret_cast<const char*>(selected), len);
    out.version = SSL_version(ssl);
    SSL_shutdown(ssl);
  }
  ERR_clear_error();
  SSL_free(ssl);
  close(fd);
  SSL_CTX_free(ctx);
  return out;
}

// Sends a raw request over TLS (1.2 or later) and returns the response text
// read until the server closes or 64 KB arrived.
std::string RawTlsExchange(int port, const std::string& head, size_t chunked_body_bytes) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  int fd = ConnectTcp(port);
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  std::string out;
  if (SSL_connect(ssl) == 1) {
    SSL_write(ssl, head.data(), static_cast<int>(head.size()));
    const std::string chunk = "10000\r\n" + std::string(0x10000, 'x') + "\r\n";
    for (size_t sent = 0; sent < chunked_body_bytes; sent += 0x10000) {
      if (SSL_write(ssl, chunk.data(), static_cast<int>(chunk.size())) <= 0) break;
    }
    SSL_write(ssl, "0\r\n\r\n", 5);
    char buf[4096];
    int n;
    while (out.size() < 65536 && (n = SSL_read(ssl, buf, sizeof buf)) > 0) {
      out.append(buf, static_cast<size_t>(n));
      if (out.find("\r\n\r\n") != std::string::npos) break;
    }
  }
  ERR_clear_error();
  SSL_free(ssl);
  close(fd);
  SSL_CTX_free(ctx);
  return out;
}

TEST(HttpsServerTest, AChunkedBodyIsRefusedBeforeItIsRead) {
  // cpp-httplib's payload cap does not apply to chunked bodies, so chunked
  // requests are refused outright: a 4 MiB one must not reach the handler.
  Authority a = NewAuthority("ca-a");
  SwappablePair pair;
  pair.Set(a.pair);
  RunningServer server({.max_request_body_bytes = 1u << 20, .key_pair = pair.Provider()});
  const std::string head =
      "POST /echo HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n"
      "Content-Type: a/b\r\n\r\n";
  std::string big = RawTlsExchange(server.port(), head, 4u << 20);
  EXPECT_EQ(big.rfind("HTTP/1.1 411", 0), 0u) << big;
  EXPECT_EQ(big.find("4194304"), std::string::npos) << "the handler read the body: " << big;
  std::string small = RawTlsExchange(server.port(), head, 0x10000);
  EXPECT_EQ(small.rfind("HTTP/1.1 411", 0), 0u) << small;
  EXPECT_TRUE(Get(server.url(), a.ca_pem).ok());
}

TEST(HttpsServerTest, RefusesTls11AndAcceptsTls12And13) {
  Authority a = NewAuthority("ca-a");
  SwappablePair pair;
  pair.Set(a.pair);
  RunningServer server({.key_pair = pair.Provider()});
  Handshake tls11 = RawHandshake(server.port(), TLS1_1_VERSION, TLS1_1_VERSION);
  EXPECT_FALSE(tls11.ok);
  // The server's alert, not a client that could not offer TLS 1.1.
  EXPECT_EQ(tls11.reason, SSL_R_TLSV1_ALERT_PROTOCOL_VERSION);
  Handshake tls12 = RawHandshake(server.port(), TLS1_2_VERSION, TLS1_2_VERSION);
  EXPECT_TRUE(tls12.ok);
  EXPECT_EQ(tls12.version, TLS1_2_VERSION);
  Handshake tls13 = RawHandshake(server.port(), TLS1_3_VERSION, TLS1_3_VERSION);
  EXPECT_TRUE(tls13.ok);
}

TEST(HttpsServerTest, NegotiatesNoHttp2) {
  Authority a = NewAuthority("ca-a");
  SwappablePair pair;
  pair.Set(a.pair);
  RunningServer server({.key_pair = pair.Provider()});
  const std::string offer = std::string("\x02h2\x08http/1.1", 12);
  Handshake h = RawHandshake(server.port(), TLS1_2_VERSION, TLS1_3_VERSION, offer);
  ASSERT_TRUE(h.ok);
  EXPECT_NE(h.alpn, "h2");
}

// --- the event loop's limits ---------------------------------------------

// A raw TLS client connection, handshaken on construction.
class RawTls {
 public:
  explicit RawTls(int port) : ctx_(SSL_CTX_new(TLS_client_method())), fd_(ConnectTcp(port)) {
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    handshaken_ = SSL_connect(ssl_) == 1;
    ERR_clear_error();
  }
  ~RawTls() {
    SSL_free(ssl_);
    close(fd_);
    SSL_CTX_free(ctx_);
  }
  bool handshaken() const { return handshaken_; }
  bool Send(const std::string& bytes) {
    bool ok = SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size())) > 0;
    ERR_clear_error();
    return ok;
  }
  // Reads until the server closes, the head of a response has arrived, or
  // the socket's 20 s read timeout.
  std::string ReadHead() {
    std::string out;
    char buf[4096];
    int n;
    while ((n = SSL_read(ssl_, buf, sizeof buf)) > 0) {
      out.append(buf, static_cast<size_t>(n));
      if (out.find("\r\n\r\n") != std::string::npos) break;
    }
    ERR_clear_error();
    return out;
  }
  // One read's worth; "" when the server closed or the read timed out.
  std::string ReadSome() {
    char buf[4096];
    int n = SSL_read(ssl_, buf, sizeof buf);
    ERR_clear_error();
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  }
  // True when the server closed the connection (not when the read timed out).
  bool ClosedByServer() {
    char buf[256];
    int n = SSL_read(ssl_, buf, sizeof buf);
    int error = SSL_get_error(ssl_, n);
    ERR_clear_error();
    if (n > 0) return false;
    // A read timeout asks to read again; a close is an EOF, alert or error.
    return error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE &&
           !(error == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK));
  }

 private:
  SSL_CTX* ctx_;
  int fd_;
  SSL* ssl_ = nullptr;
  bool handshaken_ = false;
};

std::string RequestWithHeaders(int extra_headers, size_t value_bytes = 1) {
  std::string head = "GET /hello HTTP/1.1\r\nHost: localhost\r\n";
  for (int i = 0; i < extra_headers; ++i) {
    head += "X-Header-" + std::to_string(i) + ": " + std::string(value_bytes, 'v') + "\r\n";
  }
  return head + "\r\n";
}

TEST(HttpsServerTest, TooManyHeadersOrTooLongAHeadIsAnswered431) {
  Authority a = NewAuthority("ca-a");
  SwappablePair pair;
  pair.Set(a.pair);
  RunningServer server(
      {.max_header_count = 100, .max_header_bytes = 16u << 10, .key_pair = pair.Provider()});
  {
    RawTls at_cap(server.port());  // Host and 99 more: exactly 100 headers
    ASSERT_TRUE(at_cap.handshaken());
    ASSERT_TRUE(at_cap.Send(RequestWithHeaders(99)));
    EXPECT_EQ(at_cap.ReadHead().rfind("HTTP/1.1 200", 0), 0u);
  }
  {
    RawTls over(server.port());
    ASSERT_TRUE(over.handshaken());
    over.Send(RequestWithHeaders(100));
    std::string answer = over.ReadHead();
    EXPECT_EQ(answer.rfind("HTTP/1.1 431", 0), 0u) << answer;
    EXPECT_TRUE(over.ClosedByServer());
  }
  {
    // A flood much larger than the cap is cut off after the cap, not read.
    RawTls flood(server.port());
    ASSERT_TRUE(flood.handshaken());
    flood.Send(RequestWithHeaders(20000).substr(0, 256u << 10));
    std::string answer = flood.ReadHead();
    EXPECT_EQ(answer.rfind("HTTP/1.1 431", 0), 0u) << answer;
  }
  {
    RawTls long_head(server.port());  // few headers, but 20 KiB of them
    ASSERT_TRUE(long_head.handshaken());
    long_head.Send(RequestWithHeaders(2, 10u << 10));
    std::string answer = long_head.ReadHead();
    EXPECT_EQ(answer.rfind("HTTP/1.1 431", 0), 0u) << answer;
  }
  EXPECT_TRUE(Get(server.url(), a.ca_pem).ok()) << "the server goes on";
}

TEST(HttpsServerTest, ARequestDeadlineDisconnectsAClientThatTricklesItsHeaders) {
  Authority a = NewAuthority("ca-a");
  SwappablePair pair;
  pair.Set(a.pair);
  RunningServer server(
      {.request_timeout = std::chrono::milliseconds(1500), .key_pair = pair.Provider()});
  RawTls trickler(server.port());
  ASSERT_TRUE(trickler.handshaken());
  // One byte every 100 ms: each read is prompt, the request never completes.
  // A per-read timeout would let this go on for the whole 30 s budget.
  const std::string head = RequestWithHeaders(50);
  size_t sent = 0;
  bool cut_off = false;
  for (; sent < 300; ++sent) {
    if (!trickler.Send(head.substr(sent, 1))) {
      cut_off = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(cut_off || trickler.ClosedByServer()) << "the trickler was never disconnected";
  EXPECT_LT(sent, 300u) << "the server let a 30 s request trickle to its end";
  EXPECT_TRUE(Get(server.url(), a.ca_pem).ok());
}

TEST(HttpsServerTest, IdleConnectionsBeyondTheWorkerCountDoNotDelayARequest) {
  Authority a = NewAuthority("ca-a");
  SwappablePair pair;
  pair.Set(a.pair);
  // Idle connections would be held for 30 s; the request must be answered
  // within the client's 5 s, as the API server's webhook timeout demands.
  RunningServer server({.worker_threads = 1,
                        .request_timeout = std::chrono::seconds(30),
                        .keep_alive_timeout = std::chrono::seconds(30),
                        .key_pair = pair.Provider()});
  std::vector<int> idle_tcp;
  idle_tcp.reserve(16);
  for (int i = 0; i < 16; ++i) idle_tcp.push_back(ConnectTcp(server.port()));
  std::vector<std::unique_ptr<RawTls>> idle_tls;
  for (int i = 0; i < 16; ++i) {
    idle_tls.push_back(std::make_unique<RawTls>(server.port()));
    ASSERT_TRUE(idle_tls.back()->handshaken());
  }
  auto client = NewStreamingHttpClient({.base_url = server.url(),
                                        .tls = {.ca_pem = a.ca_pem},
                                        .connect_timeout = std::chrono::seconds(5),
                                        .read_timeout = std::chrono::seconds(5),
                                        .write_timeout = std::chrono::seconds(5)});
  ASSERT_TRUE(client.ok());
  auto response = (*client)->Send({.path = "/hello"});
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 200);
  for (int fd : idle_tcp) close(fd);
}

TEST(HttpsServerTest, AtTheConnectionCapTheLongestSilentConnectionMakesRoom) {
  Authority a = NewAuthority("ca-a");
  SwappablePair pair;
  pair.Set(a.pair);
  RunningServer server({.request_timeout = std::chrono::seconds(30),
                        .max_connections = 4,
                        .key_pair = pair.Provider()});
  std::vector<std::unique_ptr<RawTls>> idle;
  for (int i = 0; i < 4; ++i) {
    idle.push_back(std::make_unique<RawTls>(server.port()));
    ASSERT_TRUE(idle.back()->handshaken());
  }
  auto response = Get(server.url(), a.ca_pem);
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 200);
  EXPECT_TRUE(idle.front()->ClosedByServer()) << "the oldest idle connection was not closed";
}

TEST(HttpsServerTest, KeptAliveConnectionsServePipelinedRequestsInOrder) {
  Authority a = NewAuthority("ca-a");
  SwappablePair pair;
  pair.Set(a.pair);
  RunningServer server({.key_pair = pair.Provider()});
  RawTls c(server.port());
  ASSERT_TRUE(c.handshaken());
  const std::string post = "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc";
  ASSERT_TRUE(c.Send(post + "GET /missing HTTP/1.1\r\nHost: x\r\n\r\n" + post));
  std::string all;
  auto count = [&] {
    size_t n = 0;
    for (size_t p = all.find("HTTP/1.1 "); p != std::string::npos;
         p = all.find("HTTP/1.1 ", p + 1)) {
      ++n;
    }
    return n;
  };
  while (count() < 3 || all.size() < all.rfind("\r\n\r\n") + 5) {
    std::string piece = c.ReadSome();
    if (piece.empty()) break;
    all += piece;
  }
  size_t first = all.find("HTTP/1.1 200");
  size_t missing = all.find("HTTP/1.1 404");
  size_t second = all.rfind("HTTP/1.1 200");
  ASSERT_NE(first, std::string::npos) << all;
  ASSERT_NE(missing, std::string::npos) << all;
  EXPECT_LT(first, missing) << all;
  EXPECT_LT(missing, second) << all;
  EXPECT_EQ(all.substr(all.size() - 1), "3") << "the second echo's body: " << all;
}

TEST(HttpsServerTest, StopReturnsPromptlyWithIdleConnectionsOpen) {
  Authority a = NewAuthority("ca-a");
  SwappablePair pair;
  pair.Set(a.pair);
  auto made = NewHttpsServer({.request_timeout = std::chrono::seconds(60),
                              .keep_alive_timeout = std::chrono::seconds(60),
                              .key_pair = pair.Provider()});
  ASSERT_TRUE(made.ok());
  std::unique_ptr<HttpServer> server = std::move(*made);
  server->Handle("GET", "/hello", [](const HttpRequest&) { return HttpResponse{200, {}, "hi"}; });
  ASSERT_TRUE(server->Bind().ok());
  std::atomic<bool> served{false};
  std::thread serving([&] {
    server->Serve();
    served = true;
  });
  const std::string url = "https://127.0.0.1:" + std::to_string(server->port());
  int idle_tcp = ConnectTcp(server->port());
  RawTls idle_tls(server->port());
  ASSERT_TRUE(idle_tls.handshaken());
  auto kept = NewStreamingHttpClient({.base_url = url, .tls = {.ca_pem = a.ca_pem}});
  ASSERT_TRUE(kept.ok());
  ASSERT_TRUE((*kept)->Send({.path = "/hello"}).ok());  // now idle, kept alive

  server->Stop();
  // The connections would keep a server that waits for them busy for 60 s.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!served.load() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(served.load()) << "Serve() did not return within 10 s of Stop()";
  if (!served.load()) close(idle_tcp);  // lets a waiting server go, so the join ends
  serving.join();
  EXPECT_TRUE(idle_tls.ClosedByServer());
  close(idle_tcp);
}

TEST(HttpsServerTest, RequiresAKeyPairProvider) {
  EXPECT_EQ(NewHttpsServer({}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace allocguard::net
