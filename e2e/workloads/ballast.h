#pragma once

// Anonymous memory the demo service holds on request, for exercising the
// guard sidecar: GET /ballast?mib=N sets how much the process holds, and
// &rate=R (MiB per second) makes it grow there gradually, the way a workload
// creeps towards its memory limit, instead of at once.
//
// The memory is mapped directly (mmap of 1 MiB chunks, every page written)
// rather than taken from malloc, so the process's anonymous memory follows
// the target under every allocator and returns to the system the moment the
// target drops. Thread-safe.

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "operator/net/http.h"

namespace allocguard::workloads {

class Ballast {
 public:
  Ballast();
  // Unmaps everything and stops the growth thread.
  ~Ballast();
  Ballast(const Ballast&) = delete;
  Ballast& operator=(const Ballast&) = delete;

  // Sets the target in MiB. rate_mib_per_second <= 0: map or unmap at once
  // before returning; otherwise grow towards the target at that rate in the
  // background (shrinking is always at once).
  void SetTarget(uint64_t mib, double rate_mib_per_second);

  uint64_t held_mib() const;
  uint64_t target_mib() const;

  // GET /ballast?mib=N[&rate=R]: sets the target; answers the target and
  // what is held, as JSON. 400 for a missing or malformed mib or rate.
  net::HttpResponse Handle(const net::HttpRequest& request);

 private:
  void GrowLoop();
  // REQUIRES: mu_ held.
  void ShrinkToLocked(uint64_t mib);
  bool MapChunkLocked();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<void*> chunks_;  // 1 MiB each
  uint64_t target_mib_ = 0;
  double rate_ = 0;
  bool stopping_ = false;
  std::thread grower_;
};

}  // namespace allocguard::workloads
