/* The program the stats agent's tests and benchmark preload the agent into:
 * it allocates and frees in a pattern the test commands, so the test knows
 * the live bytes the allocator's books must show. Plain C (gcc or musl-gcc).
 *
 * Commands on stdin, one per line; each is answered with one line on stdout:
 *   alloc COUNT SIZE  allocate COUNT blocks of SIZE bytes and write to each
 *                     -> "live BYTES" (bytes requested and not freed)
 *   free              free every block but the last one allocated, which
 *                     pins the heap's top so glibc cannot trim what was
 *                     freed below it -> "live BYTES"
 *   thin              free every other block: many free chunks that cannot
 *                     coalesce (the costliest heap for glibc's statistics,
 *                     which walk the free lists) -> "live BYTES"
 *   fork MS           fork a child that allocates 1 MiB, lives MS ms and
 *                     exits normally -> "child PID"
 *   threads           -> "threads N" (entries of /proc/self/task)
 *   busy MS           run malloc/free churn for MS ms of wall time -> "done"
 *   exec MS           execs this program again (same PID, no destructor)
 *                     with ALLOCGUARD_STATS_INTERVAL_MS=MS -> "pid PID" of
 *                     the new program
 *   exit              exit(0) (destructors run)
 * "pid PID" is printed first. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

enum { kMaxBlocks = 1 << 20 };
static char* blocks[kMaxBlocks];
static size_t sizes[kMaxBlocks];
static size_t count;
static unsigned long long live;

static int CountThreads(void) {
  DIR* d = opendir("/proc/self/task");
  if (d == NULL) return -1;
  int n = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static double Now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  printf("pid %d\n", (int)getpid());
  char line[256];
  while (fgets(line, sizeof line, stdin) != NULL) {
    unsigned long a = 0;
    unsigned long b = 0;
    if (sscanf(line, "alloc %lu %lu", &a, &b) == 2) {
      for (unsigned long i = 0; i < a && count < kMaxBlocks; ++i) {
        char* p = malloc(b);
        if (p == NULL) {
          printf("error malloc(%lu) failed\n", b);
          return 1;
        }
        memset(p, 0x5a, b);
        blocks[count] = p;
        sizes[count++] = b;
        live += b;
      }
      printf("live %llu\n", live);
    } else if (strncmp(line, "free", 4) == 0) {
      for (size_t i = 0; i + 1 < count; ++i) {
        free(blocks[i]);
        live -= sizes[i];
      }
      if (count > 0) {
        blocks[0] = blocks[count - 1];
        sizes[0] = sizes[count - 1];
        count = 1;
      }
      printf("live %llu\n", live);
    } else if (strncmp(line, "thin", 4) == 0) {
      size_t kept = 0;
      for (size_t i = 0; i < count; ++i) {
        if (i % 2 == 0) {
          free(blocks[i]);
          live -= sizes[i];
        } else {
          blocks[kept] = blocks[i];
          sizes[kept++] = sizes[i];
        }
      }
      count = kept;
      printf("live %llu\n", live);
    } else if (sscanf(line, "fork %lu", &a) == 1) {
      fflush(stdout);
      pid_t child = fork();
      if (child == 0) {
        char* p = malloc(1 << 20);
        if (p != NULL) memset(p, 1, 1 << 20);
        usleep((useconds_t)(a * 1000));
        free(p);
        exit(0);
      }
      printf("child %d\n", (int)child);
    } else if (strncmp(line, "threads", 7) == 0) {
      printf("threads %d\n", CountThreads());
    } else if (sscanf(line, "busy %lu", &a) == 1) {
      double end = Now() + (double)a / 1000.0;
      void* slots[256] = {0};
      unsigned seed = 1;
      while (Now() < end) {
        for (int i = 0; i < 1000; ++i) {
          seed = seed * 1103515245u + 12345u;
          int s = (int)((seed >> 8) % 256);
          free(slots[s]);
          slots[s] = malloc(16 + (seed >> 12) % 4000);
        }
      }
      for (int i = 0; i < 256; ++i) free(slots[i]);
      printf("done\n");
    } else if (sscanf(line, "exec %lu", &a) == 1) {
      char ms[24];
      snprintf(ms, sizeof ms, "%lu", a);
      setenv("ALLOCGUARD_STATS_INTERVAL_MS", ms, 1);
      fflush(stdout);
      execl("/proc/self/exe", "books_workload", (char*)NULL);
      printf("error exec failed\n");
    } else if (strncmp(line, "exit", 4) == 0) {
      exit(0);
    } else {
      printf("error unknown command\n");
    }
  }
  return 0;
}
