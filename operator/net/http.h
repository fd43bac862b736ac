#pragma once

// The HTTP transport: the only interface through which allocguard speaks HTTP.
//
// http_transport.cc is the one source file that includes <httplib.h>; every
// other module talks to these interfaces, so that tests can substitute fakes
// and the HTTP library can be replaced in one place.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

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

}  // namespace allocguard::net
