// The one translation unit that includes <httplib.h>. It adapts cpp-httplib to
// the interfaces in http.h.

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <mutex>
#include <thread>

#include "operator/net/http.h"

namespace allocguard::net {

bool CaseInsensitiveLess::operator()(const std::string& a, const std::string& b) const {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) <
           std::tolower(static_cast<unsigned char>(y));
  });
}

Result<ParsedUrl> ParseHttpUrl(const std::string& url) {
  ParsedUrl out;
  auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos) {
    return InvalidArgument("URL \"" + url + "\" has no scheme (expected http://host:port)");
  }
  out.scheme = url.substr(0, scheme_end);
  if (out.scheme != "http" && out.scheme != "https") {
    return InvalidArgument("URL \"" + url + "\": scheme must be http or https");
  }
  std::string rest = url.substr(scheme_end + 3);
  auto slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) out.path_prefix = rest.substr(slash);
  while (!out.path_prefix.empty() && out.path_prefix.back() == '/') out.path_prefix.pop_back();
  std::string port_text;
  if (!authority.empty() && authority.front() == '[') {
    auto close = authority.find(']');
    if (close == std::string::npos) return InvalidArgument("URL \"" + url + "\": unclosed '['");
    out.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return InvalidArgument("URL \"" + url + "\": bad port");
      port_text = authority.substr(close + 2);
    }
  } else {
    auto colon = authority.rfind(':');
    out.host = authority.substr(0, colon);
    if (colon != std::string::npos) port_text = authority.substr(colon + 1);
  }
  if (out.host.empty()) return InvalidArgument("URL \"" + url + "\" has no host");
  out.port = out.scheme == "https" ? 443 : 80;
  if (!port_text.empty()) {
    if (port_text.size() > 5 ||
        !std::all_of(port_text.begin(), port_text.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
      return InvalidArgument("URL \"" + url + "\": port \"" + port_text + "\" is not a number");
    }
    out.port = std::stoi(port_text);
    if (out.port <= 0 || out.port > 65535) {
      return InvalidArgument("URL \"" + url + "\": port out of range");
    }
  }
  return out;
}

namespace {

Headers FromHttplib(const httplib::Headers& in) {
  Headers out;
  for (const auto& [k, v] : in) out.emplace(k, v);
  return out;
}

class PlainHttpClient final : public HttpClient {
 public:
  PlainHttpClient(const ParsedUrl& url, const HttpClientOptions& options)
      : prefix_(url.path_prefix), client_(url.host, url.port) {
    client_.set_connection_timeout(options.connect_timeout);
    client_.set_read_timeout(options.read_timeout);
    client_.set_write_timeout(options.write_timeout);
    client_.set_keep_alive(options.keep_alive);
  }

  Result<HttpResponse> Send(const HttpRequest& request) override {
    httplib::Request req;
    req.method = request.method;
    req.path = prefix_ + request.path;
    for (const auto& [k, v] : request.headers) req.headers.emplace(k, v);
    if (!request.body.empty() || request.method == "POST" || request.method == "PUT" ||
        request.method == "PATCH") {
      req.body = request.body;
      if (!request.content_type.empty()) req.set_header("Content-Type", request.content_type);
    }
    auto result = client_.send(req);
    if (!result) {
      return Unavailable(request.method + " " + req.path + ": " + httplib::to_string(result.error()));
    }
    HttpResponse out;
    out.status = result->status;
    out.headers = FromHttplib(result->headers);
    out.body = std::move(result->body);
    return out;
  }

 private:
  std::string prefix_;
  httplib::Client client_;
};

class HttplibServer final : public HttpServer {
 public:
  explicit HttplibServer(const HttpServerOptions& options) : options_(options) {
    int threads = std::max(1, options.worker_threads);
    server_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    server_.set_read_timeout(options.read_timeout);
  }

  void Handle(const std::string& method, const std::string& path, HttpHandler handler) override {
    auto adapter = [handler = std::move(handler)](const httplib::Request& req,
                                                  httplib::Response& res) {
      HttpRequest in;
      in.method = req.method;
      in.path = req.target.empty() ? req.path : req.target;
      in.headers = FromHttplib(req.headers);
      in.body = req.body;
      HttpResponse out = handler(in);
      res.status = out.status;
      std::string content_type = "text/plain";
      for (const auto& [k, v] : out.headers) {
        if (CaseInsensitiveLess()(k, "Content-Type") == false &&
            CaseInsensitiveLess()("Content-Type", k) == false) {
          content_type = v;
        } else {
          res.set_header(k.c_str(), v);
        }
      }
      res.set_content(std::move(out.body), content_type.c_str());
    };
    if (method == "GET") {
      server_.Get(path, adapter);
    } else if (method == "POST") {
      server_.Post(path, adapter);
    } else if (method == "PUT") {
      server_.Put(path, adapter);
    } else if (method == "DELETE") {
      server_.Delete(path, adapter);
    } else if (method == "PATCH") {
      server_.Patch(path, adapter);
    }
  }

  Status Bind() override {
    if (options_.port == 0) {
      int port = server_.bind_to_any_port(options_.host);
      if (port < 0) return Unavailable("cannot bind " + options_.host + ":0");
      port_ = port;
    } else {
      if (!server_.bind_to_port(options_.host, options_.port)) {
        return Unavailable("cannot bind " + options_.host + ":" + std::to_string(options_.port));
      }
      port_ = options_.port;
    }
    return Status::Ok();
  }

  void Serve() override { server_.listen_after_bind(); }
  void Stop() override { server_.stop(); }
  int port() const override { return port_; }

 private:
  HttpServerOptions options_;
  httplib::Server server_;
  int port_ = 0;
};

}  // namespace

Result<std::unique_ptr<HttpClient>> NewHttpClient(const HttpClientOptions& options) {
  AG_ASSIGN_OR_RETURN(ParsedUrl url, ParseHttpUrl(options.base_url));
  if (url.scheme != "http") {
    return InvalidArgument("base URL \"" + options.base_url + "\": only http:// is supported here");
  }
  return std::unique_ptr<HttpClient>(std::make_unique<PlainHttpClient>(url, options));
}

std::unique_ptr<HttpServer> NewHttpServer(const HttpServerOptions& options) {
  return std::make_unique<HttplibServer>(options);
}

std::string UrlDecode(const std::string& s) { return httplib::detail::decode_url(s, true); }

std::string QueryParam(const std::string& path_and_query, const std::string& key) {
  auto q = path_and_query.find('?');
  if (q == std::string::npos) return "";
  std::string query = path_and_query.substr(q + 1);
  size_t pos = 0;
  while (pos <= query.size()) {
    size_t amp = query.find('&', pos);
    if (amp == std::string::npos) amp = query.size();
    std::string pair = query.substr(pos, amp - pos);
    auto eq = pair.find('=');
    std::string k = UrlDecode(pair.substr(0, eq));
    if (k == key) return eq == std::string::npos ? "" : UrlDecode(pair.substr(eq + 1));
    pos = amp + 1;
  }
  return "";
}

}  // namespace allocguard::net
