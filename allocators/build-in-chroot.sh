#!/usr/bin/env bash
# Runs INSIDE a build chroot (allocators/build.sh copies it in and calls it):
# unpacks Debian's source packages and builds the allocator libraries for one
# libc into OUT.
#
#   build-in-chroot.sh glibc|musl WORK OUT JEMALLOC_VERSION MIMALLOC_VERSION GPERFTOOLS_VERSION
#
# The source packages come from the deb-src lines build.sh wrote into the
# chroot's apt sources (`apt-get source`, which also applies Debian's
# patches). Each library is configured as Debian's debian/rules does, with
# Debian's compiler flags (dpkg-buildflags), plus the changes that make it
# safe to preload into any process:
#   jemalloc  --disable-cxx: no libstdc++ dependency (C++ new/delete still
#             reach the preloaded malloc/free through libstdc++'s own new).
#   tcmalloc  libstdc++ and libgcc linked statically and hidden
#             (--exclude-libs): the library needs only libc and libm.
#   mimalloc  is C already.
# glibc builds force-include glibc_compat.h (path in $GLIBC_COMPAT_H), which
# keeps libm calls off the GLIBC_2.29 symbol versions. Libraries are stripped
# as dh_strip does.
set -euo pipefail
libc=$1 work=$2 out=$3 jemalloc_v=$4 mimalloc_v=$5 gperftools_v=$6
jobs=${ALLOCATORS_JOBS:-2}
log() { echo "build-in-chroot($libc): $*" >&2; }

mkdir -p "$work" "$out"
cd "$work"
export LC_ALL=C.UTF-8 DEB_BUILD_MAINT_OPTIONS=
timings=()
timed() {  # name command...: runs it and remembers how long it took
  local name=$1 t0=$SECONDS
  shift
  "$@"
  timings+=("$name $((SECONDS - t0))")
}

fetch() {  # package version: the unpacked source tree's path on stdout
  local pkg=$1 version=$2 dir
  dir=$(ls -d "$pkg"-*/ 2>/dev/null | head -n1 || true)
  if [[ -z $dir ]]; then
    if ! apt-get source -o APT::Sandbox::User=root --only-source "$pkg=$version" >"$work/apt-source-$pkg.log" 2>&1; then
      cat "$work/apt-source-$pkg.log" >&2
      log "apt-get source $pkg=$version failed; a stable point release may have replaced it: bump allocators/versions.sh"
      exit 1
    fi
    dir=$(ls -d "$pkg"-*/ | head -n1)
  fi
  echo "$work/${dir%/}"
}

flags() {  # CC: exports Debian's flags for this libc
  CFLAGS="$(dpkg-buildflags --get CFLAGS) $compat"
  CXXFLAGS="$(dpkg-buildflags --get CXXFLAGS) $compat"
  CPPFLAGS=$(dpkg-buildflags --get CPPFLAGS)
  LDFLAGS=$(dpkg-buildflags --get LDFLAGS)
  export CFLAGS CXXFLAGS CPPFLAGS LDFLAGS CC=$1
}

install_lib() {  # built-library: stripped copy into $out
  local name
  name=$(basename "$1")
  cp -L "$1" "$out/$name"
  strip --strip-unneeded --remove-section=.comment --remove-section=.note "$out/$name"
}

if [[ $libc == musl ]]; then
  cc=musl-gcc compat=
else
  cc=gcc compat="-include ${GLIBC_COMPAT_H:?}"
fi

build_jemalloc() {
  local src b
  src=$(fetch jemalloc "$jemalloc_v")
  b=$work/build-jemalloc
  rm -rf "$b"
  cp -a "$src" "$b"
  cd "$b"
  flags "$cc"
  # debian/rules: 4 KiB pages on amd64, 2 MiB huge pages, heap profiling.
  # Profiling unwinds with libgcc's _Unwind_Backtrace, linked statically
  # (and hidden) so the library needs no libgcc_s.so.1, which minimal
  # images (distroless base) lack. The musl toolchain has no libgcc_eh for
  # musl, so musl builds leave profiling out.
  local opts=(--with-version=VERSION --with-lg-page=12 --with-lg-hugepage=21
    --disable-cxx --disable-doc)
  if [[ $libc == glibc ]]; then
    opts+=(--enable-prof)
    LDFLAGS="$LDFLAGS -static-libgcc -Wl,--exclude-libs,ALL"
  else
    opts+=(--disable-prof)
  fi
  AUTOHEADER=true ./configure "${opts[@]}" >configure.log 2>&1 || {
    tail -n 30 configure.log >&2
    exit 1
  }
  make -j"$jobs" build_lib_shared >make.log 2>&1 || {
    tail -n 30 make.log >&2
    exit 1
  }
  install_lib lib/libjemalloc.so.2
  cd "$work"
}

build_mimalloc() {
  local src b
  src=$(fetch mimalloc "$mimalloc_v")
  b=$work/build-mimalloc
  rm -rf "$b"
  flags "$cc"
  # debian/rules: hardening=+all, -Wall -pedantic, shared library only.
  DEB_BUILD_MAINT_OPTIONS=hardening=+all
  CFLAGS="$(DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get CFLAGS) -Wall -pedantic"
  LDFLAGS=$(DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get LDFLAGS)
  export CFLAGS LDFLAGS
  cmake -S "$src" -B "$b" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER="$cc" \
    -DMI_BUILD_STATIC=OFF -DMI_BUILD_OBJECT=OFF -DMI_BUILD_TESTS=OFF \
    -DMI_INSTALL_TOPLEVEL=ON >"$work/mimalloc-configure.log" 2>&1 || {
    tail -n 30 "$work/mimalloc-configure.log" >&2
    exit 1
  }
  cmake --build "$b" -j"$jobs" >"$work/mimalloc-make.log" 2>&1 || {
    tail -n 30 "$work/mimalloc-make.log" >&2
    exit 1
  }
  install_lib "$b/libmimalloc.so.2"
}

build_tcmalloc() {
  local src b
  src=$(fetch google-perftools "$gperftools_v")
  b=$work/build-tcmalloc
  rm -rf "$b"
  cp -a "$src" "$b"
  cd "$b"
  flags "$cc"
  # debian/rules: -Wl,--as-needed. --exclude-libs,ALL keeps the statically
  # linked libstdc++ and libgcc symbols out of the dynamic symbol table, so
  # they never interpose on the program's own libstdc++.
  LDFLAGS="$LDFLAGS -Wl,--as-needed -Wl,--exclude-libs,ALL"
  autoreconf -fi >autoreconf.log 2>&1 || {
    tail -n 30 autoreconf.log >&2
    exit 1
  }
  ./configure --enable-minimal --disable-static >configure.log 2>&1 || {
    tail -n 30 configure.log >&2
    exit 1
  }
  # libtool links C++ libraries with -nostdlib and its own list of runtime
  # libraries (postdeps), so -static-libstdc++ never reaches it: the list
  # itself is replaced with the static archives.
  local static_libs
  static_libs="$(g++ -print-file-name=libstdc++.a) -lm $(g++ -print-file-name=libgcc_eh.a) $(g++ -print-file-name=libgcc.a)"
  sed -i "/^# ### BEGIN LIBTOOL TAG CONFIG: CXX\$/,/^# ### END LIBTOOL TAG CONFIG: CXX\$/ s|^postdeps=.*|postdeps=\"$static_libs -lc $(g++ -print-file-name=libgcc.a)\"|" libtool
  grep -q "^postdeps=\"$(g++ -print-file-name=libstdc++.a)" libtool || {
    log "libtool's C++ postdeps not found; cannot link libstdc++ statically"
    exit 1
  }
  make -j"$jobs" libtcmalloc_minimal.la >make.log 2>&1 || {
    tail -n 30 make.log >&2
    exit 1
  }
  install_lib .libs/libtcmalloc_minimal.so.4
  cd "$work"
}

# ALLOCATORS_ONLY="tcmalloc" rebuilds one allocator while working on this script.
only=" ${ALLOCATORS_ONLY:-jemalloc mimalloc tcmalloc} "
[[ $only == *" jemalloc "* ]] && timed jemalloc build_jemalloc
[[ $only == *" mimalloc "* ]] && timed mimalloc build_mimalloc
if [[ $libc == glibc && $only == *" tcmalloc "* ]]; then
  timed tcmalloc build_tcmalloc
fi
{
  echo "compiler: $($cc --version | head -n1)"
  if [[ $libc == glibc ]]; then
    echo "libc: glibc $(dpkg-query -W -f='${Version}' libc6)"
  else
    echo "libc: musl $(dpkg-query -W -f='${Version}' musl-dev)"
  fi
} >"$out/toolchain.txt"
printf '%s\n' "${timings[@]}" >"$out/timings.txt"
