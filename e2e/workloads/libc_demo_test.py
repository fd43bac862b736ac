#!/usr/bin/env python3
"""libc_demo answers its probes: /healthz, /allocator ("none" on the C
library's malloc, the preloaded allocator's path under LD_PRELOAD), /malloc,
and refuses what it does not serve.

    libc_demo_test.py BUILT_LIBC_DEMO
"""

import glob
import os
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, line):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(line.encode() + b"\r\nHost: x\r\n\r\n")
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    head, _, body = data.decode().partition("\r\n\r\n")
    return int(head.split()[1]), body


class Demo:
    def __init__(self, binary, preload=None, args=()):
        self.port = free_port()
        env = {"PATH": "/usr/bin:/bin"}
        if preload:
            env["LD_PRELOAD"] = preload
        self.proc = subprocess.Popen([binary, "--port", str(self.port), *args], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while True:
            try:
                request(self.port, "GET /healthz HTTP/1.0")
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    out = self.proc.communicate()[0].decode()
                    raise SystemExit(f"libc_demo did not start: {out}")
                time.sleep(0.05)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(timeout=10)


def children_of(pid):
    """The PIDs whose parent is `pid`, from /proc."""
    found = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.split("/")[2]))
    return found


def jemalloc_library():
    """A jemalloc for this machine's glibc: allocators/build.sh's build or
    Debian's package."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    build = subprocess.run(
        ["bash", "-c", f'source "{root}/allocators/versions.sh"; allocators_dir'],
        capture_output=True, text=True).stdout.strip()
    for path in [os.path.join(build, "glibc", "libjemalloc.so.2")] + \
            glob.glob("/usr/lib/*-linux-gnu/libjemalloc.so.2"):
        if os.path.exists(path):
            return os.path.realpath(path)
    return None


def main():
    binary = sys.argv[1]
    failures = []

    def expect(what, got, want):
        if got != want:
            failures.append(f"{what}: got {got!r}, want {want!r}")

    with Demo(binary) as demo:
        expect("GET /healthz", request(demo.port, "GET /healthz HTTP/1.0"), (200, "ok\n"))
        expect("GET /allocator without preload",
               request(demo.port, "GET /allocator HTTP/1.0"), (200, "none\n"))
        status, body = request(demo.port, "GET /malloc HTTP/1.0")
        expect("GET /malloc names the C library", (status, "libc" in body), (200, True))
        expect("GET /nope", request(demo.port, "GET /nope HTTP/1.0")[0], 404)
        expect("POST /healthz", request(demo.port, "POST /healthz HTTP/1.0")[0], 405)
        expect("still running after the probes", demo.proc.poll(), None)

    # A pre-forking server: one child, both processes answer on the port,
    # and the child ends with its parent.
    with Demo(binary, args=("--processes", "2")) as demo:
        children = children_of(demo.proc.pid)
        expect("children of a --processes 2 server", len(children), 1)
        answered = {request(demo.port, "GET /pid HTTP/1.0")[1].strip() for _ in range(40)}
        expect("GET /pid answers a PID of the server",
               answered <= {str(demo.proc.pid), *map(str, children)}, True)
        demo.proc.terminate()
        demo.proc.wait(timeout=10)
        deadline = time.monotonic() + 5
        while any(os.path.exists(f"/proc/{c}") for c in children) and time.monotonic() < deadline:
            time.sleep(0.05)
        expect("children left after the parent ended",
               [c for c in children if os.path.exists(f"/proc/{c}")], [])
    expect("--processes 0 refused",
           subprocess.run([binary, "--processes", "0"], capture_output=True).returncode, 2)

    jemalloc = jemalloc_library()
    if jemalloc:
        with Demo(binary, preload=jemalloc) as demo:
            expect("GET /allocator with jemalloc preloaded",
                   request(demo.port, "GET /allocator HTTP/1.0"), (200, jemalloc + "\n"))
    else:
        print("no jemalloc on this machine (allocators/build.sh, libjemalloc2): "
              "the preloaded case is not checked")

    for f in failures:
        print("FAIL:", f)
    print(f"libc_demo_test: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
