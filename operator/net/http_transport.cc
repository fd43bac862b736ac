// The one translation unit that includes <httplib.h>. It adapts cpp-httplib to
// the interfaces in http.h.

#include <httplib.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "operator/net/http.h"
#include "operator/net/tls_util.h"

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
    if (port_text.size() > 5 || !std::all_of(port_text.begin(), port_text.end(), [](char c) {
          return std::isdigit(static_cast<unsigned char>(c));
        })) {
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
      return Unavailable(request.method + " " + req.path + ": " +
                         httplib::to_string(result.error()));
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
  HttplibServer(std::unique_ptr<httplib::Server> server, std::string host, int port,
                int worker_threads)
      : server_(std::move(server)), host_(std::move(host)), requested_port_(port) {
    int threads = std::max(1, worker_threads);
    server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  }

  httplib::Server& server() { return *server_; }

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
        if (!CaseInsensitiveLess()(k, "Content-Type") &&
            !CaseInsensitiveLess()("Content-Type", k)) {
          content_type = v;
        } else {
          res.set_header(k, v);
        }
      }
      res.set_content(out.body, content_type);
    };
    if (method == "GET") {
      server_->Get(path, adapter);
    } else if (method == "POST") {
      server_->Post(path, adapter);
    } else if (method == "PUT") {
      server_->Put(path, adapter);
    } else if (method == "DELETE") {
      server_->Delete(path, adapter);
    } else if (method == "PATCH") {
      server_->Patch(path, adapter);
    }
  }

  Status Bind() override {
    if (!server_->is_valid()) return Internal("the HTTP server could not be set up");
    if (requested_port_ == 0) {
      int port = server_->bind_to_any_port(host_);
      if (port < 0) return Unavailable("cannot bind " + host_ + ":0");
      port_ = port;
    } else {
      if (!server_->bind_to_port(host_, requested_port_)) {
        return Unavailable("cannot bind " + host_ + ":" + std::to_string(requested_port_));
      }
      port_ = requested_port_;
    }
    return Status::Ok();
  }

  void Serve() override { server_->listen_after_bind(); }
  void Stop() override { server_->stop(); }
  int port() const override { return port_; }

 private:
  std::unique_ptr<httplib::Server> server_;
  std::string host_;
  int requested_port_ = 0;
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
  auto server = std::make_unique<HttplibServer>(std::make_unique<httplib::Server>(), options.host,
                                                options.port, options.worker_threads);
  server->server().set_read_timeout(options.read_timeout);
  return server;
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

// ---------------------------------------------------------------------------
// StreamingHttpClient: plain or TLS, with streaming and cancellation.

namespace {

Result<std::string> ReadPem(const std::string& pem, const std::string& file, const char* what) {
  if (!pem.empty()) return pem;
  std::FILE* f = std::fopen(file.c_str(), "rb");
  if (f == nullptr) return InvalidArgument(std::string("cannot read ") + what + " file " + file);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

// An in-memory CA bundle as a file OpenSSL can open by name: an anonymous
// memory file (memfd_create) named /proc/self/fd/N. It never touches a disk
// and vanishes with its last descriptor, even when the process is killed (a
// file in /tmp was left behind by every client killed with SIGKILL).
class InMemoryFile {
 public:
  static Result<InMemoryFile> Create(const std::string& content) {
    InMemoryFile file(memfd_create("allocguard-ca", MFD_CLOEXEC));
    if (file.fd_ < 0) return Internal("cannot create an in-memory CA file (memfd_create)");
    size_t done = 0;
    while (done < content.size()) {
      ssize_t n = write(file.fd_, content.data() + done, content.size() - done);
      if (n <= 0) return Internal("cannot write an in-memory CA file");
      done += static_cast<size_t>(n);
    }
    return file;
  }
  InMemoryFile() = default;
  InMemoryFile(InMemoryFile&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  InMemoryFile& operator=(InMemoryFile&& other) noexcept {
    if (this != &other) {
      Close();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  InMemoryFile(const InMemoryFile&) = delete;
  InMemoryFile& operator=(const InMemoryFile&) = delete;
  ~InMemoryFile() { Close(); }

  // The name under which this process opens the file; valid while it lives.
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  explicit InMemoryFile(int fd) : fd_(fd) {}
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  int fd_ = -1;
};

class HttplibStreamingClient final : public StreamingHttpClient {
 public:
  HttplibStreamingClient(std::unique_ptr<httplib::ClientImpl> client, std::string prefix,
                         InMemoryFile ca_file)
      : client_(std::move(client)), prefix_(std::move(prefix)), ca_file_(std::move(ca_file)) {
    // Cancel() must reach a stream's socket even when it comes while the
    // connection is being set up, which ClientImpl::stop() alone misses.
    // Streams keep a dup of their socket, so its number cannot be reused by
    // another file while Cancel() may still shut it down.
    client_->set_socket_options([this](int sock) {
      std::lock_guard<std::mutex> lock(socket_mu_);
      if (!tracking_socket_) return;
      if (stream_socket_ >= 0) close(stream_socket_);
      stream_socket_ = dup(sock);
      if (cancelled_.load() && stream_socket_ >= 0) shutdown(stream_socket_, SHUT_RDWR);
    });
  }
  ~HttplibStreamingClient() override {
    if (stream_socket_ >= 0) close(stream_socket_);
  }

  Result<HttpResponse> Send(const HttpRequest& request) override {
    httplib::Request req = ToHttplib(request);
    httplib::Response res;
    httplib::Error error = httplib::Error::Success;
    if (cancelled_.load()) return Unavailable(request.method + " " + req.path + ": cancelled");
    bool ok = client_->send(req, res, error);
    if (!ok) return TransportError(request, req, error);
    HttpResponse out;
    out.status = res.status;
    out.headers = FromHttplib(res.headers);
    out.body = std::move(res.body);
    return out;
  }

  Status Stream(const HttpRequest& request, const StreamHandlers& handlers) override {
    httplib::Request req = ToHttplib(request);
    bool aborted_by_handler = false;
    req.response_handler = [&](const httplib::Response& res) {
      if (cancelled_.load()) return false;
      if (handlers.on_response && !handlers.on_response(res.status, FromHttplib(res.headers))) {
        aborted_by_handler = true;
        return false;
      }
      return true;
    };
    req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
      if (cancelled_.load()) return false;
      if (handlers.on_body && !handlers.on_body(std::string_view(data, len))) {
        aborted_by_handler = true;
        return false;
      }
      return true;
    };
    if (cancelled_.load()) return Unavailable(request.method + " " + req.path + ": cancelled");
    httplib::Response res;
    httplib::Error error = httplib::Error::Success;
    {
      std::lock_guard<std::mutex> lock(socket_mu_);
      tracking_socket_ = true;
    }
    bool ok = client_->send(req, res, error);
    {
      std::lock_guard<std::mutex> lock(socket_mu_);
      tracking_socket_ = false;
      if (stream_socket_ >= 0) close(stream_socket_);
      stream_socket_ = -1;
    }
    if (cancelled_.load()) return Unavailable(request.method + " " + req.path + ": cancelled");
    if (ok || aborted_by_handler) return Status::Ok();
    return TransportError(request, req, error).status();
  }

  void Cancel() override {
    cancelled_.store(true);
    {
      std::lock_guard<std::mutex> lock(socket_mu_);
      if (stream_socket_ >= 0) shutdown(stream_socket_, SHUT_RDWR);
    }
    client_->stop();
  }

 private:
  httplib::Request ToHttplib(const HttpRequest& request) const {
    httplib::Request req;
    req.method = request.method;
    req.path = prefix_ + request.path;
    for (const auto& [k, v] : request.headers) req.headers.emplace(k, v);
    if (!request.body.empty() || request.method == "POST" || request.method == "PUT" ||
        request.method == "PATCH") {
      req.body = request.body;
      if (!request.content_type.empty()) req.set_header("Content-Type", request.content_type);
    }
    return req;
  }

  Result<HttpResponse> TransportError(const HttpRequest& request, const httplib::Request& req,
                                      httplib::Error error) const {
    std::string what = cancelled_.load() ? "cancelled" : httplib::to_string(error);
    if (error == httplib::Error::SSLServerVerification) {
      what += " (the server certificate is not trusted for this host)";
    }
    return Unavailable(request.method + " " + req.path + ": " + what);
  }

  std::unique_ptr<httplib::ClientImpl> client_;
  std::string prefix_;
  InMemoryFile ca_file_;  // an in-memory CA bundle the TLS context reads
  std::atomic<bool> cancelled_{false};
  std::mutex socket_mu_;
  bool tracking_socket_ = false;
  int stream_socket_ = -1;  // a dup of the socket of the stream in flight
};

}  // namespace

Result<std::unique_ptr<StreamingHttpClient>> NewStreamingHttpClient(
    const StreamingHttpClientOptions& options) {
  IgnoreSigpipeOnce();
  AG_ASSIGN_OR_RETURN(ParsedUrl url, ParseHttpUrl(options.base_url));
  std::unique_ptr<httplib::ClientImpl> client;
  InMemoryFile in_memory_ca;
  if (url.scheme == "http") {
    client = std::make_unique<httplib::ClientImpl>(url.host, url.port);
  } else {
    const TlsOptions& tls = options.tls;
    // Verify against tls.server_name by connecting "to" that name and mapping
    // it to the real address: cpp-httplib checks the certificate against the
    // host it was constructed with.
    std::string verify_host = tls.server_name.empty() ? url.host : tls.server_name;
    bool has_cert = !tls.client_cert_pem.empty() || !tls.client_cert_file.empty();
    bool has_key = !tls.client_key_pem.empty() || !tls.client_key_file.empty();
    if (has_cert != has_key) {
      return InvalidArgument("a client certificate needs a client key, and a key a certificate");
    }
    std::unique_ptr<httplib::SSLClient> ssl;
    if (has_cert) {
      AG_ASSIGN_OR_RETURN(std::string cert_pem,
                          ReadPem(tls.client_cert_pem, tls.client_cert_file, "client certificate"));
      AG_ASSIGN_OR_RETURN(std::string key_pem,
                          ReadPem(tls.client_key_pem, tls.client_key_file, "client key"));
      AG_ASSIGN_OR_RETURN(auto certs, ParseCertificates(cert_pem, "client certificate"));
      AG_ASSIGN_OR_RETURN(PkeyPtr key, ParsePrivateKey(key_pem));
      // SSL_CTX_use_certificate/PrivateKey take their own references.
      ssl = std::make_unique<httplib::SSLClient>(verify_host, url.port, certs.front().get(),
                                                 key.get());
      if (!ssl->is_valid()) {
        return InvalidArgument("client certificate and key do not match or cannot be used");
      }
      for (size_t i = 1; i < certs.size(); ++i) {
        // Intermediate certificates of the client chain; the context owns them.
        if (SSL_CTX_add_extra_chain_cert(ssl->ssl_context(), certs[i].get()) == 1) {
          static_cast<void>(certs[i].release());
        }
      }
    } else {
      ssl = std::make_unique<httplib::SSLClient>(verify_host, url.port);
    }
    if (verify_host != url.host) ssl->set_hostname_addr_map({{verify_host, url.host}});
    if (tls.insecure_skip_verify) {
      ssl->enable_server_certificate_verification(false);
    } else if (!tls.ca_pem.empty() || !tls.ca_file.empty()) {
      AG_ASSIGN_OR_RETURN(std::string ca_pem, ReadPem(tls.ca_pem, tls.ca_file, "CA"));
      if (auto cas = ParseCertificates(ca_pem, "CA bundle"); !cas.ok()) return cas.status();
      // cpp-httplib 0.11 adds the system CAs to any X509_STORE handed to it,
      // but trusts exactly the file given to set_ca_cert_path. In-memory CAs
      // therefore go through an in-memory file that lives as long as the client.
      std::string ca_path = tls.ca_file;
      if (!tls.ca_pem.empty()) {
        AG_ASSIGN_OR_RETURN(in_memory_ca, InMemoryFile::Create(tls.ca_pem));
        ca_path = in_memory_ca.path();
      }
      ssl->set_ca_cert_path(ca_path);
      ssl->enable_server_certificate_verification(true);
    } else {
      ssl->enable_server_certificate_verification(true);
    }
    SSL_CTX_set_min_proto_version(ssl->ssl_context(), TLS1_2_VERSION);
    client = std::move(ssl);
  }
  client->set_connection_timeout(options.connect_timeout);
  client->set_read_timeout(options.read_timeout);
  client->set_write_timeout(options.write_timeout);
  client->set_keep_alive(options.keep_alive);
  client->set_tcp_nodelay(options.tcp_nodelay);
  return std::unique_ptr<StreamingHttpClient>(std::make_unique<HttplibStreamingClient>(
      std::move(client), url.path_prefix, std::move(in_memory_ca)));
}

}  // namespace allocguard::net
