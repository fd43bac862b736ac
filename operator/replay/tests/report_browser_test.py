#!/usr/bin/env python3
"""The replay report in a real headless browser (Debian's chromium).

    report_browser_test.py ALLOCGUARD OUT_DIR CANDIDATE.csv OTHER.csv \
        [PLAIN_CANDIDATE.csv PLAIN_OTHER.csv]

Writes the report of two recorded replay runs with `allocguard report`,
opens it in headless Chromium driven over the DevTools protocol
(--remote-debugging-pipe: no port, no library), and checks:

- the page requests nothing but its own file: every request its frames
  make is seen (Network.requestWillBeSent of the page's own target, so the
  browser's own background traffic is not counted);
- the DOM Chromium built has a chart per variant on one shared scale, the
  flat threshold's band around each fit, the run metadata and the glossary,
  and no figure printed as nan or inf;
- when the CSVs recorded the allocator's books (their books_* columns): each
  chart draws them as two areas, in use standing on the chart's zero line
  and retained stacked on it, spanning the run, painted (Chromium's own hit
  test finds them on top where they are drawn) in the colours of the legend
  entries that name them;
- a screenshot of the whole page is taken (OUT_DIR/report.png, the picture
  in docs/replay.md) and is not blank.

With a second pair recorded before the books existed, its report is loaded
too and must draw no books and name none in its legends.
"""

import base64
import fcntl
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
PLAIN = sys.argv[5:7]
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
        # The browser's ends are moved above 4 first: a pipe end that already
        # is fd 3 or 4 (a process with nothing else open) would be dup2'ed
        # onto itself, which keeps its close-on-exec flag, and Chromium would
        # start without it ("Remote debugging pipe file descriptors are not
        # open").
        to_browser_r = self._above_4(to_browser_r)
        from_browser_w = self._above_4(from_browser_w)
        self._to_browser = self._above_4(self._to_browser)
        self._from_browser = self._above_4(self._from_browser)

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

    @staticmethod
    def _above_4(fd):
        moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 5)
        os.close(fd)
        return moved

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
    bad_numbers = re.findall(r"[^<>]{0,40}\b(?:nan|inf)\b[^<>]{0,20}", page, re.I)
    if bad_numbers:
        fail(f"the page prints figures as nan or inf: {bad_numbers[:3]}")
    for needed in ("<h2>Run</h2>", "arena limit", "report written", "<h2>Glossary</h2>",
                   "<dt>floor</dt>", "threshold band"):
        if needed not in page:
            fail(f"the page lacks {needed!r}")
    if scale and len(charts) == 2 and bands == 2:
        ok(f"DOM: charts of {charts} on one scale (0–{scale.group(1)} MiB), a threshold band "
           "each, run metadata, glossary")


# Runs in the page: per chart, the books' areas as Chromium laid them out, in
# the chart's own (viewBox) coordinates, and what its hit test finds at
# points inside each area.
BOOKS_PROBE = r"""
(() => {
  const charts = [];
  for (const svg of document.querySelectorAll('svg[aria-label^="memory of "]')) {
    // elementFromPoint sees the viewport only: the chart is scrolled into it.
    svg.scrollIntoView();
    const ctm = svg.getScreenCTM();
    // What is painted at a point, from the top down to the svg.
    const hit = (x, y) => {
      const p = new DOMPoint(x, y).matrixTransform(ctm);
      const stack = [];
      for (const e of document.elementsFromPoint(p.x, p.y)) {
        if (e === svg) break;
        stack.push(e.getAttribute('class') || e.tagName);
      }
      return stack;
    };
    const zero = [...svg.querySelectorAll('text.axis')].find(t => t.textContent === '0');
    const area = cls => [...svg.querySelectorAll('polygon.' + cls)].map(p => {
      const b = p.getBBox();
      const style = getComputedStyle(p);
      return {points: [...p.points].map(q => [q.x, q.y]),
              box: [b.x, b.y, b.width, b.height],
              fill: style.fill, opacity: style.fillOpacity, title: p.textContent};
    });
    const inUse = area('books-in-use'), retained = area('books-retained');
    // Points halfway between the top and the bottom of each area, at every
    // sample where the area is at least 3 px thick.
    const probes = (areas, cls) => areas.flatMap(a => {
      const n = a.points.length;
      const k = cls === 'books-in-use' ? n - 2 : n / 2;  // samples along the top
      const out = [];
      for (let i = 0; i < k; i++) {
        const [x, top] = a.points[i];
        const bottom = cls === 'books-in-use' ? a.points[n - 1][1] : a.points[n - 1 - i][1];
        // At the first and last sample, a pixel inwards.
        const inwards = i === 0 ? 1 : i === k - 1 ? -1 : 0;
        if (bottom - top >= 3) out.push(hit(x + inwards, (top + bottom) / 2));
      }
      return out;
    });
    charts.push({name: svg.getAttribute('aria-label').slice('memory of '.length),
                 plot: [svg.viewBox.baseVal.width, svg.viewBox.baseVal.height],
                 zeroY: zero ? parseFloat(zero.getAttribute('y')) - 4 : null,
                 inUse, retained,
                 inUseHits: probes(inUse, 'books-in-use'),
                 retainedHits: probes(retained, 'books-retained')});
  }
  const legends = [...document.querySelectorAll('.legend')].map(l =>
      [...l.querySelectorAll('span')].map(s => ({text: s.textContent,
        color: getComputedStyle(s.querySelector('i')).backgroundColor})));
  window.scrollTo(0, 0);
  return JSON.stringify({charts, legends});
})()
"""


# What the chart draws over the books (report_html.cc, Chart).
OVER_BOOKS = {"samples", "floor", "fit", "band"}


def check_books(probe, want_books):
    """The allocator's books as Chromium drew them (BOOKS_PROBE's answer)."""
    charts, legends = probe["charts"], probe["legends"]
    if not want_books:
        drawn = [(c["name"], len(c["inUse"]), len(c["retained"])) for c in charts
                 if c["inUse"] or c["retained"]]
        named = [s["text"] for legend in legends for s in legend if "books" in s["text"]]
        if drawn or named:
            fail(f"a report without books draws {drawn} or names {named} in a legend")
        else:
            ok(f"no books in the CSVs: none drawn in {len(charts)} charts, none in the legends")
        return
    if len(legends) != len(charts):
        fail(f"{len(legends)} legends for {len(charts)} charts")
        return
    for chart, legend in zip(charts, legends):
        name = chart["name"]
        swatch = {s["text"]: s["color"] for s in legend}
        in_use_color = next((c for t, c in swatch.items()
                             if t.startswith("allocator books: in use (last ")), None)
        retained_color = next((c for t, c in swatch.items()
                               if t.startswith("retained (held free), stacked on in use (last ")),
                              None)
        if in_use_color is None or retained_color is None:
            fail(f"{name}: the legend does not name the books' areas: {list(swatch)}")
            continue
        if len(chart["inUse"]) < 1 or len(chart["inUse"]) != len(chart["retained"]):
            fail(f"{name}: {len(chart['inUse'])} in-use and {len(chart['retained'])} retained "
                 "areas, want one of each per span of samples with books")
            continue
        width, _ = chart["plot"]
        zero = chart["zeroY"]
        for in_use, retained in zip(chart["inUse"], chart["retained"]):
            top = in_use["points"][:-2]
            x0, y0, w, h = in_use["box"]
            rx0, ry0, rw, rh = retained["box"]
            problems = []
            if len(top) < 30:
                problems.append(f"in use has {len(top)} samples")
            if w < 0.5 * width or h <= 0:
                problems.append(f"in use spans {w:.0f}x{h:.0f} of a {width:.0f} wide chart")
            if zero is None or abs(y0 + h - zero) > 0.5:
                problems.append(f"in use ends at y {y0 + h:.1f}, the zero line is at {zero}")
            # Retained: its lower edge is the in-use line, point by point.
            upper, lower = retained["points"][:len(top)], retained["points"][len(top):][::-1]
            if len(lower) != len(top) or any(
                    abs(a[0] - b[0]) > 0.05 or abs(a[1] - b[1]) > 0.05 for a, b in zip(lower, top)):
                problems.append("retained does not stand on the in-use line")
            elif any(u[1] > t[1] + 0.05 for u, t in zip(upper, top)):
                problems.append("retained's top dips under in use")
            if rh <= 0 or abs(rx0 - x0) > 0.05 or abs(rw - w) > 0.05:
                problems.append(f"retained spans {rw:.0f}x{rh:.0f}, in use {w:.0f}")
            if in_use["fill"] != in_use_color or retained["fill"] != retained_color:
                problems.append(f"fills {in_use['fill']}, {retained['fill']} are not the legend's "
                                f"{in_use_color}, {retained_color}")
            if float(in_use["opacity"]) < 0.5 or float(retained["opacity"]) < 0.5:
                problems.append("an area is nearly transparent")
            if not re.search(r"in use \d+ → \d+ MiB", in_use["title"]) or not re.search(
                    r"retained \d+ → \d+ MiB", retained["title"]):
                problems.append(f"titles {in_use['title']!r}, {retained['title']!r}")
            for kind, stacks in (("in use", chart["inUseHits"]),
                                 ("retained", chart["retainedHits"])):
                cls = "books-" + kind.replace(" ", "-")
                # Inside an area Chromium finds the area, under nothing but
                # the marks drawn over it on purpose: the samples' line, the
                # floors' dots, the fit's dashes, the translucent band.
                seen = [st for st in stacks if cls in st and set(st[:st.index(cls)]) <= OVER_BOOKS]
                if not stacks or len(seen) < len(stacks):
                    hidden = [st for st in stacks if st not in seen][:3]
                    problems.append(f"{kind}: painted and uncovered at {len(seen)} of "
                                    f"{len(stacks)} points inside it; elsewhere {hidden}")
            if problems:
                fail(f"{name}: the books are not drawn right: " + "; ".join(problems))
            else:
                ok(f"{name}: books drawn, in use from the zero line over {len(top)} samples "
                   f"({in_use['title'].split(': ')[1]}), retained stacked on it "
                   f"({retained['title'].split(': ')[1]}), painted and uncovered at "
                   f"{len(chart['inUseHits'])} + {len(chart['retainedHits'])} points inside them, "
                   "in the legend's colours")


def write_report(name, csvs):
    html = os.path.abspath(os.path.join(OUT, name))
    p = subprocess.run([BINARY, "report", *csvs, "--html", html],
                       capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        sys.exit(f"FAIL: allocguard report exited {p.returncode}: {p.stderr}")
    ok(f"allocguard report {' '.join(os.path.basename(c) for c in csvs)}: {p.stdout.strip()}")
    return html


def load(dt, html, screenshot):
    """Opens file://html in a new tab: its DOM, the books probe's answer, the
    requests it made and (when asked) a screenshot of the whole page."""
    url = "file://" + html
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

    def evaluate(expression):
        return dt.call("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                       session=session)["result"]["value"]

    page = evaluate("document.documentElement.outerHTML")
    probe = json.loads(evaluate(BOOKS_PROBE))
    shot = None
    if screenshot:
        shot = dt.call("Page.captureScreenshot",
                       {"format": "png", "captureBeyondViewport": True}, session=session)
    requests = [e["params"]["request"]["url"] for e in dt.events
                if e.get("method") == "Network.requestWillBeSent"
                and e.get("sessionId") == session]
    dt.call("Target.closeTarget", {"targetId": target})
    return url, page, probe, shot, requests


def check_requests(url, requests):
    others = [u for u in requests if u != url]
    if url not in requests:
        fail(f"the page's own load was not seen, so its requests cannot be trusted: {requests}")
    elif others:
        fail(f"the page made {len(others)} request(s) besides its file: {others[:5]}")
    else:
        ok(f"the page requested nothing but itself ({len(requests)} request seen)")


def has_books(csv_path):
    """Whether a replay CSV has a sample with both books figures."""
    with open(csv_path, encoding="utf-8") as f:
        lines = [line.strip() for line in f if not line.startswith("#")]
    columns = lines[0].split(",")
    if "books_in_use_bytes" not in columns:
        return False
    a, b = columns.index("books_in_use_bytes"), columns.index("books_retained_bytes")
    return any(cells[a] and cells[b] for cells in (line.split(",") for line in lines[1:]))


def main():
    os.makedirs(OUT, exist_ok=True)
    html = write_report("report.html", [CANDIDATE, OTHER])
    plain_html = write_report("report-no-books.html", PLAIN) if PLAIN else None
    with tempfile.TemporaryDirectory() as profile:
        dt = DevTools(chromium(), profile)
        try:
            url, page, probe, shot, requests = load(dt, html, screenshot=True)
            plain = load(dt, plain_html, screenshot=False) if plain_html else None
        finally:
            dt.close()

    check_requests(url, requests)
    check_dom(page)
    check_books(probe, want_books=has_books(CANDIDATE) and has_books(OTHER))
    if plain:
        plain_url, plain_page, plain_probe, _, plain_requests = plain
        if has_books(PLAIN[0]) or has_books(PLAIN[1]):
            fail(f"{PLAIN} are meant to be recorded without books, and have them")
        check_requests(plain_url, plain_requests)
        check_dom(plain_page)
        check_books(plain_probe, want_books=False)

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
