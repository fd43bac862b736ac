// Admission webhook benchmark: an HTTPS AdmissionServer pinned to one core,
// driven by a fixed-rate open-loop client (pinned to another core) that sends
// realistic Pod CREATE AdmissionReviews over TLS on kept-alive connections.
// Prints latency quantiles, measured from each request's scheduled send time
// (so a stalled server shows as latency, not as a lower rate), and the
// throughput achieved.
//
// Usage: webhook_bench [--rates 200,500,1000] [--seconds N] [--connections N]
//                      [--server-cpu N] [--client-cpu N] [--handler injection|empty]
//        webhook_bench --listen PORT --ca-out FILE [--server-cpu N] [--handler ...]
//                      [--heap-return SECONDS]
//        (both forms that serve: [--slow-ms MS], default 5)
//        webhook_bench --url https://HOST:PORT --ca FILE [--rates ...] [--seconds N]
//        webhook_bench --dump-review FILE
//
// The handler is the real pod injection (admission::DecidePodInjection with
// three policies in the namespace, one selecting the pod) when the build has
// operator/admission; otherwise it parses the review and returns no patch,
// and the output says so.
//
// The other forms split the benchmark in two so the same client can drive
// another server (bench/peers/webhook_side_by_side.sh): --listen serves the
// handler alone (port 0 picks one; "listening on URL" goes to stdout, the CA
// to --ca-out) until SIGTERM or SIGINT, with --heap-return N calling the
// operator's manager::ReturnFreedHeap every N seconds as its ticker does; --url drives a server at
// URL, verified with the CA in --ca, and sends to /mutate-pods; --dump-review writes the first
// review the client sends.
//
// The server side logs every review whose parse + decision + encoding took
// --slow-ms or more (the operator's --webhook-slow-request log line) and, at
// the end, prints the slowest one and how many there were: a client-side
// maximum far above the server-side one was spent outside the handler (TLS,
// the server's queue, the scheduler).

#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/admission_review_fixture.h"
#include "operator/certs/x509.h"
#include "operator/manager/heap_return.h"
#include "operator/net/http.h"
#include "operator/webhook/admission_server.h"

namespace allocguard::bench {
namespace {

using Steady = std::chrono::steady_clock;

bool PinToCpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof set, &set) == 0;  // this thread; new threads inherit it
}

struct RunResult {
  double rate = 0;
  double seconds = 0;
  size_t sent = 0;
  size_t ok = 0;
  size_t errors = 0;
  size_t patched = 0;
  std::vector<double> latency_ms;  // from scheduled send time to full response
};

double Quantile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

RunResult Drive(const std::string& url, const std::string& ca_pem,
                const std::vector<std::string>& bodies, double rate, double seconds,
                int connections) {
  RunResult result;
  result.rate = rate;
  const auto total = static_cast<size_t>(rate * seconds);
  std::atomic<size_t> next{0};
  std::mutex mu;
  // Connect and warm every connection first (TLS handshakes are not measured).
  std::vector<std::unique_ptr<net::StreamingHttpClient>> clients;
  for (int c = 0; c < connections; ++c) {
    auto client = net::NewStreamingHttpClient(
        {.base_url = url, .tls = {.ca_pem = ca_pem}, .keep_alive = true});
    if (!client.ok()) {
      std::fprintf(stderr, "client: %s\n", client.status().ToString().c_str());
      std::exit(1);
    }
    (void)(*client)->Send({.path = "/healthz"});
    clients.push_back(std::move(*client));
  }
  const Steady::time_point start = Steady::now() + std::chrono::milliseconds(50);
  const auto interval = std::chrono::duration<double>(1.0 / rate);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(std::max(connections, 0)));
  for (int c = 0; c < connections; ++c) {
    threads.emplace_back([&, c] {
      std::vector<double> latencies;
      size_t ok = 0;
      size_t errors = 0;
      size_t patched = 0;
      while (true) {
        size_t i = next.fetch_add(1);
        if (i >= total) break;
        auto scheduled =
            start + std::chrono::duration_cast<Steady::duration>(interval * static_cast<double>(i));
        std::this_thread::sleep_until(scheduled);
        auto response = clients[static_cast<size_t>(c)]->Send({.method = "POST",
                                                               .path = "/mutate-pods",
                                                               .body = bodies[i % bodies.size()],
                                                               .content_type = "application/json"});
        auto done = Steady::now();
        latencies.push_back(std::chrono::duration<double, std::milli>(done - scheduled).count());
        if (response.ok() && response->status == 200) {
          ++ok;
          if (response->body.find("\"patchType\"") != std::string::npos) ++patched;
        } else {
          ++errors;
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      result.latency_ms.insert(result.latency_ms.end(), latencies.begin(), latencies.end());
      result.ok += ok;
      result.errors += errors;
      result.patched += patched;
    });
  }
  for (auto& t : threads) t.join();
  result.seconds = std::chrono::duration<double>(Steady::now() - start).count();
  result.sent = total;
  return result;
}

std::vector<double> ParseRates(const std::string& text) {
  std::vector<double> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::atof(item.c_str()));
  return out;
}

double ThreadCpuSeconds(const rusage& u) {
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  return static_cast<bool>(out.flush());
}

bool ReadFile(const std::string& path, std::string* text) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  *text = buffer.str();
  return static_cast<bool>(in);
}

// Blocks until SIGTERM or SIGINT; call before any thread starts so that
// every thread inherits the blocked mask.
int WaitForTermination(const sigset_t& signals) {
  int signal = 0;
  sigwait(&signals, &signal);
  return signal;
}

// The latency table for the rates, driving `url`; the last column is this
// process's CPU as a share of one core.
void PrintRates(const std::string& url, const std::string& ca_pem,
                const std::vector<std::string>& bodies, const std::vector<double>& rates,
                double seconds, int connections) {
  std::printf("%8s %10s %8s %8s %9s %9s %9s %9s %8s\n", "rate/s", "achieved/s", "ok", "errors",
              "p50 ms", "p90 ms", "p99 ms", "max ms", "cpu");
  for (double rate : rates) {
    rusage before{};
    rusage after{};
    getrusage(RUSAGE_SELF, &before);
    auto cpu_start = Steady::now();
    RunResult r = Drive(url, ca_pem, bodies, rate, seconds, connections);
    getrusage(RUSAGE_SELF, &after);
    double wall = std::chrono::duration<double>(Steady::now() - cpu_start).count();
    double cpu = (ThreadCpuSeconds(after) - ThreadCpuSeconds(before)) / wall;
    double p50 = Quantile(r.latency_ms, 0.50);
    double p90 = Quantile(r.latency_ms, 0.90);
    double p99 = Quantile(r.latency_ms, 0.99);
    double max =
        r.latency_ms.empty() ? 0 : *std::max_element(r.latency_ms.begin(), r.latency_ms.end());
    std::printf("%8.0f %10.1f %8zu %8zu %9.2f %9.2f %9.2f %9.2f %7.0f%%\n", rate,
                static_cast<double>(r.ok) / r.seconds, r.ok, r.errors, p50, p90, p99, max,
                cpu * 100);
    std::fflush(stdout);
  }
}

int Main(int argc, char** argv) {
  std::vector<double> rates = {200, 500, 1000, 2000};
  double seconds = 10;
  int connections = 16;
  int server_cpu = 0;
  int client_cpu = 1;
  std::string handler = "injection";  // or "empty"
  std::string listen;                 // --listen PORT: serve only
  std::string ca_out;
  std::string target_url;  // --url: drive that server instead of one of our own
  std::string ca_file;
  std::string dump_review;
  double heap_return_seconds = 0;  // --heap-return N (with --listen): 0 is never
  double slow_ms = 5;              // --slow-ms: the server's slow-request threshold
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--rates") {
      rates = ParseRates(argv[i + 1]);
    } else if (flag == "--seconds") {
      seconds = std::atof(argv[i + 1]);
    } else if (flag == "--connections") {
      connections = std::atoi(argv[i + 1]);
    } else if (flag == "--server-cpu") {
      server_cpu = std::atoi(argv[i + 1]);
    } else if (flag == "--client-cpu") {
      client_cpu = std::atoi(argv[i + 1]);
    } else if (flag == "--handler") {
      handler = argv[i + 1];
    } else if (flag == "--listen") {
      listen = argv[i + 1];
    } else if (flag == "--ca-out") {
      ca_out = argv[i + 1];
    } else if (flag == "--url") {
      target_url = argv[i + 1];
    } else if (flag == "--ca") {
      ca_file = argv[i + 1];
    } else if (flag == "--dump-review") {
      dump_review = argv[i + 1];
    } else if (flag == "--heap-return") {
      heap_return_seconds = std::atof(argv[i + 1]);
    } else if (flag == "--slow-ms") {
      slow_ms = std::atof(argv[i + 1]);
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }

  std::vector<std::string> bodies;
  bodies.reserve(512);
  for (int i = 0; i < 512; ++i) bodies.push_back(PodCreateReview(i));
  if (!dump_review.empty()) return WriteFile(dump_review, bodies[0]) ? 0 : 1;

  if (!target_url.empty()) {
    std::string ca_pem;
    if (!ReadFile(ca_file, &ca_pem)) {
      std::fprintf(stderr, "--ca %s: cannot read it\n", ca_file.c_str());
      return 2;
    }
    if (!PinToCpu(client_cpu)) std::fprintf(stderr, "warning: cannot pin to CPU %d\n", client_cpu);
    std::printf("webhook_bench: client pinned to CPU %d driving %s/mutate-pods\n", client_cpu,
                target_url.c_str());
    std::printf("review: Pod CREATE, %zu bytes\n", bodies[0].size());
    std::printf(
        "TLS keep-alive, %d connections, open loop, %.0f s per rate; latency from "
        "the scheduled send time\n\n",
        connections, seconds);
    PrintRates(target_url, ca_pem, bodies, rates, seconds, connections);
    std::printf("(cpu = this client's CPU as a share of one core)\n");
    return 0;
  }

  // --listen waits for these; blocked before any thread exists, so that
  // every thread inherits the mask and sigwait alone receives them.
  sigset_t termination;
  sigemptyset(&termination);
  sigaddset(&termination, SIGTERM);
  sigaddset(&termination, SIGINT);
  if (!listen.empty()) pthread_sigmask(SIG_BLOCK, &termination, nullptr);

  const auto now = std::chrono::system_clock::now();
  auto ca =
      certs::GenerateCa("bench-ca", now - std::chrono::hours(1), now + std::chrono::hours(24));
  certs::ServingCertificateRequest request{"localhost",
                                           {"localhost"},
                                           {"127.0.0.1"},
                                           now - std::chrono::hours(1),
                                           now + std::chrono::hours(12)};
  auto serving = certs::IssueServingCertificate(request, ca->cert_pem, ca->key_pem);
  if (!ca.ok() || !serving.ok()) {
    std::fprintf(stderr, "certificates: %s\n", serving.status().ToString().c_str());
    return 1;
  }
  auto pair = std::make_shared<net::TlsKeyPair>();
  pair->cert_chain_pem = serving->cert_pem;
  pair->key_pem = serving->key_pem;

  // The server, its worker threads included, runs on server_cpu only: its
  // threads are created by the serving thread and inherit its affinity.
  if (!PinToCpu(server_cpu)) std::fprintf(stderr, "warning: cannot pin to CPU %d\n", server_cpu);
  net::HttpsServerOptions server_options{.worker_threads = connections + 2,
                                         .key_pair = [pair] { return pair; }};
  if (!listen.empty()) server_options.port = std::atoi(listen.c_str());
  auto server = net::NewHttpsServer(server_options);
  if (!server.ok()) return 1;
  webhook::AdmissionServer admission(server->get());
  admission.set_slow_request_threshold(std::chrono::duration_cast<Clock::Duration>(
      std::chrono::duration<double, std::milli>(slow_ms)));
  // Every slow review is logged here, not the operator's 10 at once and then
  // one a second: the benchmark studies each one.
  admission.set_slow_log_limit(0, {});
  auto print_server_side = [&admission, slow_ms] {
    auto m = admission.Metrics().paths["/mutate-pods"];
    std::printf(
        "\nserver-side handler time (parse + decide + encode): mean %.1f us, max %.2f ms over "
        "%llu reviews; %llu at or above %.1f ms (each logged above)\n",
        m.requests ? m.latency_seconds_sum / static_cast<double>(m.requests) * 1e6 : 0.0,
        m.latency_seconds_max * 1e3, static_cast<unsigned long long>(m.requests),
        static_cast<unsigned long long>(m.slow), slow_ms);
  };
  const bool real = handler == "injection" && kHaveInjection;
  admission.Handle("/mutate-pods", real ? MakeInjectionHandler() : MakeEmptyHandler());
  if (!(*server)->Bind().ok()) return 1;
  std::thread serving_thread([&] { (*server)->Serve(); });
  const std::string url = "https://127.0.0.1:" + std::to_string((*server)->port());

  if (!listen.empty()) {
    if (!ca_out.empty() && !WriteFile(ca_out, ca->cert_pem)) return 1;
    std::printf("listening on %s/mutate-pods (%s), pinned to CPU %d\n", url.c_str(),
                real ? "real pod injection" : "STAND-IN handler", server_cpu);
    std::fflush(stdout);
    // The operator's heap ticker, on the server's CPU like the rest of it.
    std::atomic<bool> stopping{false};
    std::thread heap_thread;
    if (heap_return_seconds > 0) {
      heap_thread = std::thread([&] {
        auto next = Steady::now();
        while (!stopping.load()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          if (Steady::now() < next) continue;
          manager::ReturnFreedHeap();
          next = Steady::now() + std::chrono::duration_cast<Steady::duration>(
                                     std::chrono::duration<double>(heap_return_seconds));
        }
      });
    }
    WaitForTermination(termination);
    stopping.store(true);
    if (heap_thread.joinable()) heap_thread.join();
    (*server)->Stop();
    serving_thread.join();
    print_server_side();
    return 0;
  }

  if (!PinToCpu(client_cpu)) std::fprintf(stderr, "warning: cannot pin to CPU %d\n", client_cpu);
  // What one review costs the handler alone, for reference.
  auto probe = admission.Review("/mutate-pods", bodies[0]);
  const bool patches = probe.body.find("\"patchType\"") != std::string::npos;

  // In-process costs without TLS or sockets, on the client's CPU.
  auto per_call_us = [&](const std::function<void(size_t)>& call) {
    constexpr size_t kCalls = 2000;
    auto t0 = Steady::now();
    for (size_t i = 0; i < kCalls; ++i) call(i);
    return std::chrono::duration<double, std::micro>(Steady::now() - t0).count() / kCalls;
  };
  const double parse_us = per_call_us([&](size_t i) {
    auto parsed = webhook::ParseAdmissionReview(bodies[i % bodies.size()]);
    if (!parsed.ok()) std::abort();
  });
  const double review_us = per_call_us(
      [&](size_t i) { (void)admission.Review("/mutate-pods", bodies[i % bodies.size()]); });

  std::printf("webhook_bench: HTTPS AdmissionServer pinned to CPU %d, client pinned to CPU %d\n",
              server_cpu, client_cpu);
  std::printf("handler: %s\n",
              real ? "real pod injection (admission::DecidePodInjection, 3 policies)"
              : handler == "empty"
                  ? "STAND-IN (--handler empty): parse the review, return no patch"
                  : "STAND-IN: parse the review, return no patch (operator/admission not built)");
  std::printf("review: Pod CREATE, %zu bytes; response: %zu bytes, %s\n", bodies[0].size(),
              probe.body.size(), patches ? "with a JSON Patch" : "no patch");
  std::printf("in process, no TLS: parse %.0f us, parse + handler + encode %.0f us per review\n",
              parse_us, review_us);
  std::printf(
      "TLS 1.3 keep-alive, %d connections, open loop, %.0f s per rate; latency from "
      "the scheduled send time\n\n",
      connections, seconds);
  PrintRates(url, ca->cert_pem, bodies, rates, seconds, connections);
  print_server_side();
  std::printf("(cpu = CPU of the whole process, server and client, as a share of one core)\n");
  (*server)->Stop();
  serving_thread.join();
  return 0;
}

}  // namespace
}  // namespace allocguard::bench

int main(int argc, char** argv) { return allocguard::bench::Main(argc, argv); }
