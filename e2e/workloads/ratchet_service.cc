// ratchet_service: the demo workload of allocguard. An HTTP service whose
// requests each create worker threads that decode into large buffers and keep
// small results for a heavy-tailed while; see README.md for why its memory
// floor ratchets under glibc with a large node's arena limit and not under
// jemalloc, and for the knobs.

#include <pthread.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <thread>

#include "e2e/workloads/render_service.h"
#include "operator/net/http.h"

namespace {

using allocguard::workloads::PlanOptions;
using allocguard::workloads::RenderService;
using allocguard::workloads::RenderServiceOptions;

}  // namespace

// An exception that escapes is a bug: std::terminate aborts with its stack.
// NOLINTNEXTLINE(bugprone-exception-escape)
int main(int argc, char** argv) {
  CLI::App app{
      "ratchet_service: allocguard's demo workload (per-request worker threads, "
      "large buffers, long-lived small objects)"};
  allocguard::net::HttpServerOptions server_options;
  server_options.worker_threads = 64;
  RenderServiceOptions options;
  PlanOptions& plan = options.plan;
  app.add_option("--host", server_options.host, "address to bind")->capture_default_str();
  app.add_option("--port", server_options.port,
                 "port to bind; 0 picks a free one. The first stdout line is \"listening on PORT\"")
      ->capture_default_str();
  app.add_option("--http-threads", server_options.worker_threads,
                 "HTTP worker threads = most requests served at once")
      ->capture_default_str();
  app.add_flag("--leak", options.leak,
               "never free the long-lived objects: a genuine leak, the floor climbs under every "
               "allocator");
  app.add_option("--min-threads", plan.min_threads,
                 "smallest number of worker threads a request creates")
      ->capture_default_str();
  app.add_option("--max-threads", plan.max_threads, "cap on worker threads per request")
      ->capture_default_str();
  app.add_option("--burst-alpha", plan.burst_alpha,
                 "Pareto shape of threads per request; smaller = heavier-tailed bursts")
      ->capture_default_str();
  app.add_option("--min-steps", plan.min_steps, "fewest decode steps per worker")
      ->capture_default_str();
  app.add_option("--max-steps", plan.max_steps, "most decode steps per worker")
      ->capture_default_str();
  app.add_option("--temporaries", plan.temporaries_per_step, "small temporaries per step")
      ->capture_default_str();
  app.add_option("--pins-per-step", plan.pins_per_step, "long-lived objects per step")
      ->capture_default_str();
  app.add_option("--pin-min-bytes", plan.pin_min_bytes, "smallest long-lived object")
      ->capture_default_str();
  app.add_option("--pin-max-bytes", plan.pin_max_bytes, "largest long-lived object")
      ->capture_default_str();
  app.add_option("--pin-life-min-s", plan.pin_life_min_s,
                 "shortest lifetime of a long-lived object")
      ->capture_default_str();
  app.add_option("--pin-life-alpha", plan.pin_life_alpha,
                 "Pareto shape of lifetimes; smaller = heavier tail")
      ->capture_default_str();
  app.add_option("--pin-life-max-s", plan.pin_life_max_s, "longest lifetime")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (auto status = allocguard::workloads::ValidatePlanOptions(plan); !status.ok()) {
    std::cerr << "ratchet_service: " << status.message() << "\n";
    return 2;
  }
  if (server_options.worker_threads < 1) {
    std::cerr << "ratchet_service: --http-threads must be at least 1\n";
    return 2;
  }

  // SIGINT and SIGTERM are taken by one thread that stops the server; every
  // other thread inherits the blocked mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto server = allocguard::net::NewHttpServer(server_options);
  RenderService service(options, allocguard::RealClock::Get());
  service.Register(*server);
  if (auto status = server->Bind(); !status.ok()) {
    std::cerr << "ratchet_service: " << status.message() << "\n";
    return 1;
  }
  std::printf("listening on %d\n", server->port());
  std::fflush(stdout);

  std::thread stopper([&server, stop_signals] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    server->Stop();
  });
  stopper.detach();
  server->Serve();
  return 0;
}
