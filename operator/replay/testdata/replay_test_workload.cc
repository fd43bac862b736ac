// A tiny HTTP workload for the replay engine's integration tests. It exists so
// the tests control exactly what the workload does:
//   --mode serve       answer /healthz and /work with 200, anything else 404
//   --mode exit        print a message to stderr and exit with --exit-code at once
//   --mode grow        like serve, but every /work keeps --grow-mib more memory
//                      (touched), so a cgroup limit is reached
// Usage: replay_test_workload --port N [--mode M] [--exit-code C] [--grow-mib N]
//
// It uses plain sockets and no project library on purpose: it is built without
// sanitizers even in the sanitizer build, because the tests preload jemalloc,
// mimalloc and tcmalloc into it, and AddressSanitizer refuses to run when
// another library is preloaded before its runtime.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

std::mutex g_mu;
std::vector<std::unique_ptr<char[]>> g_kept;

bool SendAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

void Serve(int fd, const std::string& mode, int grow_mib) {
  std::string buf;
  char chunk[4096];
  while (true) {
    size_t end;
    while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
      ssize_t n = recv(fd, chunk, sizeof chunk, 0);
      if (n <= 0) {
        close(fd);
        return;
      }
      buf.append(chunk, static_cast<size_t>(n));
    }
    std::string head = buf.substr(0, end);
    buf.erase(0, end + 4);  // the tests send no request bodies
    size_t sp1 = head.find(' ');
    size_t sp2 = head.find(' ', sp1 + 1);
    std::string target = head.substr(sp1 + 1, sp2 - sp1 - 1);
    std::string path = target.substr(0, target.find('?'));
    int status = 404;
    if (path == "/healthz") {
      status = 200;
    } else if (path == "/work") {
      status = 200;
      if (mode == "grow") {
        size_t n = static_cast<size_t>(grow_mib) << 20;
        auto block = std::make_unique<char[]>(n);
        std::memset(block.get(), 1, n);
        std::lock_guard<std::mutex> lock(g_mu);
        g_kept.push_back(std::move(block));
      }
    }
    std::string body = status == 200 ? "ok" : "not found";
    std::string response =
        "HTTP/1.1 " + std::to_string(status) + (status == 200 ? " OK" : " Not Found") +
        "\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) +
        "\r\n\r\n" + body;
    if (!SendAll(fd, response)) {
      close(fd);
      return;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int port = 0;
  int exit_code = 3;
  int grow_mib = 16;
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
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(listener, 128) != 0) {
    std::fprintf(stderr, "cannot listen on port %d\n", port);
    return 2;
  }
  std::signal(SIGTERM, [](int) { _exit(0); });
  while (true) {
    int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::thread(Serve, fd, mode, grow_mib).detach();
  }
}
