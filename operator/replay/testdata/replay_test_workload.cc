// A tiny HTTP workload for the replay engine's integration tests. It exists so
// the tests control exactly what the workload does:
//   --mode serve       answer /healthz and /work (200)
//   --mode exit        print a message to stderr and exit with --exit-code at once
//   --mode grow        like serve, but every /work keeps --grow-mib more memory
//                      (touched), so a cgroup limit is reached
// Usage: replay_test_workload --port N [--mode M] [--exit-code C] [--grow-mib N]

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "operator/net/http.h"

namespace {

std::unique_ptr<allocguard::net::HttpServer> g_server;

}  // namespace

int main(int argc, char** argv) {
  int port = 0, exit_code = 3, grow_mib = 16;
  std::string mode = "serve";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--port") port = std::atoi(argv[i + 1]);
    if (flag == "--mode") mode = argv[i + 1];
    if (flag == "--exit-code") exit_code = std::atoi(argv[i + 1]);
    if (flag == "--grow-mib") grow_mib = std::atoi(argv[i + 1]);
  }
  if (mode == "exit") {
    std::fprintf(stderr, "replay_test_workload: configuration missing, giving up\n");
    return exit_code;
  }
  std::mutex mu;
  std::vector<std::unique_ptr<char[]>> kept;
  g_server = allocguard::net::NewHttpServer({.port = port, .worker_threads = 4});
  g_server->Handle("GET", "/healthz", [](const allocguard::net::HttpRequest&) {
    return allocguard::net::HttpResponse{.status = 200, .body = "ok"};
  });
  g_server->Handle("GET", "/work", [&](const allocguard::net::HttpRequest&) {
    if (mode == "grow") {
      size_t n = static_cast<size_t>(grow_mib) << 20;
      auto block = std::make_unique<char[]>(n);
      std::memset(block.get(), 1, n);
      std::lock_guard<std::mutex> lock(mu);
      kept.push_back(std::move(block));
    }
    return allocguard::net::HttpResponse{.status = 200, .body = "done"};
  });
  if (!g_server->Bind().ok()) {
    std::fprintf(stderr, "cannot bind port %d\n", port);
    return 2;
  }
  std::signal(SIGTERM, [](int) { g_server->Stop(); });
  g_server->Serve();
  return 0;
}
