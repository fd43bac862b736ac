#include "operator/manager/heap_return.h"

#include <dlfcn.h>
#include <malloc.h>

#include <cstddef>

namespace allocguard::manager {
namespace {

using MiCollect = void (*)(bool force);
using Mallctl = int (*)(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen);

// Looked up once: a preloaded allocator is in place before main() runs.
struct Entries {
  MiCollect mi_collect = nullptr;
  Mallctl mallctl = nullptr;
};

const Entries& Found() {
  static const Entries entries = [] {
    Entries e;
    // NOLINTBEGIN(cppcoreguidelines-pro-type-reinterpret-cast): dlsym's
    // result is the function's address, cast to its declared type.
    e.mi_collect = reinterpret_cast<MiCollect>(dlsym(RTLD_DEFAULT, "mi_collect"));
    e.mallctl = reinterpret_cast<Mallctl>(dlsym(RTLD_DEFAULT, "mallctl"));
    // NOLINTEND(cppcoreguidelines-pro-type-reinterpret-cast)
    return e;
  }();
  return entries;
}

}  // namespace

HeapAllocator RunningHeapAllocator() {
  if (Found().mi_collect != nullptr) return HeapAllocator::kMimalloc;
  if (Found().mallctl != nullptr) return HeapAllocator::kJemalloc;
  return HeapAllocator::kGlibc;
}

const char* HeapAllocatorName(HeapAllocator allocator) {
  switch (allocator) {
    case HeapAllocator::kJemalloc:
      return "jemalloc";
    case HeapAllocator::kMimalloc:
      return "mimalloc";
    case HeapAllocator::kGlibc:
      break;
  }
  return "glibc";
}

void ReturnFreedHeap() {
  const Entries& e = Found();
  if (e.mi_collect != nullptr) {
    e.mi_collect(true);
  } else if (e.mallctl != nullptr) {
    // MALLCTL_ARENAS_ALL (4096): every arena.
    e.mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0);
  } else {
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
  }
}

}  // namespace allocguard::manager
