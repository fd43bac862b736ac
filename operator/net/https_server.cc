// The HTTPS server of the admission webhooks (NewHttpsServer in http.h).
//
// One event-loop thread owns every connection (epoll, non-blocking sockets,
// non-blocking OpenSSL handshakes and reads) until a whole request has
// arrived, under a deadline for the whole request and caps on header count,
// head size, body size and open connections. Complete requests go to a small
// worker pool; the loop writes the responses. A thread per connection, as in
// cpp-httplib, lets a handful of idle or trickling clients hold every thread
// while the API server's review waits past its timeout.

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "operator/net/http.h"
#include "operator/net/tls_util.h"

namespace allocguard::net {
namespace {

using Steady = std::chrono::steady_clock;

struct X509StackDeleter {
  void operator()(STACK_OF(X509) * s) const { sk_X509_pop_free(s, X509_free); }
};
using X509StackPtr = std::unique_ptr<STACK_OF(X509), X509StackDeleter>;
struct SslCtxDeleter {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
using SslCtxPtr = std::unique_ptr<SSL_CTX, SslCtxDeleter>;

// Chooses the certificate of each handshake from a TlsKeyPairProvider,
// parsing each distinct pair once. Thread-safe.
class ServingCertificateSelector {
 public:
  explicit ServingCertificateSelector(TlsKeyPairProvider provider)
      : provider_(std::move(provider)) {}

  // SSL_CTX_set_cert_cb callback: 1 when a certificate was set, 0 to fail the
  // handshake (only while no good pair has ever been supplied).
  static int OnHandshake(SSL* ssl, void* arg) {
    return static_cast<ServingCertificateSelector*>(arg)->Select(ssl);
  }

 private:
  struct Parsed {
    std::shared_ptr<const TlsKeyPair> source;
    X509Ptr leaf;
    X509StackPtr chain;
    PkeyPtr key;
  };

  int Select(SSL* ssl) {
    std::shared_ptr<const TlsKeyPair> offered = provider_ ? provider_() : nullptr;
    std::shared_ptr<const Parsed> use;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (offered != nullptr && (current_ == nullptr || offered != current_->source) &&
          offered != rejected_) {
        if (auto parsed = Parse(offered)) {
          current_ = std::move(parsed);
        } else {
          rejected_ = offered;  // not parsed again on every handshake
        }
      }
      use = current_;
    }
    if (use == nullptr) return 0;
    // Takes its own references to the certificate, key and chain.
    return SSL_use_cert_and_key(ssl, use->leaf.get(), use->key.get(), use->chain.get(), 1) == 1 ? 1
                                                                                                : 0;
  }

  static std::shared_ptr<const Parsed> Parse(const std::shared_ptr<const TlsKeyPair>& pair) {
    auto certs = ParseCertificates(pair->cert_chain_pem, "serving certificate");
    if (!certs.ok()) return nullptr;
    auto key = ParsePrivateKey(pair->key_pem);
    if (!key.ok()) return nullptr;
    if (X509_check_private_key(certs->front().get(), key->get()) != 1) {
      ERR_clear_error();
      return nullptr;
    }
    auto out = std::make_shared<Parsed>();
    out->source = pair;
    out->key = std::move(*key);
    out->chain.reset(sk_X509_new_null());
    if (out->chain == nullptr) return nullptr;
    for (size_t i = 1; i < certs->size(); ++i) {
      if (sk_X509_push(out->chain.get(), (*certs)[i].get()) > 0) {
        static_cast<void>((*certs)[i].release());  // the stack owns it
      }
    }
    out->leaf = std::move(certs->front());
    return out;
  }

  TlsKeyPairProvider provider_;
  std::mutex mu_;
  std::shared_ptr<const Parsed> current_;
  std::shared_ptr<const TlsKeyPair> rejected_;
};

// Forward secrecy and AEAD only for TLS 1.2; TLS 1.3 suites are all fine.
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

// The context every connection's SSL comes from. No ALPN callback is
// installed, so a client offering "h2" falls back to HTTP/1.1.
SslCtxPtr NewServerContext(ServingCertificateSelector* selector) {
  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  if (ctx == nullptr) return nullptr;
  if (SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION) != 1) return nullptr;
  if (SSL_CTX_set_cipher_list(ctx.get(), kTls12Ciphers) != 1) return nullptr;
  SSL_CTX_set_options(
      ctx.get(), SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  // Idle connections give their read and write buffers back; writes may
  // complete in parts and resume from a moved std::string.
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE |
                                  SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_sess_set_cache_size(ctx.get(), 1024);  // bounded memory for TLS 1.2 resumption
  SSL_CTX_set_cert_cb(ctx.get(), &ServingCertificateSelector::OnHandshake, selector);
  return ctx;
}

const char* ReasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 415:
      return "Unsupported Media Type";
    case 422:
      return "Unprocessable Entity";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Status";
  }
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string FormatResponse(const HttpResponse& response, bool keep_alive) {
  std::string out =
      "HTTP/1.1 " + std::to_string(response.status) + " " + ReasonPhrase(response.status) + "\r\n";
  bool has_type = false;
  for (const auto& [k, v] : response.headers) {
    if (EqualsIgnoreCase(k, "Content-Length") || EqualsIgnoreCase(k, "Connection")) continue;
    has_type = has_type || EqualsIgnoreCase(k, "Content-Type");
    out.append(k).append(": ").append(v).append("\r\n");
  }
  if (!has_type) out += "Content-Type: text/plain\r\n";
  out += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
  out += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  out += response.body;
  return out;
}

HttpResponse PlainResponse(int status, std::string text) {
  return HttpResponse{status, {}, std::move(text)};
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The head of a request, parsed: request line and headers.
struct Head {
  HttpRequest request;
  bool http10 = false;
  bool has_transfer_encoding = false;
  size_t content_length = 0;
  bool keep_alive = true;
};

// Parses "METHOD target HTTP/1.x\r\n(Name: value\r\n)*" (without the final
// blank line). Returns an error text for a 400 on malformed input.
std::string ParseHead(std::string_view text, Head& head) {
  size_t line_end = text.find("\r\n");
  std::string_view line = text.substr(0, line_end);
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) return "malformed request line";
  head.request.method = std::string(line.substr(0, sp1));
  head.request.path = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
  std::string_view version = line.substr(sp2 + 1);
  if (version == "HTTP/1.0") {
    head.http10 = true;
    head.keep_alive = false;
  } else if (version != "HTTP/1.1") {
    return "unsupported protocol version";
  }
  if (head.request.path.empty() || head.request.path.front() != '/') return "malformed target";
  bool has_length = false;
  size_t pos = line_end == std::string_view::npos ? text.size() : line_end + 2;
  while (pos < text.size()) {
    size_t end = text.find("\r\n", pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view header = text.substr(pos, end - pos);
    pos = end + 2;
    size_t colon = header.find(':');
    if (colon == std::string_view::npos || colon == 0) return "malformed header";
    std::string_view name = header.substr(0, colon);
    std::string_view value = Trim(header.substr(colon + 1));
    if (EqualsIgnoreCase(name, "Content-Length")) {
      if (value.empty() || value.size() > 15 ||
          !std::all_of(value.begin(), value.end(),
                       [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
        return "malformed Content-Length";
      }
      size_t length = std::stoull(std::string(value));
      if (has_length && length != head.content_length) return "conflicting Content-Length";
      has_length = true;
      head.content_length = length;
    } else if (EqualsIgnoreCase(name, "Transfer-Encoding")) {
      head.has_transfer_encoding = true;
    } else if (EqualsIgnoreCase(name, "Connection")) {
      if (EqualsIgnoreCase(value, "close")) head.keep_alive = false;
      if (EqualsIgnoreCase(value, "keep-alive")) head.keep_alive = true;
    } else if (EqualsIgnoreCase(name, "Content-Type")) {
      head.request.content_type = std::string(value);
    }
    head.request.headers.emplace(std::string(name), std::string(value));
  }
  return "";
}

enum class State {
  kHandshake,  // TLS handshake in progress
  kReading,    // reading a request (or waiting for the next one)
  kAtWorker,   // a handler has the request
  kWriting,    // writing a response
  kDraining,   // response written, closing: reading and dropping what the peer still sends
};

struct Connection {
  uint64_t id = 0;
  int fd = -1;
  SSL* ssl = nullptr;
  State state = State::kHandshake;
  uint32_t events = 0;  // the epoll interest registered
  bool registered = true;
  Steady::time_point deadline;
  Steady::time_point last_activity;
  bool awaiting_request = false;  // kept alive, no byte of the next request yet
  std::string in;                 // received, not yet part of a dispatched request
  std::optional<Head> head;       // set once the current request's head is complete
  size_t head_bytes = 0;
  std::string out;
  size_t out_done = 0;
  bool close_after_write = false;
  int requests = 0;
  size_t drained = 0;

  ~Connection() {
    if (ssl != nullptr) SSL_free(ssl);
    if (fd >= 0) close(fd);
  }
};

struct Job {
  uint64_t connection = 0;
  HttpHandler* handler = nullptr;
  HttpRequest request;
  bool keep_alive = true;
};

struct Completion {
  uint64_t connection = 0;
  std::string bytes;
  bool keep_alive = true;
};

constexpr uint64_t kListenerId = 0;
constexpr uint64_t kWakeId = 1;
// How long, and how much, a closing connection is read and dropped: enough
// for a client that writes a whole refused body before it reads the answer.
constexpr auto kDrainTime = std::chrono::seconds(2);
constexpr size_t kDrainBytes = 16u << 20;

class EventLoopHttpsServer final : public HttpServer {
 public:
  EventLoopHttpsServer(HttpsServerOptions options,
                       std::unique_ptr<ServingCertificateSelector> selector, SslCtxPtr ctx)
      : options_(std::move(options)), selector_(std::move(selector)), ctx_(std::move(ctx)) {}

  ~EventLoopHttpsServer() override {
    Stop();
    if (listen_fd_ >= 0) close(listen_fd_);
    if (wake_fd_ >= 0) close(wake_fd_);
    if (epoll_fd_ >= 0) close(epoll_fd_);
  }

  void Handle(const std::string& method, const std::string& path, HttpHandler handler) override {
    routes_[method + " " + path] = std::move(handler);
  }

  Status Bind() override {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    const std::string port = std::to_string(options_.port);
    if (getaddrinfo(options_.host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr) {
      return InvalidArgument("cannot resolve bind host \"" + options_.host + "\"");
    }
    std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> holder(found, &freeaddrinfo);
    listen_fd_ = socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) return Internal(std::string("socket: ") + std::strerror(errno));
    int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(listen_fd_, found->ai_addr, found->ai_addrlen) != 0 || listen(listen_fd_, 512) != 0) {
      return Unavailable("cannot listen on " + options_.host + ":" + port + ": " +
                         std::strerror(errno));
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
    port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                              : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (epoll_fd_ < 0 || wake_fd_ < 0) return Internal("cannot create the event loop");
    epoll_event listen_event{EPOLLIN, {.u64 = kListenerId}};
    epoll_event wake_event{EPOLLIN, {.u64 = kWakeId}};
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &listen_event) != 0 ||
        epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &wake_event) != 0) {
      return Internal("cannot register with the event loop");
    }
    return Status::Ok();
  }

  void Serve() override {
    std::vector<std::thread> workers;
    for (int i = 0; i < std::max(1, options_.worker_threads); ++i) {
      workers.emplace_back([this] { WorkerLoop(); });
    }
    Loop();
    {
      std::lock_guard<std::mutex> lock(jobs_mu_);
      workers_stop_ = true;
    }
    jobs_cv_.notify_all();
    for (auto& t : workers) t.join();
    connections_.clear();  // closes every socket
  }

  void Stop() override {
    stopping_.store(true);
    Wake();
  }

  int port() const override { return port_; }

 private:
  void Wake() const {
    if (wake_fd_ < 0) return;
    uint64_t one = 1;
    ssize_t n = write(wake_fd_, &one, sizeof one);
    (void)n;  // a full counter already wakes the loop
  }

  void Loop() {
    std::vector<epoll_event> events(256);
    while (!stopping_.load()) {
      Steady::time_point now = Steady::now();
      if (options_.heartbeat != nullptr) options_.heartbeat->Beat(now, true);
      int timeout_ms = 1000;
      for (const auto& [id, c] : connections_) {
        if (c->state == State::kAtWorker) continue;
        auto left = std::chrono::ceil<std::chrono::milliseconds>(c->deadline - now).count();
        timeout_ms = static_cast<int>(std::clamp<int64_t>(left, 0, timeout_ms));
      }
      if (accept_paused_until_ > now) timeout_ms = std::min(timeout_ms, 100);
      int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), timeout_ms);
      if (n < 0 && errno != EINTR) break;
      now = Steady::now();
      for (int i = 0; i < n; ++i) {
        uint64_t id = events[static_cast<size_t>(i)].data.u64;
        if (id == kListenerId) {
          Accept(now);
        } else if (id == kWakeId) {
          uint64_t count;
          while (read(wake_fd_, &count, sizeof count) > 0) {
          }
          Complete(now);
        } else {
          OnEvent(id, now);
        }
      }
      ExpireDeadlines(Steady::now());
      ResumeAccepting(now);
    }
  }

  // --- connections ------------------------------------------------------

  void Accept(Steady::time_point now) {
    for (int i = 0; i < 64; ++i) {
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // Out of descriptors: make room, or stop accepting for a moment
          // rather than spin on a listener that stays readable.
          if (!EvictOne()) PauseAccepting(now);
        }
        return;
      }
      if (static_cast<int>(connections_.size()) >= std::max(1, options_.max_connections) &&
          !EvictOne()) {
        close(fd);  // every connection is in a handler
        continue;
      }
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      auto c = std::make_unique<Connection>();
      c->id = next_id_++;
      c->fd = fd;
      c->ssl = SSL_new(ctx_.get());
      if (c->ssl == nullptr || SSL_set_fd(c->ssl, fd) != 1) {
        ERR_clear_error();
        continue;  // ~Connection closes fd
      }
      SSL_set_accept_state(c->ssl);
      c->deadline = now + options_.request_timeout;
      c->last_activity = now;
      c->events = EPOLLIN;
      epoll_event ev{EPOLLIN, {.u64 = c->id}};
      if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) continue;
      connections_.emplace(c->id, std::move(c));
    }
  }

  void PauseAccepting(Steady::time_point now) {
    if (accept_paused_until_ > now) return;
    accept_paused_until_ = now + std::chrono::milliseconds(100);
    epoll_event ev{0, {.u64 = kListenerId}};
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
  }

  void ResumeAccepting(Steady::time_point now) {
    if (accept_paused_until_ == Steady::time_point{} || accept_paused_until_ > now) return;
    accept_paused_until_ = {};
    epoll_event ev{EPOLLIN, {.u64 = kListenerId}};
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
  }

  // Closes the connection silent the longest among those not in a handler.
  bool EvictOne() {
    Connection* oldest = nullptr;
    for (const auto& [id, c] : connections_) {
      if (c->state == State::kAtWorker || c->state == State::kWriting) continue;
      if (oldest == nullptr || c->last_activity < oldest->last_activity) oldest = c.get();
    }
    if (oldest == nullptr) return false;
    connections_.erase(oldest->id);
    return true;
  }

  void ExpireDeadlines(Steady::time_point now) {
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (it->second->state != State::kAtWorker && it->second->deadline <= now) {
        it = connections_.erase(it);
      } else {
        ++it;
      }
    }
  }

  void SetInterest(Connection& c, uint32_t events) const {
    if (!c.registered || c.events == events) return;
    epoll_event ev{events, {.u64 = c.id}};
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
    c.events = events;
  }

  void OnEvent(uint64_t id, Steady::time_point now) {
    auto it = connections_.find(id);
    if (it == connections_.end()) return;
    Connection& c = *it->second;
    if (c.state == State::kAtWorker) {
      // Only a hang-up or an error reaches a connection in a handler (it has
      // no interest registered); stop watching it until the response is back.
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
      c.registered = false;
      return;
    }
    c.last_activity = now;
    if (!Advance(c, now)) connections_.erase(id);
  }

  // Makes what progress the socket allows. False when the connection must close.
  bool Advance(Connection& c, Steady::time_point now) {
    switch (c.state) {
      case State::kHandshake:
        return Handshake(c, now);
      case State::kReading:
        return Read(c, now);
      case State::kWriting:
        return Write(c, now);
      case State::kDraining:
        return Drain(c);
      case State::kAtWorker:
        return true;
    }
    return false;
  }

  // Waits for the socket as OpenSSL asked; false on a real error.
  bool Want(Connection& c, int ret) {
    int error = SSL_get_error(c.ssl, ret);
    ERR_clear_error();
    if (error == SSL_ERROR_WANT_READ) {
      SetInterest(c, EPOLLIN);
      return true;
    }
    if (error == SSL_ERROR_WANT_WRITE) {
      SetInterest(c, EPOLLOUT);
      return true;
    }
    return false;
  }

  bool Handshake(Connection& c, Steady::time_point now) {
    ERR_clear_error();
    int ret = SSL_do_handshake(c.ssl);
    if (ret != 1) return Want(c, ret);
    c.state = State::kReading;
    return Read(c, now);
  }

  bool Read(Connection& c, Steady::time_point now) {
    char buf[16384];
    while (true) {
      ERR_clear_error();
      int n = SSL_read(c.ssl, buf, sizeof buf);
      if (n <= 0) return Want(c, n);
      if (c.awaiting_request) {
        c.awaiting_request = false;
        c.deadline = now + options_.request_timeout;
      }
      c.in.append(buf, static_cast<size_t>(n));
      switch (Parse(c, now)) {
        case ParseResult::kNeedMore:
          break;
        case ParseResult::kTaken:
          return true;
        case ParseResult::kClose:
          return false;
      }
    }
  }

  enum class ParseResult { kNeedMore, kTaken, kClose };

  // Looks for a whole request in c.in; dispatches it, or answers an error.
  ParseResult Parse(Connection& c, Steady::time_point now) {
    if (!c.head) {
      size_t end = c.in.find("\r\n\r\n");
      size_t head_bytes = end == std::string::npos ? c.in.size() : end + 4;
      size_t scanned = end == std::string::npos ? c.in.size() : end;
      int lines = 0;
      for (size_t p = c.in.find("\r\n"); p != std::string::npos && p < scanned;
           p = c.in.find("\r\n", p + 2)) {
        ++lines;
      }
      // Every CRLF before the blank line ends the request line or a header.
      const int headers = end == std::string::npos ? lines - 1 : lines;
      if (head_bytes > options_.max_header_bytes || headers > options_.max_header_count) {
        return Answer(c, now, PlainResponse(431, "request headers too large\n"), false);
      }
      if (end == std::string::npos) return ParseResult::kNeedMore;
      Head head;
      const std::string_view received = c.in;
      std::string error = ParseHead(received.substr(0, end), head);
      if (!error.empty()) return Answer(c, now, PlainResponse(400, error + "\n"), false);
      if (head.has_transfer_encoding) {
        // Bodies of unknown length are refused before they are read.
        return Answer(c, now,
                      PlainResponse(411,
                                    "request bodies must have a Content-Length "
                                    "(chunked bodies are refused)\n"),
                      false);
      }
      if (head.content_length > options_.max_request_body_bytes) {
        return Answer(c, now, PlainResponse(413, "request body too large\n"), false);
      }
      c.head = std::move(head);
      c.head_bytes = end + 4;
    }
    const size_t total = c.head_bytes + c.head->content_length;
    if (c.in.size() < total) return ParseResult::kNeedMore;
    Head head = std::move(*c.head);
    c.head.reset();
    head.request.body = c.in.substr(c.head_bytes, head.content_length);
    c.in.erase(0, total);
    if (c.in.capacity() > options_.max_header_bytes) c.in.shrink_to_fit();  // after a big body
    ++c.requests;
    const bool keep_alive =
        head.keep_alive && c.requests < std::max(1, options_.keep_alive_max_requests);
    std::string target = head.request.path;
    auto route = routes_.find(head.request.method + " " + target.substr(0, target.find('?')));
    if (route == routes_.end()) {
      return Answer(c, now, PlainResponse(404, "not found\n"), keep_alive);
    }
    c.state = State::kAtWorker;
    SetInterest(c, 0);
    {
      std::lock_guard<std::mutex> lock(jobs_mu_);
      jobs_.push_back(Job{c.id, &route->second, std::move(head.request), keep_alive});
    }
    jobs_cv_.notify_one();
    return ParseResult::kTaken;
  }

  // Starts writing a response made by the loop itself.
  ParseResult Answer(Connection& c, Steady::time_point now, const HttpResponse& response,
                     bool keep_alive) {
    StartWrite(c, now, FormatResponse(response, keep_alive), keep_alive);
    return Write(c, now) ? ParseResult::kTaken : ParseResult::kClose;
  }

  void StartWrite(Connection& c, Steady::time_point now, std::string bytes, bool keep_alive) {
    c.state = State::kWriting;
    c.out = std::move(bytes);
    c.out_done = 0;
    c.close_after_write = !keep_alive;
    c.deadline = now + options_.write_timeout;
  }

  bool Write(Connection& c, Steady::time_point now) {
    while (c.out_done < c.out.size()) {
      ERR_clear_error();
      int n = SSL_write(c.ssl, c.out.data() + c.out_done,
                        static_cast<int>(std::min<size_t>(c.out.size() - c.out_done, 1u << 20)));
      if (n <= 0) return Want(c, n);
      c.out_done += static_cast<size_t>(n);
    }
    c.out.clear();
    c.out_done = 0;
    if (c.close_after_write) return StartDrain(c, now);
    c.state = State::kReading;
    c.awaiting_request = c.in.empty();
    c.deadline =
        now + (c.awaiting_request ? options_.keep_alive_timeout : options_.request_timeout);
    if (!c.in.empty()) {
      switch (Parse(c, now)) {
        case ParseResult::kNeedMore:
          break;
        case ParseResult::kTaken:
          return true;
        case ParseResult::kClose:
          return false;
      }
    }
    return Read(c, now);
  }

  // After a response that closes the connection: tell the peer, then read
  // and drop what it still sends for a moment, so that closing with unread
  // bytes does not reset the connection before the peer has read the answer.
  bool StartDrain(Connection& c, Steady::time_point now) {
    ERR_clear_error();
    SSL_shutdown(c.ssl);  // close_notify, best effort
    ERR_clear_error();
    shutdown(c.fd, SHUT_WR);
    c.state = State::kDraining;
    c.deadline = now + kDrainTime;
    SetInterest(c, EPOLLIN);
    return Drain(c);
  }

  bool Drain(Connection& c) {
    char buf[16384];
    while (true) {
      ssize_t n = recv(c.fd, buf, sizeof buf, 0);
      if (n > 0) {
        c.drained += static_cast<size_t>(n);
        if (c.drained > kDrainBytes) return false;
        continue;
      }
      return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
    }
  }

  // --- workers ----------------------------------------------------------

  void WorkerLoop() {
    while (true) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(jobs_mu_);
        jobs_cv_.wait(lock, [this] { return workers_stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // stopping
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      HttpResponse response;
      try {
        response = (*job.handler)(job.request);
      } catch (const std::exception& e) {
        response = PlainResponse(500, std::string("handler failed: ") + e.what() + "\n");
      }
      {
        std::lock_guard<std::mutex> lock(done_mu_);
        done_.push_back(
            Completion{job.connection, FormatResponse(response, job.keep_alive), job.keep_alive});
      }
      Wake();
    }
  }

  void Complete(Steady::time_point now) {
    std::vector<Completion> done;
    {
      std::lock_guard<std::mutex> lock(done_mu_);
      done.swap(done_);
    }
    for (Completion& d : done) {
      auto it = connections_.find(d.connection);
      if (it == connections_.end()) continue;
      Connection& c = *it->second;
      if (!c.registered) {  // the peer hung up while the handler ran
        connections_.erase(it);
        continue;
      }
      StartWrite(c, now, std::move(d.bytes), d.keep_alive);
      if (!Write(c, now)) connections_.erase(it);
    }
  }

  const HttpsServerOptions options_;
  std::unique_ptr<ServingCertificateSelector> selector_;  // the context calls into it
  SslCtxPtr ctx_;
  std::map<std::string, HttpHandler> routes_;  // "METHOD /path"; set before Serve()
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  // Event-loop thread only.
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> connections_;
  uint64_t next_id_ = 2;
  Steady::time_point accept_paused_until_;
  // Loop to workers, and back.
  std::mutex jobs_mu_;
  std::condition_variable jobs_cv_;
  std::deque<Job> jobs_;
  bool workers_stop_ = false;
  std::mutex done_mu_;
  std::vector<Completion> done_;
};

}  // namespace

Result<std::unique_ptr<HttpServer>> NewHttpsServer(const HttpsServerOptions& options) {
  if (!options.key_pair) return InvalidArgument("an HTTPS server needs a key pair provider");
  IgnoreSigpipeOnce();
  auto selector = std::make_unique<ServingCertificateSelector>(options.key_pair);
  SslCtxPtr ctx = NewServerContext(selector.get());
  if (ctx == nullptr) {
    ERR_clear_error();
    return Internal("cannot set up the TLS context of the HTTPS server");
  }
  return std::unique_ptr<HttpServer>(
      std::make_unique<EventLoopHttpsServer>(options, std::move(selector), std::move(ctx)));
}

}  // namespace allocguard::net
