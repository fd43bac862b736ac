/* The stats agent (liballocguard_stats.so): preloaded beside the allocator,
 * it publishes the allocator's own books every interval into a
 * fixed-layout file per process (allocator_books.h; docs/allocator-books.md).
 *
 * Environment, read once at load:
 *   ALLOCGUARD_STATS_DIR          output directory; unset or empty: the agent stays off
 *   ALLOCGUARD_STATS_INTERVAL_MS  sample interval, 10 .. 3600000 (default 2000)
 *   ALLOCGUARD_STATS_FORK         "restart" (default): a forked child that
 *                                 lives a whole interval publishes its own file;
 *                                 "off": forked children publish nothing
 *
 * How it stays out of the program's way:
 * - The allocator is found at run time: the object that defines the malloc
 *   the program calls (dladdr), and the statistics API in that same object
 *   (dlsym): jemalloc's mallctl, mimalloc's mi_process_info, gperftools'
 *   MallocExtension_GetNumericProperty, glibc's mallinfo2 (mallinfo before
 *   2.33) and malloc_info. One build serves all four.
 * - Everything is allocated in the constructor (the thread, the FILE of
 *   malloc_info); the publishing loop allocates nothing: static buffers and
 *   a sample built on the stack, written with one pwrite into the file
 *   (created whole and renamed into place at the first sample).
 * - The publisher thread holds none of its own locks while it calls the
 *   allocator, so it cannot invert a lock order with the allocator's locks;
 *   all signals are blocked in it, so the program's handlers never run there.
 * - fork: the child has no publisher thread (fork copies one thread). The
 *   atfork child handler closes the parent's file (the child never writes
 *   to it), rebuilds the file names from the child's PID and,
 *   unless ALLOCGUARD_STATS_FORK=off, starts a publisher of its own whose
 *   first sample comes one interval later (a child that execs or exits
 *   before never writes). The parent's file is never named in the child.
 * - exit: a destructor stops the thread (waiting at most 2 s for it) and
 *   removes the process's file. A process killed by a signal leaves its
 *   file; the next process that loads the agent in the same directory
 *   removes the files of PIDs that no longer exist.
 * - exec: no destructor runs, and the PID stays. The new program's agent
 *   removes the file of its own PID at start (the old program's books).
 * - When it cannot start (no directory, not writable, no thread) it does
 *   nothing and prints nothing: the process runs as without it.
 *
 * Plain C: built with gcc against old glibc and with musl-gcc, no C++
 * runtime; needs libc, libpthread and libdl only. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "allocator_books.h"

#define AG_EXPORT __attribute__((visibility("default")))

/* glibc's structures, declared here: malloc.h of glibc < 2.33 has no
 * mallinfo2, and musl's has neither. */
struct ag_mallinfo2 {
  size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost;
};
struct ag_mallinfo {
  int arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost;
};

typedef struct ag_mallinfo2 (*mallinfo2_fn)(void);
typedef struct ag_mallinfo (*mallinfo_fn)(void);
typedef int (*malloc_info_fn)(int, FILE*);
typedef int (*mallctl_fn)(const char*, void*, size_t*, void*, size_t);
typedef void (*mi_process_info_fn)(size_t*, size_t*, size_t*, size_t*, size_t*, size_t*, size_t*,
                                   size_t*);
typedef int (*mi_version_fn)(void);
typedef int (*tc_property_fn)(const char*, size_t*);

static struct {
  char dir[4096];
  char path[4200];
  char tmp_path[4200];
  unsigned interval_ms;  /* requested */
  unsigned effective_ms; /* in force: interval_ms, or longer under the CPU budget */
  int fork_restart;
  enum ag_books_allocator allocator;
  char object[AG_BOOKS_OBJECT_CHARS];
  mallinfo2_fn mallinfo2;
  mallinfo_fn mallinfo;
  malloc_info_fn malloc_info;
  FILE* info_file;       /* fopencookie stream counting malloc_info's heaps */
  uint64_t arenas;       /* the last count; 0 before the first */
  int64_t arenas_due_ns; /* CLOCK_MONOTONIC time of the next count */
  mallctl_fn mallctl;
  mi_process_info_fn mi_process_info;
  mi_version_fn mi_version;
  tc_property_fn tc_property;

  pthread_mutex_t mutex;
  pthread_cond_t cond;
  pthread_t thread;
  int running;       /* a publisher thread exists in this process */
  int stop;          /* asks it to stop (under mutex) */
  int exited;        /* it has stopped (under mutex) */
  int published;     /* this process wrote its file */
  int fd;            /* the process's file, open after the first sample; -1 before */
  int initial_delay; /* first sample one interval after the start */
  uint64_t sequence;
} g;

/* ---- small helpers that allocate nothing ---- */

static size_t AppendString(char* dst, size_t at, size_t cap, const char* s) {
  while (*s != '\0' && at + 1 < cap) dst[at++] = *s++;
  dst[at < cap ? at : cap - 1] = '\0';
  return at;
}

static size_t AppendUnsigned(char* dst, size_t at, size_t cap, unsigned long v) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (n > 0 && at + 1 < cap) dst[at++] = digits[--n];
  dst[at < cap ? at : cap - 1] = '\0';
  return at;
}

static void BuildPaths(void) {
  unsigned long pid = (unsigned long)getpid();
  size_t n = AppendString(g.path, 0, sizeof g.path, g.dir);
  n = AppendString(g.path, n, sizeof g.path, "/" AG_BOOKS_FILE_PREFIX);
  AppendUnsigned(g.path, n, sizeof g.path, pid);
  n = AppendString(g.tmp_path, 0, sizeof g.tmp_path, g.dir);
  n = AppendString(g.tmp_path, n, sizeof g.tmp_path, "/." AG_BOOKS_FILE_PREFIX);
  n = AppendUnsigned(g.tmp_path, n, sizeof g.tmp_path, pid);
  AppendString(g.tmp_path, n, sizeof g.tmp_path, ".tmp");
}

static int64_t NowNs(clockid_t clock) {
  struct timespec ts;
  if (clock_gettime(clock, &ts) != 0) return 0;
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- glibc: malloc_info's heaps, counted from its XML as it streams ---- */

static const char kHeapTag[] = "<heap nr=";
static const int64_t kArenaRefreshNs = 30 * 1000000000LL;
/* The share of one core a sample may cost at the interval in force. */
static const double kCpuBudget = 0.0025;
static struct {
  uint64_t heaps;
  size_t matched; /* characters of kHeapTag matched at the end of the last chunk */
} g_info_count;
static char g_info_buffer[4096];

static ssize_t CountHeaps(void* cookie, const char* data, size_t size) {
  (void)cookie;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == kHeapTag[g_info_count.matched]) {
      if (++g_info_count.matched == sizeof kHeapTag - 1) {
        ++g_info_count.heaps;
        g_info_count.matched = 0;
      }
    } else {
      g_info_count.matched = data[i] == kHeapTag[0] ? 1 : 0;
    }
  }
  return (ssize_t)size;
}

static FILE* OpenHeapCounter(void) {
#if defined(__GLIBC__)
  cookie_io_functions_t io = {NULL, CountHeaps, NULL, NULL};
  FILE* f = fopencookie(NULL, "w", io);
  if (f != NULL && setvbuf(f, g_info_buffer, _IOFBF, sizeof g_info_buffer) != 0) {
    fclose(f);
    f = NULL;
  }
  return f;
#else
  (void)CountHeaps;
  (void)g_info_buffer;
  return NULL;
#endif
}

/* ---- which allocator serves malloc ---- */

/* The symbol NAME if the object at BASE (the one serving malloc) defines it. */
static void* SymbolIn(const void* base, const char* name) {
  void* s = dlsym(RTLD_DEFAULT, name);
  Dl_info info;
  if (s == NULL || dladdr(s, &info) == 0 || info.dli_fbase != base) return NULL;
  return s;
}

/* Stores the symbol NAME of the object at BASE into the function pointer at
 * DST (ISO C has no cast from dlsym's void* to a function pointer); 1 if
 * found. */
static int LoadSymbol(void* dst, size_t size, const void* base, const char* name) {
  void* s = SymbolIn(base, name);
  if (s == NULL || size != sizeof s) return 0;
  memcpy(dst, &s, sizeof s);
  return 1;
}

static void Detect(void) {
  Dl_info info;
  void* m = dlsym(RTLD_DEFAULT, "malloc");
  g.allocator = AG_BOOKS_ALLOCATOR_UNKNOWN;
  if (m == NULL || dladdr(m, &info) == 0) return;
  const char* name = info.dli_fname != NULL ? info.dli_fname : "";
  const char* slash = strrchr(name, '/');
  AppendString(g.object, 0, sizeof g.object, slash != NULL ? slash + 1 : name);
  const void* base = info.dli_fbase;
  if (LoadSymbol(&g.mallctl, sizeof g.mallctl, base, "mallctl")) {
    g.allocator = AG_BOOKS_ALLOCATOR_JEMALLOC;
  } else if (LoadSymbol(&g.mi_process_info, sizeof g.mi_process_info, base, "mi_process_info")) {
    LoadSymbol(&g.mi_version, sizeof g.mi_version, base, "mi_version");
    g.allocator = AG_BOOKS_ALLOCATOR_MIMALLOC;
  } else if (LoadSymbol(&g.tc_property, sizeof g.tc_property, base,
                        "MallocExtension_GetNumericProperty")) {
    g.allocator = AG_BOOKS_ALLOCATOR_TCMALLOC;
  } else if (LoadSymbol(&g.mallinfo2, sizeof g.mallinfo2, base, "mallinfo2") ||
             LoadSymbol(&g.mallinfo, sizeof g.mallinfo, base, "mallinfo")) {
    g.allocator = AG_BOOKS_ALLOCATOR_GLIBC;
    if (LoadSymbol(&g.malloc_info, sizeof g.malloc_info, base, "malloc_info")) {
      g.info_file = OpenHeapCounter();
    }
  }
}

/* ---- one sample ---- */

static void SampleGlibc(struct ag_books* b) {
  uint64_t* f = b->figures;
  uint64_t fordblks;
  uint64_t uordblks;
  if (g.mallinfo2 != NULL) {
    struct ag_mallinfo2 mi = g.mallinfo2();
    f[AG_BOOKS_GLIBC_ARENA_BYTES] = mi.arena;
    f[AG_BOOKS_GLIBC_MMAP_BYTES] = mi.hblkhd;
    f[AG_BOOKS_GLIBC_MMAP_CHUNKS] = mi.hblks;
    f[AG_BOOKS_GLIBC_FREE_CHUNKS] = mi.ordblks;
    f[AG_BOOKS_GLIBC_FASTBIN_BYTES] = mi.fsmblks;
    f[AG_BOOKS_GLIBC_TRIMMABLE_BYTES] = mi.keepcost;
    fordblks = mi.fordblks;
    uordblks = mi.uordblks;
  } else {
    /* int fields, each the true value modulo 2^32: read as unsigned. */
    struct ag_mallinfo mi = g.mallinfo();
    f[AG_BOOKS_GLIBC_ARENA_BYTES] = (unsigned)mi.arena;
    f[AG_BOOKS_GLIBC_MMAP_BYTES] = (unsigned)mi.hblkhd;
    f[AG_BOOKS_GLIBC_MMAP_CHUNKS] = (unsigned)mi.hblks;
    f[AG_BOOKS_GLIBC_FREE_CHUNKS] = (unsigned)mi.ordblks;
    f[AG_BOOKS_GLIBC_FASTBIN_BYTES] = (unsigned)mi.fsmblks;
    f[AG_BOOKS_GLIBC_TRIMMABLE_BYTES] = (unsigned)mi.keepcost;
    fordblks = (unsigned)mi.fordblks;
    uordblks = (unsigned)mi.uordblks;
    b->flags |= AG_BOOKS_FLAG_MALLINFO_INT;
  }
  b->in_use_bytes = uordblks + f[AG_BOOKS_GLIBC_MMAP_BYTES];
  b->retained_bytes = fordblks;
  b->held_bytes = f[AG_BOOKS_GLIBC_ARENA_BYTES] + f[AG_BOOKS_GLIBC_MMAP_BYTES];
  /* malloc_info walks every arena's free lists as mallinfo2 does, doubling
   * the cost of a sample; glibc never frees an arena, so the count only
   * grows and is refreshed at most every kArenaRefreshNs. */
  int64_t now = NowNs(CLOCK_MONOTONIC);
  if (g.info_file != NULL && (g.arenas == 0 || now >= g.arenas_due_ns)) {
    g_info_count.heaps = 0;
    g_info_count.matched = 0;
    if (g.malloc_info(0, g.info_file) == 0 && fflush(g.info_file) == 0) {
      g.arenas = g_info_count.heaps;
      g.arenas_due_ns = now + kArenaRefreshNs;
    }
    clearerr(g.info_file);
  }
  f[AG_BOOKS_GLIBC_ARENAS] = g.arenas;
  int counted = g.arenas > 0;
  if (!counted) b->flags |= AG_BOOKS_FLAG_NO_ARENA_COUNT;
}

static uint64_t JemallocValue(const char* name) {
  size_t value = 0;
  size_t size = sizeof value;
  if (g.mallctl(name, &value, &size, NULL, 0) != 0 || size != sizeof value) return 0;
  return value;
}

static void SampleJemalloc(struct ag_books* b) {
  uint64_t epoch = 1;
  size_t size = sizeof epoch;
  g.mallctl("epoch", &epoch, &size, &epoch, size); /* refreshes the stats.* figures */
  uint64_t* f = b->figures;
  f[AG_BOOKS_JEMALLOC_ALLOCATED] = JemallocValue("stats.allocated");
  f[AG_BOOKS_JEMALLOC_ACTIVE] = JemallocValue("stats.active");
  f[AG_BOOKS_JEMALLOC_RESIDENT] = JemallocValue("stats.resident");
  f[AG_BOOKS_JEMALLOC_RETAINED] = JemallocValue("stats.retained");
  f[AG_BOOKS_JEMALLOC_MAPPED] = JemallocValue("stats.mapped");
  f[AG_BOOKS_JEMALLOC_METADATA] = JemallocValue("stats.metadata");
  unsigned narenas = 0;
  size = sizeof narenas;
  if (g.mallctl("arenas.narenas", &narenas, &size, NULL, 0) == 0) {
    f[AG_BOOKS_JEMALLOC_ARENAS] = narenas;
  }
  uint64_t allocated = f[AG_BOOKS_JEMALLOC_ALLOCATED];
  uint64_t resident = f[AG_BOOKS_JEMALLOC_RESIDENT];
  b->in_use_bytes = allocated;
  b->retained_bytes = resident > allocated ? resident - allocated : 0;
  b->held_bytes = resident;
}

static void SampleMimalloc(struct ag_books* b) {
  size_t elapsed = 0;
  size_t user = 0;
  size_t sys = 0;
  size_t rss = 0;
  size_t peak_rss = 0;
  size_t commit = 0;
  size_t peak_commit = 0;
  size_t faults = 0;
  g.mi_process_info(&elapsed, &user, &sys, &rss, &peak_rss, &commit, &peak_commit, &faults);
  uint64_t* f = b->figures;
  f[AG_BOOKS_MIMALLOC_COMMIT] = commit;
  f[AG_BOOKS_MIMALLOC_PEAK_COMMIT] = peak_commit;
  f[AG_BOOKS_MIMALLOC_RSS] = rss;
  f[AG_BOOKS_MIMALLOC_PEAK_RSS] = peak_rss;
  f[AG_BOOKS_MIMALLOC_PAGE_FAULTS] = faults;
  if (g.mi_version != NULL) f[AG_BOOKS_MIMALLOC_VERSION] = (uint64_t)g.mi_version();
  /* Release builds keep no count of allocated bytes (MI_STAT=0): the public
   * API reports what mimalloc committed, not how much of it is in use. */
  b->flags |= AG_BOOKS_FLAG_NO_SPLIT;
  b->held_bytes = commit;
}

static uint64_t TcmallocValue(const char* name) {
  size_t value = 0;
  return g.tc_property(name, &value) ? value : 0;
}

static void SampleTcmalloc(struct ag_books* b) {
  uint64_t* f = b->figures;
  f[AG_BOOKS_TCMALLOC_ALLOCATED] = TcmallocValue("generic.current_allocated_bytes");
  f[AG_BOOKS_TCMALLOC_HEAP_SIZE] = TcmallocValue("generic.heap_size");
  f[AG_BOOKS_TCMALLOC_PAGEHEAP_FREE] = TcmallocValue("tcmalloc.pageheap_free_bytes");
  f[AG_BOOKS_TCMALLOC_PAGEHEAP_UNMAPPED] = TcmallocValue("tcmalloc.pageheap_unmapped_bytes");
  f[AG_BOOKS_TCMALLOC_CENTRAL_FREE] = TcmallocValue("tcmalloc.central_cache_free_bytes");
  f[AG_BOOKS_TCMALLOC_TRANSFER_FREE] = TcmallocValue("tcmalloc.transfer_cache_free_bytes");
  f[AG_BOOKS_TCMALLOC_THREAD_FREE] = TcmallocValue("tcmalloc.thread_cache_free_bytes");
  uint64_t allocated = f[AG_BOOKS_TCMALLOC_ALLOCATED];
  uint64_t heap = f[AG_BOOKS_TCMALLOC_HEAP_SIZE];
  b->in_use_bytes = allocated;
  b->retained_bytes = heap > allocated ? heap - allocated : 0;
  b->held_bytes = heap;
}

/* Writes the sample at offset 0 (with pwrite when IN_PLACE); 0 on success. */
static int WriteAll(int fd, const struct ag_books* b, int in_place) {
  const char* p = (const char*)b;
  size_t done = 0;
  while (done < sizeof *b) {
    ssize_t n = in_place ? pwrite(fd, p + done, sizeof *b - done, (off_t)done)
                         : write(fd, p + done, sizeof *b - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    done += (size_t)n;
  }
  return 0;
}

/* Takes a sample and writes it to the process's file; 0 on success. */
static int Publish(void) {
  struct ag_books b;
  memset(&b, 0, sizeof b);
  memcpy(b.magic, AG_BOOKS_MAGIC, sizeof b.magic);
  b.version = AG_BOOKS_VERSION;
  b.size = sizeof b;
  b.pid = (int32_t)getpid();
  b.allocator = (uint32_t)g.allocator;
  int64_t cpu_start = NowNs(CLOCK_THREAD_CPUTIME_ID);
  b.sequence = ++g.sequence;
  memcpy(b.allocator_object, g.object, sizeof b.allocator_object);
  switch (g.allocator) {
    case AG_BOOKS_ALLOCATOR_GLIBC:
      SampleGlibc(&b);
      break;
    case AG_BOOKS_ALLOCATOR_JEMALLOC:
      SampleJemalloc(&b);
      break;
    case AG_BOOKS_ALLOCATOR_MIMALLOC:
      SampleMimalloc(&b);
      break;
    case AG_BOOKS_ALLOCATOR_TCMALLOC:
      SampleTcmalloc(&b);
      break;
    default:
      b.flags |= AG_BOOKS_FLAG_NO_SPLIT;
  }
  b.sample_unix_ns = NowNs(CLOCK_REALTIME);
  b.agent_cpu_ns = (uint64_t)NowNs(CLOCK_THREAD_CPUTIME_ID);
  /* The CPU budget: a sample that cost more than kCpuBudget of a core at
   * the requested interval (glibc's walk of a heap of many free chunks)
   * stretches the interval until it does not. */
  uint64_t cost_ns = b.agent_cpu_ns - (uint64_t)cpu_start;
  uint64_t needed_ms = (uint64_t)((double)cost_ns / kCpuBudget / 1e6) + 1;
  g.effective_ms = needed_ms > g.interval_ms
                       ? (needed_ms > 3600000u ? 3600000u : (unsigned)needed_ms)
                       : g.interval_ms;
  if (g.effective_ms != g.interval_ms) b.flags |= AG_BOOKS_FLAG_THROTTLED;
  b.interval_ms = g.effective_ms;
  b.checksum = ag_books_checksum(&b);

  /* A file removed from outside (a cleanup of the directory) is made anew. */
  struct stat st;
  if (g.fd >= 0 && (fstat(g.fd, &st) != 0 || st.st_nlink == 0)) {
    close(g.fd);
    g.fd = -1;
  }
  if (g.fd >= 0) {
    /* In place: no new inode, no rename (which makes ext4 flush the file's
     * data to disk every interval); a reader that catches the write half
     * done sees a checksum mismatch and reads again. */
    return WriteAll(g.fd, &b, 1) == 0 ? 0 : -1;
  }
  /* The first sample: written whole under a temporary name and renamed, so
   * the file appears complete; its descriptor is kept for the next ones. */
  int fd = open(g.tmp_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return -1;
  if (WriteAll(fd, &b, 0) != 0 || rename(g.tmp_path, g.path) != 0) {
    close(fd);
    unlink(g.tmp_path);
    return -1;
  }
  g.fd = fd;
  g.published = 1;
  return 0;
}

/* ---- the publisher thread ---- */

static void DeadlineAfter(struct timespec* ts, unsigned ms) {
  clock_gettime(CLOCK_MONOTONIC, ts);
  ts->tv_sec += ms / 1000;
  ts->tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec += 1;
    ts->tv_nsec -= 1000000000L;
  }
}

/* Waits one interval or until asked to stop; 1 if asked to stop. */
static int WaitInterval(void) {
  struct timespec deadline;
  DeadlineAfter(&deadline, g.effective_ms);
  pthread_mutex_lock(&g.mutex);
  while (!g.stop) {
    if (pthread_cond_timedwait(&g.cond, &g.mutex, &deadline) == ETIMEDOUT) break;
  }
  int stop = g.stop;
  pthread_mutex_unlock(&g.mutex);
  return stop;
}

static void* PublisherMain(void* arg) {
  (void)arg;
  prctl(PR_SET_NAME, "ag-books", 0, 0, 0); /* /proc/PID/task/TID/comm */
  int failures = 0;
  if (!g.initial_delay || !WaitInterval()) {
    do {
      /* A directory that turns unwritable ends publishing after a few tries. */
      failures = Publish() == 0 ? 0 : failures + 1;
    } while (failures < 3 && !WaitInterval());
  }
  pthread_mutex_lock(&g.mutex);
  g.exited = 1;
  pthread_cond_broadcast(&g.cond);
  pthread_mutex_unlock(&g.mutex);
  return NULL;
}

static int InitSync(void) {
  pthread_condattr_t attr;
  if (pthread_condattr_init(&attr) != 0) return -1;
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  int rc = pthread_cond_init(&g.cond, &attr);
  pthread_condattr_destroy(&attr);
  if (rc != 0) return -1;
  return pthread_mutex_init(&g.mutex, NULL) == 0 ? 0 : -1;
}

/* Starts the publisher with every signal blocked in it; 0 on success. */
static int StartPublisher(void) {
  g.stop = 0;
  g.exited = 0;
  g.sequence = 0;
  g.published = 0;
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return -1;
  pthread_attr_setstacksize(&attr, (size_t)256 * 1024);
  sigset_t all;
  sigset_t old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&g.thread, &attr, PublisherMain, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  g.running = rc == 0;
  return rc == 0 ? 0 : -1;
}

/* ---- fork ---- */

static void BeforeFork(void) {
  if (g.running) pthread_mutex_lock(&g.mutex);
}

static void AfterForkParent(void) {
  if (g.running) pthread_mutex_unlock(&g.mutex);
}

static void AfterForkChild(void) {
  int had_publisher = g.running;
  /* The parent's file: the child never writes it. */
  if (g.fd >= 0) close(g.fd);
  g.fd = -1;
  g.running = 0;
  g.published = 0;
  if (!had_publisher) return;
  /* The parent's thread is not in the child; its lock was held by BeforeFork. */
  if (InitSync() != 0) return;
  BuildPaths();
  if (g.fork_restart) {
    g.initial_delay = 1;
    StartPublisher();
  }
}

/* ---- load and exit ---- */

/* The PID a books file of another process is named after ("books-<pid>" or
 * ".books-<pid>.tmp"); 0 for any other name. */
static long PidOfBooksName(const char* name) {
  const char* p = name;
  int tmp = *p == '.';
  if (tmp) ++p;
  size_t prefix = sizeof AG_BOOKS_FILE_PREFIX - 1;
  if (strncmp(p, AG_BOOKS_FILE_PREFIX, prefix) != 0) return 0;
  p += prefix;
  long pid = 0;
  int digits = 0;
  for (; *p >= '0' && *p <= '9' && digits < 10; ++p, ++digits) pid = pid * 10 + (*p - '0');
  if (digits == 0 || digits == 10) return 0;
  if (tmp ? strcmp(p, ".tmp") != 0 : *p != '\0') return 0;
  return pid;
}

/* Removes the files of processes that are gone: a process killed by a
 * signal (the OOM killer, SIGKILL) leaves its last sample behind, and a
 * container that restarts again and again would fill the directory with
 * them. Only a PID that no longer exists in this PID namespace (ESRCH) is
 * removed; the directory must be this namespace's alone (one per
 * container). The file of this process's own PID goes too: it is the last
 * sample of the program this process was before an exec (a shell that
 * execs its last command, an entrypoint's `exec app`), which ran no
 * destructor; this program's books replace it one interval later.
 * Runs in the constructor, where allocating is allowed. */
static void RemoveDeadFiles(void) {
  DIR* d = opendir(g.dir);
  if (d == NULL) return;
  const long self = (long)getpid();
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    long pid = PidOfBooksName(e->d_name);
    if (pid <= 0 || pid > 0x7fffffffL) continue;
    if (pid == self || (kill((pid_t)pid, 0) != 0 && errno == ESRCH)) {
      unlinkat(dirfd(d), e->d_name, 0);
    }
  }
  closedir(d);
}

static unsigned IntervalFromEnv(void) {
  const char* s = getenv("ALLOCGUARD_STATS_INTERVAL_MS");
  if (s == NULL || *s == '\0') return 2000;
  unsigned long v = 0;
  for (; *s != '\0'; ++s) {
    if (*s < '0' || *s > '9') return 2000;
    if (v <= 3600000ul) v = v * 10 + (unsigned long)(*s - '0'); /* saturates above 1 h */
  }
  return v < 10 ? 10 : v > 3600000ul ? 3600000u : (unsigned)v;
}

__attribute__((constructor)) static void AgentStart(void) {
  const char* dir = getenv("ALLOCGUARD_STATS_DIR");
  if (dir == NULL || *dir == '\0' || strlen(dir) >= sizeof g.dir) return;
  g.fd = -1;
  AppendString(g.dir, 0, sizeof g.dir, dir);
  g.interval_ms = IntervalFromEnv();
  g.effective_ms = g.interval_ms;
  const char* fork_mode = getenv("ALLOCGUARD_STATS_FORK");
  g.fork_restart = fork_mode == NULL || strcmp(fork_mode, "off") != 0;
  BuildPaths();
  /* The directory must take a file now; otherwise the agent stays off. */
  int fd = open(g.tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return;
  close(fd);
  unlink(g.tmp_path);
  RemoveDeadFiles();
  Detect();
  if (InitSync() != 0) return;
  if (pthread_atfork(BeforeFork, AfterForkParent, AfterForkChild) != 0) return;
  g.initial_delay = 1;
  StartPublisher();
}

__attribute__((destructor)) static void AgentStop(void) {
  if (!g.running) return;
  struct timespec deadline;
  DeadlineAfter(&deadline, 2000);
  pthread_mutex_lock(&g.mutex);
  g.stop = 1;
  pthread_cond_broadcast(&g.cond);
  while (!g.exited) {
    if (pthread_cond_timedwait(&g.cond, &g.mutex, &deadline) == ETIMEDOUT) break;
  }
  int exited = g.exited;
  pthread_mutex_unlock(&g.mutex);
  if (!exited) return; /* stuck in the allocator: leave it, the process is ending */
  pthread_join(g.thread, NULL);
  g.running = 0;
  if (g.fd >= 0) close(g.fd);
  g.fd = -1;
  if (g.published) unlink(g.path);
  unlink(g.tmp_path);
}

/* For tests and tools: 1 when this process has a running publisher. */
AG_EXPORT int allocguard_stats_running(void) { return g.running; }
