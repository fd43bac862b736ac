/* A process for allocators/tests/preload_test.py: allocates through every
 * entry point an allocator replaces, from two threads, and tells which
 * loaded object serves malloc, so the test sees the preloaded allocator in
 * use, not merely mapped. It then waits until its stdin closes, so the test
 * can read /proc/PID/maps while it runs.
 *
 * Output: "malloc-from <object path>" and "ready", one line each.
 * Plain C (no C++): it is built with gcc for glibc and musl-gcc for musl. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int Churn(unsigned seed) {
  enum { kSlots = 512 };
  void* slots[kSlots] = {0};
  for (int i = 0; i < 20000; ++i) {
    seed = seed * 1103515245u + 12345u;
    int slot = (int)((seed >> 8) % kSlots);
    size_t size = 1 + (seed >> 12) % 9000;
    free(slots[slot]);
    switch (i % 4) {
      case 0:
        slots[slot] = malloc(size);
        break;
      case 1:
        slots[slot] = calloc(1, size);
        break;
      case 2:
        slots[slot] = realloc(malloc(16), size);
        break;
      default:
        if (posix_memalign(&slots[slot], 64, size) != 0) slots[slot] = NULL;
        if (slots[slot] != NULL && ((uintptr_t)slots[slot] % 64) != 0) return 1;
    }
    if (slots[slot] == NULL) return 1;
    memset(slots[slot], 0xa5, size);
  }
  for (int i = 0; i < kSlots; ++i) free(slots[i]);
  return 0;
}

static void* ChurnThread(void* arg) { return (void*)(intptr_t)Churn((unsigned)(intptr_t)arg); }

int main(void) {
  pthread_t thread;
  if (pthread_create(&thread, NULL, ChurnThread, (void*)(intptr_t)7) != 0) {
    fprintf(stderr, "malloc_probe: pthread_create failed\n");
    return 1;
  }
  int failed = Churn(3);
  void* thread_failed = NULL;
  pthread_join(thread, &thread_failed);
  if (failed || thread_failed != NULL) {
    fprintf(stderr, "malloc_probe: an allocation failed or was misaligned\n");
    return 1;
  }

  Dl_info info;
  void* malloc_address = dlsym(RTLD_DEFAULT, "malloc");
  if (malloc_address == NULL || dladdr(malloc_address, &info) == 0) {
    fprintf(stderr, "malloc_probe: cannot resolve malloc\n");
    return 1;
  }
  printf("malloc-from %s\nready\n", info.dli_fname);
  fflush(stdout);

  char buffer[64];
  while (fgets(buffer, sizeof buffer, stdin) != NULL) {
  }
  return 0;
}
