// The HTTPS server (NewHttpsServer) with certificates from operator/certs.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>

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
  explicit RunningServer(HttpsServerOptions options) {
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
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
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
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
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

TEST(HttpsServerTest, RequiresAKeyPairProvider) {
  EXPECT_EQ(NewHttpsServer({}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace allocguard::net
