#pragma once

// The HTTP transport: the only interface through which allocguard speaks HTTP.
//
// http_transport.cc is the one source file that includes <httplib.h> (clients
// and the plain server); https_server.cc is the webhook server, on its own
// event loop. Every other module talks to these interfaces, so that tests can
// substitute fakes and the HTTP library can be replaced in one place.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "operator/common/heartbeat.h"
#include "operator/common/status.h"

namespace allocguard::net {

// Header names compare case-insensitively.
struct CaseInsensitiveLess {
  bool operator()(const std::string& a, const std::string& b) const;
};
using Headers = std::multimap<std::string, std::string, CaseInsensitiveLess>;

struct HttpRequest {
  std::string method = "GET";
  std::string path = "/";  // path and query, e.g. "/item?id=3"
  Headers headers;
  std::string body;
  std::string content_type;  // for requests with a body
};

struct HttpResponse {
  int status = 0;
  Headers headers;
  std::string body;
};

struct HttpClientOptions {
  // "http://host:port". Hosts may be names, IPv4 or bracketed IPv6 literals.
  std::string base_url;
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds read_timeout{30000};
  std::chrono::milliseconds write_timeout{30000};
  bool keep_alive = true;
};

// A client bound to one base URL. Send() is not safe to call concurrently on
// one client: give each thread its own.
class HttpClient {
 public:
  virtual ~HttpClient() = default;
  // Transport failures (refused, reset, timed out) are kUnavailable; any HTTP
  // status, including 4xx and 5xx, is a successful Result.
  virtual Result<HttpResponse> Send(const HttpRequest& request) = 0;
};

// Fails with kInvalidArgument when base_url is not an http:// URL.
Result<std::unique_ptr<HttpClient>> NewHttpClient(const HttpClientOptions& options);

// Splits "http://host:port/prefix" into its parts; port defaults to 80.
struct ParsedUrl {
  std::string scheme;
  std::string host;  // without IPv6 brackets
  int port = 0;
  std::string path_prefix;  // "" or "/prefix"
};
Result<ParsedUrl> ParseHttpUrl(const std::string& url);

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0 picks a free port; see HttpServer::port()
  int worker_threads = 8;
  std::chrono::milliseconds read_timeout{30000};
};

// A plain HTTP server. Handlers run on the server's worker threads and must be
// thread-safe. Unknown paths answer 404.
class HttpServer {
 public:
  virtual ~HttpServer() = default;
  // Registers a handler for an exact method and path (query excluded).
  virtual void Handle(const std::string& method, const std::string& path, HttpHandler handler) = 0;
  // Binds the socket. After it returns OK, port() is the bound port.
  virtual Status Bind() = 0;
  // Serves until Stop(). REQUIRES: Bind() succeeded.
  virtual void Serve() = 0;
  // Makes Serve() return; safe from any thread, including signal-driven ones.
  virtual void Stop() = 0;
  virtual int port() const = 0;
};

std::unique_ptr<HttpServer> NewHttpServer(const HttpServerOptions& options);

// Decodes %XX and '+' in a query component.
std::string UrlDecode(const std::string& s);
// Returns the value of key in "a=1&b=2", or "" when absent.
std::string QueryParam(const std::string& path_and_query, const std::string& key);

// ---------------------------------------------------------------------------
// HTTPS and streaming, for clients of the Kubernetes API.

// TLS settings for an https:// base URL. Each PEM input may come from a file
// or from memory; when both are set, memory wins.
struct TlsOptions {
  std::string ca_file;  // trust only these CAs; empty with ca_pem empty: system CAs
  std::string ca_pem;
  std::string client_cert_file;  // client certificate authentication
  std::string client_cert_pem;
  std::string client_key_file;
  std::string client_key_pem;
  // Verify the server certificate against this name instead of the URL's host
  // (kubeconfig tls-server-name). The connection still goes to the URL's host.
  std::string server_name;
  bool insecure_skip_verify = false;  // never verify the server (tests, kubeconfig opt-in)
};

struct StreamingHttpClientOptions {
  std::string base_url;  // "http://host:port" or "https://host:port[/prefix]"
  TlsOptions tls;        // used only for https://
  std::chrono::milliseconds connect_timeout{5000};
  // Longest silence tolerated while waiting for bytes; for long-lived streams
  // it must exceed the longest expected gap between events.
  std::chrono::milliseconds read_timeout{30000};
  std::chrono::milliseconds write_timeout{30000};
  bool keep_alive = true;
  // Send small writes at once: cpp-httplib writes a request's headers and
  // body separately, and Nagle's algorithm against the peer's delayed ACK
  // would hold the body back ~40 ms on a kept-alive connection.
  bool tcp_nodelay = true;
};

struct StreamHandlers {
  // Called once, after the status line and headers, before any body. Return
  // false to abort the request.
  std::function<bool(int status, const Headers& headers)> on_response;
  // Called for each decoded piece of the body. Pieces do not align with lines
  // or chunks of the wire format. Return false to abort the request.
  std::function<bool(std::string_view piece)> on_body;
};

// A client for one base URL that can also stream a response body. Like
// HttpClient, calls on one client are serialized: give each concurrent
// request (each watch) its own client. Cancel() is the exception.
class StreamingHttpClient : public HttpClient {
 public:
  // Streams the response to handlers. Returns OK when the body ended or a
  // handler returned false; kUnavailable on transport failures and when
  // Cancel() interrupted the request.
  virtual Status Stream(const HttpRequest& request, const StreamHandlers& handlers) = 0;
  // Interrupts the request in flight, if any, from any thread: its Send() or
  // Stream() returns kUnavailable promptly. Every later request on this client
  // fails with kUnavailable too; a cancelled client is finished.
  virtual void Cancel() = 0;
};

// Fails with kInvalidArgument on a bad URL or unreadable/invalid PEM input.
// The first call sets SIGPIPE to SIG_IGN if it is at its default, so that a
// write to a closed connection is an error rather than the end of the process.
Result<std::unique_ptr<StreamingHttpClient>> NewStreamingHttpClient(
    const StreamingHttpClientOptions& options);

// ---------------------------------------------------------------------------
// HTTPS server, for admission webhooks.

// A serving certificate: the PEM chain (leaf first, then intermediates) and
// the leaf's PEM private key.
struct TlsKeyPair {
  std::string cert_chain_pem;
  std::string key_pem;
};

// Supplies the key pair to present. Called on every TLS handshake from the
// server's event-loop thread: it must be thread-safe and cheap (return a cached
// shared_ptr). A pair is parsed once per distinct shared_ptr, so returning a
// new pointer is how a rotated certificate takes effect: the next handshake
// presents it, with no restart. nullptr, or a pair that does not parse or
// whose key does not match, keeps the last good pair; handshakes fail only
// while no good pair has ever been supplied.
using TlsKeyPairProvider = std::function<std::shared_ptr<const TlsKeyPair>()>;

struct HttpsServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0 picks a free port; see HttpServer::port()
  // Threads that run handlers. Connections do not hold them: one event-loop
  // thread owns every connection until a whole request has arrived, so idle,
  // slow or flooding clients cannot delay the requests of others.
  int worker_threads = 4;
  // The whole request, from the connection's accept (or from the first byte
  // of a later request on a kept-alive connection) to its last body byte:
  // TLS handshake, headers and body together. A client that has not sent a
  // whole request by then is disconnected, however steadily it trickles.
  std::chrono::milliseconds request_timeout{10000};
  // Writing one response.
  std::chrono::milliseconds write_timeout{10000};
  // Idle time and request count after which a kept-alive connection closes.
  std::chrono::milliseconds keep_alive_timeout{5000};
  int keep_alive_max_requests = 1000;
  // Larger request bodies are answered 413 and the connection closed, before
  // the body is read.
  size_t max_request_body_bytes = 1u << 20;
  // A request with more header lines, or a longer head (request line and
  // headers), is answered 431 and the connection closed.
  int max_header_count = 100;
  size_t max_header_bytes = 64u << 10;
  // Open connections. At the cap, a new connection closes the one silent the
  // longest among those not in a handler (or, if every one is, is refused),
  // so memory stays below about max_connections x (max_header_bytes +
  // max_request_body_bytes + OpenSSL's ~50 KiB).
  int max_connections = 128;
  TlsKeyPairProvider key_pair;  // required
  // Optional; beaten by the event loop on every turn (at least once a
  // second), so liveness can tell a wedged server. Must outlive the server.
  Heartbeat* heartbeat = nullptr;
};

// An HTTPS server: TLS 1.2 minimum, ECDHE with AEAD ciphers only for TLS 1.2,
// the certificate chosen per handshake from options.key_pair. It speaks
// HTTP/1.1 only (no ALPN protocol is offered, so a client offering "h2" falls
// back), which is also what kubebuilder operators enforce on webhook servers
// since the HTTP/2 rapid-reset advisories. Keep-alive and pipelining are
// supported; chunked request bodies are refused with 411 (the API server
// always sends Content-Length). A request that takes longer than
// request_timeout is closed without an answer. Stop() returns once handlers
// in progress have finished, whatever connections are open. Fails with
// kInvalidArgument when options.key_pair is empty.
Result<std::unique_ptr<HttpServer>> NewHttpsServer(const HttpsServerOptions& options);

}  // namespace allocguard::net
