// Load driver benchmark: schedule accuracy at fixed rates and the highest rate
// the driver sustains, against a trivial in-process HTTP endpoint on loopback.
// Compare the maximum with `wrk` on the same endpoint (scripts/bench.sh does).
//
// Usage: load_driver_bench [--seconds N] [--workers N] [--serve-only]
// With --serve-only it prints "listening on PORT" and serves /ok until killed,
// so wrk can be pointed at the same server code.

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "operator/net/http.h"
#include "operator/replay/load_driver.h"

using allocguard::RealClock;
using allocguard::replay::Arrival;
using allocguard::replay::LoadDriver;
using allocguard::replay::LoadSpec;
using allocguard::replay::LoadStats;

namespace {

struct Row {
  double rate;
  LoadStats stats;
  double seconds;
};

Row Drive(const std::string& url, double rate, int workers, double seconds) {
  LoadSpec spec;
  spec.base_url = url;
  spec.rate = rate;
  spec.workers = workers;
  spec.arrival = Arrival::kUniform;
  spec.late_after = std::chrono::milliseconds(100);
  spec.requests = {{.name = "ok", .path = "/ok?k={key}", .key_space = 1000}};
  LoadDriver driver(
      spec, [&] { return allocguard::net::NewHttpClient({.base_url = url}); }, RealClock::Get(),
      nullptr);
  if (!driver.Start().ok()) std::exit(1);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  LoadStats s = driver.Snapshot();
  driver.Stop();
  return {rate, s, seconds};
}

void Print(const Row& r) {
  double late = r.stats.completed ? 100.0 * static_cast<double>(r.stats.late) /
                                        static_cast<double>(r.stats.completed)
                                  : 0;
  std::printf("%9.0f %10.0f %9.2f %9.2f %9.2f %8.1f%% %9.2f %9.2f\n", r.rate,
              static_cast<double>(r.stats.completed) / r.seconds, r.stats.start_delay_p50_ms,
              r.stats.start_delay_p99_ms, r.stats.start_delay_max_ms, late, r.stats.p50_ms,
              r.stats.p99_ms);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 5;
  int workers = 16;
  bool serve_only = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = std::atof(argv[++i]);
    if (!std::strcmp(argv[i], "--workers") && i + 1 < argc) workers = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--serve-only")) serve_only = true;
  }
  auto server = allocguard::net::NewHttpServer({.worker_threads = 16});
  server->Handle("GET", "/ok", [](const allocguard::net::HttpRequest&) {
    return allocguard::net::HttpResponse{.status = 200, .body = "ok"};
  });
  if (!server->Bind().ok()) return 1;
  if (serve_only) {
    std::printf("listening on %d\n", server->port());
    std::fflush(stdout);
    server->Serve();
    return 0;
  }
  std::thread serving([&] { server->Serve(); });
  std::string url = "http://127.0.0.1:" + std::to_string(server->port());

  std::printf(
      "load driver, %d workers, %.0f s per rate, uniform arrivals, late = start > 100 ms "
      "after schedule\n",
      workers, seconds);
  std::printf("%9s %10s %9s %9s %9s %9s %9s %9s\n", "rate/s", "done/s", "delay p50", "delay p99",
              "delay max", "late", "lat p50", "lat p99");
  auto sustained = [&](const Row& r) {
    return r.stats.late * 100 <= r.stats.completed && r.stats.in_flight <= workers;
  };
  // Double the rate from 100/s until the driver falls behind (over 1 % of
  // requests late, or a backlog), then bisect between the last two rates.
  double good = 0;
  double bad = 0;
  for (double rate = 100; rate <= 256000; rate *= 2) {
    Row r = Drive(url, rate, workers, seconds);
    Print(r);
    if (!sustained(r)) {
      bad = rate;
      break;
    }
    good = rate;
  }
  for (int i = 0; i < 3 && bad > 0; ++i) {
    double mid = (good + bad) / 2;
    Row r = Drive(url, mid, workers, seconds);
    Print(r);
    (sustained(r) ? good : bad) = mid;
  }
  std::printf("highest sustained rate (under 1%% late): %.0f requests/s\n", good);
  server->Stop();
  serving.join();
  return 0;
}
