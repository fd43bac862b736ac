#pragma once

// The operator's own heap: which allocator serves its malloc, and giving the
// pages it holds free back to the kernel. The chart preloads jemalloc into
// the operator (operator.malloc; docs/operator.md, "The operator's own
// allocator"); without a preload the process runs on glibc malloc.

namespace allocguard::manager {

enum class HeapAllocator { kGlibc, kJemalloc, kMimalloc };

// Found by the entry points a preloaded allocator exports (mi_collect,
// mallctl); glibc when there are none.
HeapAllocator RunningHeapAllocator();
const char* HeapAllocatorName(HeapAllocator allocator);

// Gives the free pages the allocator keeps back to the kernel: a purge of
// every arena under jemalloc, malloc_trim(0) under glibc. A reconcile over a
// namespace's 10 000 Deployments or Pods, a list page or a burst of watch
// events leaves tens of MiB free in the heap; glibc returns an arena's memory
// only from its top, and jemalloc keeps freed pages for about ten seconds
// by its decay policy (docs/benchmarks.md, "Packed caches"). Under mimalloc
// it calls mi_collect(true), which in mimalloc 2.0 reaches only the calling
// thread's heap: measured, it returned nothing.
void ReturnFreedHeap();

}  // namespace allocguard::manager
