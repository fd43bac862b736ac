#!/usr/bin/env python3
"""The allocguard command line as docs/cli.md promises it.

    cli_test.py ALLOCGUARD DOCS_CLI_MD GATE_CONTROLPLANE_TEST_CC

Runs every row of docs/cli.md's exit-code table that has a command against
the binary and fails when the exit code differs; for the rows that need a
cluster, checks that the named test of gate_controlplane_test.cc still
asserts the code. Then the rules of the page's top: -o means the output
format everywhere and -o json prints JSON alone, with camelCase keys;
internal subcommands and flags are left out of --help and still work.
"""

import json
import os
import random
import re
import subprocess
import sys
import tempfile

BINARY, DOCS, GATE_TEST = sys.argv[1:4]
failures = []


def fail(message):
    failures.append(message)
    print("FAIL:", message)


COLUMNS = ("t_s,anon_bytes,rss_bytes,cg_anon_bytes,cg_dirty_bytes,cg_writeback_bytes,"
           "cg_usage_bytes,judged_bytes,cpu_s,processes,threads,released,sent,completed,late,"
           "errors,in_flight,oom_kills")
MIB = 1 << 20


def replay_csv(path, variant, allocator, minutes, floor_mib, slope_gib_per_h=0.0, noise_mib=1.0,
               events=(), errors=0, seed=1):
    """A replay CSV as allocguard replay writes it: 2 s samples of a floor
    at floor_mib that climbs slope_gib_per_h, with seeded noise."""
    rng = random.Random(seed)
    lines = [
        "# allocguard replay samples v1",
        f"# variant: {variant}",
        f"# allocator: {allocator}",
        "# duration_s: 600",
        "# max_slope_gib_per_h: 0.500",
        "# sample_interval_s: 2.000",
        "# warmup_minutes: 1",
        "# max_minutes: 10",
        "# max_late_fraction: 0.0100",
        "# max_unexpected_responses: 0",
        "# early_stop: true",
        COLUMNS,
    ]
    samples = minutes * 30
    for i in range(samples + 1):
        t = 2.0 * i
        mib = floor_mib + slope_gib_per_h * 1024 * t / 3600 + rng.uniform(0, noise_mib)
        b = int(mib * MIB)
        errs = errors if i == samples else 0
        lines.append(f"{t:.3f},{b},{b + 8 * MIB},{b},0,0,{b + 2 * MIB},{b},{0.2 * i:.2f},1,8,"
                     f"{i},{i * 40},{i * 40},0,{errs},0,0")
    lines += [f"# event: {e}" for e in events]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def fixtures(d):
    """The names in braces of docs/cli.md's table."""
    files = {"dir": d, "missing-dir": os.path.join(d, "no", "such", "dir"),
             "missing.csv": os.path.join(d, "missing.csv")}

    def csv(name, *args, **kwargs):
        files[name] = os.path.join(d, name)
        replay_csv(files[name], *args, **kwargs)

    csv("flat.csv", "candidate", "glibc", 10, 200)
    csv("flat-jemalloc.csv", "jemalloc", "jemalloc", 10, 180, seed=2)
    csv("ratchet.csv", "candidate", "glibc", 10, 200, slope_gib_per_h=16)
    csv("ratchet-jemalloc.csv", "jemalloc", "jemalloc", 10, 180, slope_gib_per_h=16, seed=2)
    csv("oom.csv", "candidate", "glibc", 4, 200, events=["oom: minute 3"])
    csv("errors.csv", "candidate", "glibc", 10, 200, errors=5)
    csv("failed.csv", "candidate", "glibc", 1, 200,
        events=["failed: the workload exited with code 1 before it was ready"])
    csv("short.csv", "candidate", "glibc", 3, 200, noise_mib=150, seed=3)
    files["broken.csv"] = os.path.join(d, "broken.csv")
    with open(files["broken.csv"], "w") as f:
        f.write("this is not a replay CSV\n1,2,3\n")
    files["load.yaml"] = os.path.join(d, "load.yaml")
    with open(files["load.yaml"], "w") as f:
        f.write("base_url: http://127.0.0.1:{port}\nrate: 10\nworkers: 2\n"
                "requests:\n  - {name: get, path: /}\n")
    return files


def run(args, cwd):
    env = dict(os.environ, KUBECONFIG=os.path.join(cwd, "no-kubeconfig"))
    env.pop("KUBERNETES_SERVICE_HOST", None)
    p = subprocess.run([BINARY] + args, cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=120)
    return p.returncode, p.stdout, p.stderr


def table_rows():
    text = open(DOCS, encoding="utf-8").read()
    section = text.split("## Exit codes", 1)[1]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[1].isdigit():
            rows.append(cells)
    return rows


def check_table(files, d):
    gate_test = open(GATE_TEST, encoding="utf-8").read()
    rows = table_rows()
    if len(rows) < 30:
        fail(f"docs/cli.md's exit-code table has {len(rows)} rows; the test expected at least 30")
    for subcommand, code, when, check in rows:
        code = int(code)
        m = re.fullmatch(r"`allocguard ?(.*)`", check)
        if m:
            unknown = [n for n in re.findall(r"\{([^}]+)\}", m.group(1)) if n not in files]
            if unknown:
                fail(f"row '{subcommand} {code}' names files the test does not write: {unknown}")
                continue
            args = re.sub(r"\{([^}]+)\}", lambda n: files[n.group(1)], m.group(1)).split()
            rc, out, err = run(args, d)
            what = f"{subcommand} {code} ({when}): allocguard {' '.join(args)}"
            if rc == code:
                print(f"ok: {what} exits {rc}")
            else:
                fail(f"{what} exited {rc}, docs/cli.md says {code}\nstdout: {out[-600:]}\nstderr: {err[-600:]}")
            if code == 64 and "--help" not in err and "Run with --help" not in err:
                fail(f"{what}: a usage error that does not point at --help: {err!r}")
            continue
        m = re.fullmatch(r"`gate_controlplane_test: (\w+)`", check)
        if not m:
            fail(f"row '{subcommand} {code}' has no command or test to check it: {check}")
            continue
        body = re.search(r"TEST_F\(GateTest, " + m.group(1) + r"\) \{(.*?)\n\}", gate_test, re.S)
        if not body:
            fail(f"gate {code}: gate_controlplane_test.cc has no test {m.group(1)}")
        elif not re.search(r"exit_code, " + str(code) + r"\)", body.group(1)):
            fail(f"gate {code}: {m.group(1)} does not assert exit code {code}")
        else:
            print(f"ok: gate {code} ({when}): asserted by gate_controlplane_test {m.group(1)}")


def camel_case_keys(value, where, bad):
    if isinstance(value, dict):
        for k, v in value.items():
            if not re.fullmatch(r"[a-z][A-Za-z0-9]*", k):
                bad.append(f"{where}.{k}")
            camel_case_keys(v, f"{where}.{k}", bad)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            camel_case_keys(v, f"{where}[{i}]", bad)


def check_rules(files, d):
    for args in (["version", "-o", "json"],
                 ["analyze", files["ratchet.csv"], files["flat-jemalloc.csv"], "-o", "json"],
                 ["report", files["flat.csv"], "--html", os.path.join(d, "r.html"), "-o", "json"]):
        rc, out, err = run(args, d)
        try:
            doc = json.loads(out)
        except ValueError:
            fail(f"allocguard {' '.join(args)} printed more than JSON on stdout: {out[:300]!r}")
            continue
        bad = []
        camel_case_keys(doc, args[0], bad)
        if bad:
            fail(f"allocguard {args[0]} -o json: keys not in camelCase: {bad[:8]}")
        else:
            print(f"ok: allocguard {args[0]} -o json: JSON alone on stdout, camelCase keys (exit {rc})")
    rc, out, _ = run(["analyze", files["ratchet.csv"], files["flat-jemalloc.csv"], "-o", "json"], d)
    doc = json.loads(out) if out.startswith("{") else {}
    if doc.get("exitCode") != rc or doc.get("verdict") != "AllocatorRetention":
        fail(f"analyze -o json says exitCode {doc.get('exitCode')} / {doc.get('verdict')}, it exited {rc}")
    for sub in ("replay", "analyze", "report", "gate", "version"):
        _, out, _ = run([sub, "--help"], d)
        if not re.search(r"-o,--output TEXT:\{text,json\}", out):
            fail(f"allocguard {sub} --help has no -o,--output text|json: {out[:400]!r}")
    _, top, _ = run(["--help"], d)
    if "install-allocator" in top:
        fail("allocguard --help lists the internal install-allocator")
    for visible in ("replay", "gate", "operator", "guard", "version"):
        if visible not in top:
            fail(f"allocguard --help does not list {visible}")
    if "64 usage error" not in top:
        fail(f"allocguard --help does not say the exit codes: {top[-300:]!r}")
    _, replay_help, _ = run(["replay", "--help"], d)
    for internal in ("--in-pod", "--termination-log", "--load-json", "--target-comm"):
        if re.search(r"^\s*" + re.escape(internal) + r"\b", replay_help, re.M):
            fail(f"allocguard replay --help lists the internal {internal}")
    rc, out, _ = run(["install-allocator", "--help"], d)
    if rc != 0 or "--to" not in out:
        fail(f"allocguard install-allocator --help: exit {rc}, {out[:200]!r}")
    rc, _, err = run(["replay", "--load", files["load.yaml"], "--duration", "10", "--", "true"], d)
    if "--duration 10: a duration needs a unit" not in err:
        fail(f"a unitless --duration is not refused by name: {err!r}")
    print("ok: -o, JSON keys, --help and durations as docs/cli.md says")


with tempfile.TemporaryDirectory() as d:
    files = fixtures(d)
    check_table(files, d)
    check_rules(files, d)

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all CLI checks passed")
