#!/usr/bin/env python3
"""The replay report in a real headless browser (Debian's chromium).

    report_browser_test.py ALLOCGUARD OUT_DIR CANDIDATE.csv OTHER.csv

Writes the report of two recorded replay runs with `allocguard report`,
opens it in headless Chromium driven over the DevTools protocol
(--remote-debugging-pipe: no port, no library), and checks:

- the page requests nothing but its own file: every request its frames
  make is seen (Network.requestWillBeSent of the page's own target, so the
  browser's own background traffic is not counted);
- the DOM Chromium built has a chart per variant on one shared scale, the
  flat threshold's band around each fit, the run metadata and the glossary;
- a screenshot of the whole page is taken (OUT_DIR/report.png, the picture
  in docs/replay.md) and is not blank.
"""

import base64
import json
import os
import re
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

BINARY, OUT, CANDIDATE, OTHER = sys.argv[1:5]
failures = []


def fail(message):
    failures.append(message)
    print("FAIL:", message)


def ok(message):
    print("ok:", message)


class DevTools:
    """The DevTools protocol over Chromium's --remote-debugging-pipe: JSON
    messages ending in NUL, read by the browser from fd 3 and written to fd 4."""

    def __init__(self, browser, profile):
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def fds():
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        args = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-extensions",
                "--disable-default-apps", "--no-default-browser-check", "--mute-audio",
                "--hide-scrollbars", f"--user-data-dir={profile}",
                "--remote-debugging-pipe", "about:blank"]
        # close_fds would close fds 3 and 4 again after preexec_fn made them.
        self.proc = subprocess.Popen(args, preexec_fn=fds, close_fds=False,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events = []

    def _read_message(self, deadline):
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise TimeoutError("no answer from chromium")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise EOFError("chromium closed its DevTools pipe: "
                               + self.proc.stderr.read().decode(errors="replace")[-600:])
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, params=None, session=None, timeout=60):
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._read_message(deadline)
            if m.get("id") == self._next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_for(self, method, session, timeout=60):
        deadline = time.monotonic() + timeout
        for i, e in enumerate(self.events):
            if e.get("method") == method and e.get("sessionId") == session:
                return self.events.pop(i)
        while True:
            m = self._read_message(deadline)
            if m.get("method") == method and m.get("sessionId") == session:
                return m
            self.events.append(m)

    def close(self):
        try:
            self.call("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, EOFError):
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.close(self._to_browser)
        os.close(self._from_browser)


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("FAIL: no chromium on PATH (scripts/install-deps.sh installs Debian's chromium)")


def png_size_and_rows(data):
    """Width, height and the number of distinct pixel rows (every fourth) of a PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    width, height = struct.unpack(">II", data[16:24])
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = len(raw) // height
    rows = {raw[i * stride + 1:(i + 1) * stride] for i in range(0, height, 4)}
    return width, height, len(rows)


def check_dom(page):
    charts = re.findall(r"<svg[^>]*aria-label=\"memory of ([^\"]+)\"", page)
    if len(charts) != 2:
        fail(f"{len(charts)} charts in the DOM, want 2: {charts}")
    bands = page.count('class="band"')
    if bands != 2:
        fail(f"{bands} threshold bands, want one per chart")
    scale = re.search(r"same scale: 0–(\d+) MiB over (\d+) minutes", page)
    tops = re.findall(r"<text class=\"axis\"[^>]*text-anchor=\"end\">(\d+)</text>", page)
    if not scale:
        fail("the page does not say its charts share one scale")
    elif tops.count(scale.group(1)) != 2:
        fail(f"the axis top {scale.group(1)} MiB is not on both charts: {sorted(set(tops))}")
    for needed in ("<h2>Run</h2>", "arena limit", "report written", "<h2>Glossary</h2>",
                   "<dt>floor</dt>", "threshold band"):
        if needed not in page:
            fail(f"the page lacks {needed!r}")
    if scale and len(charts) == 2 and bands == 2:
        ok(f"DOM: charts of {charts} on one scale (0–{scale.group(1)} MiB), a threshold band "
           "each, run metadata, glossary")


def main():
    os.makedirs(OUT, exist_ok=True)
    html = os.path.abspath(os.path.join(OUT, "report.html"))
    p = subprocess.run([BINARY, "report", CANDIDATE, OTHER, "--html", html],
                       capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        sys.exit(f"FAIL: allocguard report exited {p.returncode}: {p.stderr}")
    ok(f"allocguard report: {p.stdout.strip()}")

    url = "file://" + html
    with tempfile.TemporaryDirectory() as profile:
        dt = DevTools(chromium(), profile)
        try:
            target = dt.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = dt.call("Target.attachToTarget",
                              {"targetId": target, "flatten": True})["sessionId"]
            dt.call("Network.enable", session=session)
            dt.call("Page.enable", session=session)
            dt.call("Emulation.setDeviceMetricsOverride",
                    {"width": 1000, "height": 900, "deviceScaleFactor": 1, "mobile": False},
                    session=session)
            dt.call("Page.navigate", {"url": url}, session=session)
            dt.wait_for("Page.loadEventFired", session)
            page = dt.call("Runtime.evaluate",
                           {"expression": "document.documentElement.outerHTML",
                            "returnByValue": True}, session=session)["result"]["value"]
            shot = dt.call("Page.captureScreenshot",
                           {"format": "png", "captureBeyondViewport": True}, session=session)
            requests = [e["params"]["request"]["url"] for e in dt.events
                        if e.get("method") == "Network.requestWillBeSent"
                        and e.get("sessionId") == session]
        finally:
            dt.close()

    others = [u for u in requests if u != url]
    if url not in requests:
        fail(f"the page's own load was not seen, so its requests cannot be trusted: {requests}")
    elif others:
        fail(f"the page made {len(others)} request(s) besides its file: {others[:5]}")
    else:
        ok(f"the page requested nothing but itself ({len(requests)} request seen)")

    check_dom(page)

    png = base64.b64decode(shot["data"])
    path = os.path.join(OUT, "report.png")
    with open(path, "wb") as f:
        f.write(png)
    info = png_size_and_rows(png)
    if info is None:
        fail("the screenshot is not a PNG")
    else:
        width, height, rows = info
        if width != 1000 or height < 1500 or rows < 50:
            fail(f"screenshot {width}x{height} with {rows} distinct rows: blank or cut")
        else:
            ok(f"screenshot {path}: {width}x{height}, {len(png)} bytes, {rows} distinct rows "
               "of every fourth")

    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print("the report loads and renders in chromium as docs/replay.md says")


main()
