// A C++ process for allocators/tests/preload_test.py: containers, strings
// and exceptions from four threads, so a preloaded allocator serves
// libstdc++'s operator new and the program's exceptions still unwind (the
// tcmalloc build carries its own hidden copy of libstdc++). Exits 0 and
// prints "caught 80" when every thrown exception was caught.
#include <atomic>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

int main() {
  std::atomic<int> caught{0};
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&caught, t] {
      std::map<std::string, std::vector<int>> map;
      for (int i = 0; i < 20000; ++i) {
        map[std::to_string(i * t)].resize(i % 100);
        try {
          if (i % 1000 == 0) throw std::runtime_error(std::string(200, 'x'));
        } catch (const std::runtime_error& e) {
          if (e.what()[199] == 'x') ++caught;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  std::printf("caught %d\n", caught.load());
  return caught.load() == 80 ? 0 : 1;
}
