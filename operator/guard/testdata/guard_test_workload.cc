// A workload for the guard's integration tests and benchmark. Built without
// project libraries and without sanitizers, so tests can preload allocators
// into it (AddressSanitizer refuses another preloaded library) and link it
// statically.
//
//   guard_test_workload sleep            waits for SIGTERM
//   guard_test_workload grow STEP_MIB MS after a byte (or EOF) on stdin, keeps
//                                        STEP_MIB more touched memory every MS
//   guard_test_workload churn MIB        allocates and frees MIB of small
//                                        blocks in a loop (a busy workload)
// SIGTERM makes it exit with status 42 at once, so a test can tell a graceful
// stop from the OOM killer's SIGKILL.

#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  std::signal(SIGTERM, [](int) { _exit(42); });
  std::string mode = argc > 1 ? argv[1] : "sleep";
  // Tells a waiting test that main() runs (the loader is done).
  (void)write(1, "r", 1);
  if (mode == "grow" && argc > 3) {
    const size_t step = static_cast<size_t>(std::atoi(argv[2])) << 20;
    const int every_ms = std::atoi(argv[3]);
    char go;
    (void)read(0, &go, 1);
    std::vector<char*> kept;
    while (true) {
      char* block = static_cast<char*>(std::malloc(step));
      if (block == nullptr) return 3;
      std::memset(block, 1, step);
      kept.push_back(block);
      usleep(static_cast<useconds_t>(every_ms) * 1000);
    }
  }
  if (mode == "churn" && argc > 2) {
    const size_t total = static_cast<size_t>(std::atoi(argv[2])) << 20;
    std::vector<char*> blocks(total / 4096, nullptr);
    unsigned seed = 1;
    while (true) {
      for (size_t i = 0; i < blocks.size(); ++i) {
        seed = seed * 1103515245u + 12345u;
        size_t slot = seed % blocks.size();
        std::free(blocks[slot]);
        blocks[slot] = static_cast<char*>(std::malloc(64 + seed % 8000));
        if (blocks[slot] != nullptr) blocks[slot][0] = 1;
      }
    }
  }
  while (true) pause();
}
