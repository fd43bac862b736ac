// Webhook starvation benchmark: can idle, slow or flooding clients delay the
// admission review of a normal one?
//
// A child process runs the production webhook server code path: the real
// NewHttpsServer with the operator's worker count and default limits, and the
// real AdmissionServer answering Pod CREATE reviews with the real pod
// injection (or a stand-in when operator/admission is not built; the output
// says which). The parent opens the attackers on loopback, keeps them open
// (an attacker whose connection the server closes opens a new one), and sends
// normal reviews one at a time, each on a fresh TLS connection as the API
// server does after an idle gap, with a 10 s deadline. The API server gives
// up after the webhook's timeoutSeconds (5 s) and, failurePolicy Ignore,
// admits the Pod uninjected: the ">5 s" column counts those.
//
// Scenarios: quiet; 64 idle TCP connections (no TLS handshake); 64 idle
// TLS-handshaken connections; 16 slow clients trickling one header byte a
// second; a header flood (200 000 headers on one connection, repeated); and
// 64 idle TCP + 16 tricklers + the flood at once. Server memory is the child's
// VmRSS before the attackers, at its peak during the scenario, and after they
// are gone.
//
// Usage: webhook_starvation_bench [--reviews N] [--workers N] [--scenario-seconds N]
//                                 [--only NAME]

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench/admission_review_fixture.h"
#include "operator/certs/x509.h"
#include "operator/net/http.h"
#include "operator/webhook/admission_server.h"

namespace allocguard::bench {
namespace {

using Steady = std::chrono::steady_clock;

constexpr char kPath[] = "/mutate-v1-pod";

double Ms(Steady::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

int64_t VmRssKb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

// Runs the server in this (child) process until the parent closes `control`.
[[noreturn]] void ServeInChild(int workers, const std::shared_ptr<net::TlsKeyPair>& pair,
                               int port_pipe, int control) {
  auto server =
      net::NewHttpsServer({.worker_threads = workers, .key_pair = [pair] { return pair; }});
  if (!server.ok()) {
    std::fprintf(stderr, "server: %s\n", server.status().ToString().c_str());
    _exit(1);
  }
  webhook::AdmissionServer admission(server->get());
  admission.Handle(kPath, kHaveInjection ? MakeInjectionHandler() : MakeEmptyHandler());
  if (!(*server)->Bind().ok()) _exit(1);
  int port = (*server)->port();
  if (write(port_pipe, &port, sizeof port) != sizeof port) _exit(1);
  std::thread serving([&] { (*server)->Serve(); });
  char c;
  while (read(control, &c, 1) > 0) {
  }
  (*server)->Stop();
  serving.join();
  _exit(0);
}

int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// True when the peer closed (or reset) fd; waits up to wait_ms for news.
bool PeerClosed(int fd, int wait_ms) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, wait_ms) <= 0) return false;
  char buf[4096];
  ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

void SleepWhile(const std::atomic<bool>& run, std::chrono::milliseconds d) {
  auto until = Steady::now() + d;
  while (run.load() && Steady::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

// One TLS client connection with blocking I/O bounded by socket timeouts.
struct TlsConn {
  SSL* ssl = nullptr;
  int fd = -1;
  ~TlsConn() {
    if (ssl != nullptr) SSL_free(ssl);
    if (fd >= 0) close(fd);
  }
};

bool TlsOpen(SSL_CTX* ctx, int port, TlsConn& c) {
  c.fd = Connect(port);
  if (c.fd < 0) return false;
  timeval tv{15, 0};
  setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(c.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  c.ssl = SSL_new(ctx);
  SSL_set_fd(c.ssl, c.fd);
  bool ok = SSL_connect(c.ssl) == 1;
  ERR_clear_error();
  return ok;
}

struct Attackers {
  std::atomic<bool> run{true};
  std::atomic<int64_t> connections{0};  // opened so far, reconnections included
  std::vector<std::thread> threads;
  ~Attackers() { StopAll(); }
  void StopAll() {
    run.store(false);
    for (auto& t : threads) t.join();
    threads.clear();
  }
};

// Holds `count` TCP connections that never send a byte.
void IdleTcp(Attackers& a, int port, int count) {
  a.threads.emplace_back([&a, port, count] {
    std::vector<int> fds(static_cast<size_t>(count), -1);
    while (a.run.load()) {
      for (int& fd : fds) {
        if (fd >= 0 && PeerClosed(fd, 0)) {
          close(fd);
          fd = -1;
        }
        if (fd < 0 && (fd = Connect(port)) >= 0) ++a.connections;
      }
      SleepWhile(a.run, std::chrono::milliseconds(100));
    }
    for (int fd : fds) {
      if (fd >= 0) close(fd);
    }
  });
}

// Holds `count` TLS connections that complete the handshake and then say nothing.
void IdleTls(Attackers& a, SSL_CTX* ctx, int port, int count) {
  for (int i = 0; i < count; ++i) {
    a.threads.emplace_back([&a, ctx, port] {
      while (a.run.load()) {
        TlsConn c;
        ++a.connections;
        if (TlsOpen(ctx, port, c)) {
          while (a.run.load() && !PeerClosed(c.fd, 100)) {
          }
        } else {
          SleepWhile(a.run, std::chrono::milliseconds(100));
        }
      }
    });
  }
}

// `count` clients that handshake, then send a request's headers one byte a second.
void Tricklers(Attackers& a, SSL_CTX* ctx, int port, int count) {
  for (int i = 0; i < count; ++i) {
    a.threads.emplace_back([&a, ctx, port] {
      const std::string head = "POST /mutate-v1-pod HTTP/1.1\r\nHost: localhost\r\nX-Slow: ";
      while (a.run.load()) {
        TlsConn c;
        ++a.connections;
        if (!TlsOpen(ctx, port, c)) {
          SleepWhile(a.run, std::chrono::milliseconds(100));
          continue;
        }
        size_t sent = 0;
        while (a.run.load()) {
          char byte = sent < head.size() ? head[sent] : 'a';
          if (SSL_write(c.ssl, &byte, 1) != 1) break;
          ++sent;
          if (PeerClosed(c.fd, 1000)) break;
        }
        ERR_clear_error();
      }
    });
  }
}

// One client that sends a request with 200 000 headers, reads the answer if
// any, and does it again on a new connection.
void HeaderFlood(Attackers& a, SSL_CTX* ctx, int port) {
  a.threads.emplace_back([&a, ctx, port] {
    std::string block;
    for (int i = 0; i < 1000; ++i) block += "X-Flood-" + std::to_string(i) + ": v\r\n";
    while (a.run.load()) {
      TlsConn c;
      ++a.connections;
      if (TlsOpen(ctx, port, c)) {
        std::string head = "POST /mutate-v1-pod HTTP/1.1\r\nHost: localhost\r\n";
        bool ok = SSL_write(c.ssl, head.data(), static_cast<int>(head.size())) > 0;
        for (int i = 0; ok && a.run.load() && i < 200; ++i) {
          ok = SSL_write(c.ssl, block.data(), static_cast<int>(block.size())) > 0;
        }
        if (ok) ok = SSL_write(c.ssl, "Content-Length: 0\r\n\r\n", 21) > 0;
        char buf[4096];
        while (ok && a.run.load() && SSL_read(c.ssl, buf, sizeof buf) > 0) {
        }
        ERR_clear_error();
      }
      SleepWhile(a.run, std::chrono::milliseconds(200));
    }
  });
}

struct Row {
  std::string name;
  int sent = 0, ok = 0, over5s = 0, failed = 0;
  double p50 = 0, p99 = 0, max = 0;
  int64_t rss_before = 0;
  int64_t rss_peak = 0;
  int64_t rss_after = 0;
  int64_t attacker_connections = 0;
};

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  return v[k];
}

Row RunScenario(const std::string& name, const std::function<void(Attackers&)>& open, pid_t server,
                const std::string& url, const std::string& ca_pem,
                const std::vector<std::string>& bodies, int reviews, double budget_s) {
  Row row;
  row.name = name;
  row.rss_before = VmRssKb(server);
  row.rss_peak = row.rss_before;
  std::vector<double> latencies;
  {
    Attackers attackers;
    open(attackers);
    std::atomic<bool> sampling{true};
    std::thread sampler([&] {
      while (sampling.load()) {
        row.rss_peak = std::max(row.rss_peak, VmRssKb(server));
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
    std::this_thread::sleep_for(std::chrono::seconds(2));  // attackers in place
    const auto scenario_end = Steady::now() + std::chrono::duration_cast<Steady::duration>(
                                                  std::chrono::duration<double>(budget_s));
    for (int i = 0; i < reviews && Steady::now() < scenario_end; ++i) {
      auto client = net::NewStreamingHttpClient({.base_url = url,
                                                 .tls = {.ca_pem = ca_pem},
                                                 .connect_timeout = std::chrono::seconds(10),
                                                 .read_timeout = std::chrono::seconds(10),
                                                 .write_timeout = std::chrono::seconds(10)});
      if (!client.ok()) std::abort();
      auto t0 = Steady::now();
      auto r = (*client)->Send({.method = "POST",
                                .path = kPath,
                                .body = bodies[static_cast<size_t>(i) % bodies.size()],
                                .content_type = "application/json"});
      double ms = Ms(Steady::now() - t0);
      ++row.sent;
      latencies.push_back(ms);
      if (r.ok() && r->status == 200) {
        ++row.ok;
      } else {
        ++row.failed;
      }
      if (ms > 5000) ++row.over5s;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    row.attacker_connections = attackers.connections.load();
    attackers.StopAll();
    sampling.store(false);
    sampler.join();
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  row.rss_after = VmRssKb(server);
  row.p50 = Quantile(latencies, 0.50);
  row.p99 = Quantile(latencies, 0.99);
  row.max = latencies.empty() ? 0 : *std::max_element(latencies.begin(), latencies.end());
  return row;
}

int Main(int argc, char** argv) {
  int reviews = 50;
  int workers = 4;  // WebhookServerOptions::worker_threads (operator/manager/webhook_server.h)
  double budget_s = 60;
  std::string only;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--reviews") {
      reviews = std::atoi(argv[i + 1]);
    } else if (flag == "--workers") {
      workers = std::atoi(argv[i + 1]);
    } else if (flag == "--scenario-seconds") {
      budget_s = std::atof(argv[i + 1]);
    } else if (flag == "--only") {
      only = argv[i + 1];
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  signal(SIGPIPE, SIG_IGN);
  const auto now = std::chrono::system_clock::now();
  auto ca =
      certs::GenerateCa("bench-ca", now - std::chrono::hours(1), now + std::chrono::hours(24));
  if (!ca.ok()) return 1;
  certs::ServingCertificateRequest request{"localhost",
                                           {"localhost"},
                                           {"127.0.0.1"},
                                           now - std::chrono::hours(1),
                                           now + std::chrono::hours(12)};
  auto serving = certs::IssueServingCertificate(request, ca->cert_pem, ca->key_pem);
  if (!serving.ok()) return 1;
  auto pair = std::make_shared<net::TlsKeyPair>();
  pair->cert_chain_pem = serving->cert_pem;
  pair->key_pem = serving->key_pem;

  int port_pipe[2];
  int control[2];
  if (pipe(port_pipe) != 0 || pipe(control) != 0) return 1;
  pid_t child = fork();
  if (child == 0) {
    close(port_pipe[0]);
    close(control[1]);
    ServeInChild(workers, pair, port_pipe[1], control[0]);
  }
  close(port_pipe[1]);
  close(control[0]);
  int port = 0;
  if (read(port_pipe[0], &port, sizeof port) != sizeof port) {
    std::fprintf(stderr, "the server did not start\n");
    return 1;
  }
  const std::string url = "https://127.0.0.1:" + std::to_string(port);
  std::vector<std::string> bodies;
  bodies.reserve(64);
  for (int i = 0; i < 64; ++i) bodies.push_back(PodCreateReview(i));
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);

  std::printf("webhook_starvation_bench: NewHttpsServer, %d workers, in a child process\n",
              workers);
  std::printf("handler: %s\n", kHaveInjection ? "real pod injection (3 policies)"
                                              : "STAND-IN: parse the review, return no patch");
  std::printf(
      "%d sequential Pod CREATE reviews per scenario (%zu bytes), each on a fresh TLS "
      "connection, 10 s deadline, at most %.0f s per scenario\n\n",
      reviews, bodies[0].size(), budget_s);
  std::printf("%-34s %5s %5s %6s %6s %9s %9s %9s %8s %8s %8s %7s\n", "scenario", "sent", "ok",
              "failed", ">5s", "p50 ms", "p99 ms", "max ms", "RSS0 MB", "peak MB", "after MB",
              "conns");
  struct Scenario {
    const char* name;
    std::function<void(Attackers&)> open;
  };
  std::vector<Scenario> scenarios = {
      {"quiet", [](Attackers&) {}},
      {"64 idle TCP", [&](Attackers& a) { IdleTcp(a, port, 64); }},
      {"64 idle TLS", [&](Attackers& a) { IdleTls(a, ctx, port, 64); }},
      {"16 slow tricklers (1 byte/s)", [&](Attackers& a) { Tricklers(a, ctx, port, 16); }},
      {"header flood (200k headers)", [&](Attackers& a) { HeaderFlood(a, ctx, port); }},
      {"64 idle TCP + 16 trickle + flood",
       [&](Attackers& a) {
         IdleTcp(a, port, 64);
         Tricklers(a, ctx, port, 16);
         HeaderFlood(a, ctx, port);
       }},
  };
  for (const Scenario& s : scenarios) {
    if (!only.empty() && only != s.name && std::string(s.name) != "quiet") continue;
    Row r = RunScenario(s.name, s.open, child, url, ca->cert_pem, bodies, reviews, budget_s);
    std::printf("%-34s %5d %5d %6d %6d %9.1f %9.1f %9.1f %8.1f %8.1f %8.1f %7ld\n", r.name.c_str(),
                r.sent, r.ok, r.failed, r.over5s, r.p50, r.p99, r.max, r.rss_before / 1024.0,
                r.rss_peak / 1024.0, r.rss_after / 1024.0, r.attacker_connections);
    std::fflush(stdout);
  }
  std::printf(
      "\n(failed: no 200 within the deadline; >5s: past the API server's webhook timeout, "
      "so the Pod is admitted uninjected; conns: attacker connections opened, reconnections "
      "included)\n");
  SSL_CTX_free(ctx);
  close(control[1]);
  auto stop_deadline = Steady::now() + std::chrono::seconds(15);
  int status = 0;
  while (waitpid(child, &status, WNOHANG) == 0) {
    if (Steady::now() > stop_deadline) {
      std::printf("the server did not stop within 15 s; killed\n");
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return 0;
}

}  // namespace
}  // namespace allocguard::bench

int main(int argc, char** argv) { return allocguard::bench::Main(argc, argv); }
