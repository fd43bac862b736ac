/* Force-included (gcc -include) into every glibc build of
 * allocators/build-in-chroot.sh.
 *
 * glibc 2.29 gave exp, log, pow, exp2 and log2 new default symbol versions
 * (faster implementations without the old SVID error handling); a library
 * that calls them and is linked against glibc >= 2.29 therefore requires
 * GLIBC_2.29 and refuses to load on older systems (RHEL 8, Debian 10,
 * Amazon Linux 2) although nothing else in it needs a newer glibc. The
 * allocators call them only for heap-profile sampling and its statistics,
 * where the original versions (still exported by every glibc, at most a
 * last-bit rounding apart) serve as well, so the references are bound to
 * those. */
#pragma once
#if defined(__x86_64__) && defined(__linux__)
#include <features.h>
#if defined(__GLIBC__)
__asm__(".symver exp,exp@GLIBC_2.2.5");
__asm__(".symver log,log@GLIBC_2.2.5");
__asm__(".symver pow,pow@GLIBC_2.2.5");
__asm__(".symver exp2,exp2@GLIBC_2.2.5");
__asm__(".symver log2,log2@GLIBC_2.2.5");
#endif
#endif
