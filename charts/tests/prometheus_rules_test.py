#!/usr/bin/env python3
"""Checks charts/allocguard/rules/allocguard.rules.yaml, the alerts the chart
ships as a PrometheusRule (prometheusRule.enabled):

- `promtool check rules` accepts it, and `promtool test rules` passes
  charts/tests/allocguard.rules_test.yaml (each alert fires on the series it
  is for, with the labels and annotations a pager shows, and stays quiet on
  the others);
- every allocguard_* metric an expression names is exported by the code;
- every alert has a severity, a test case, and a runbook_url whose anchor is
  a heading of docs/troubleshooting.md.

With --rendered FILE (the output of `helm template --show-only
templates/prometheusrule.yaml`, as charts/tests/chart_controlplane_test.sh
passes it): the PrometheusRule's spec passes `promtool check rules`, holds
the same alerts, and links the runbooks of the chart's appVersion.

promtool comes from Debian's prometheus package (scripts/install-deps.sh).
Run: python3 charts/tests/prometheus_rules_test.py   (exit 0 when all hold)
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from exported_metrics import ROOT, exported_names, missing_metrics  # noqa: E402

RULES = ROOT / "charts/allocguard/rules/allocguard.rules.yaml"
RULE_TESTS = ROOT / "charts/tests/allocguard.rules_test.yaml"
TROUBLESHOOTING = ROOT / "docs/troubleshooting.md"
SHIPPED_RUNBOOKS = "https://github.com/allocguard/allocguard/blob/main/docs/troubleshooting.md"

failures = []


def fail(message):
    failures.append(message)
    print("FAIL:", message)


def promtool(*args):
    binary = os.environ.get("PROMTOOL") or shutil.which("promtool")
    if binary is None:
        sys.exit("promtool not found: scripts/install-deps.sh installs it")
    return subprocess.run([binary, *args], capture_output=True, text=True)


def alerts(text):
    """(name, expr, block) of each alert, read line by line from the rule
    file's layout: `- alert:` starts a rule, `expr:` is inline or a block."""
    found = []
    for block in re.split(r"\n\s*- alert: ", text)[1:]:
        name = block.split("\n", 1)[0].strip()
        m = re.search(r"\n\s*expr: (\|\n((?:\s{10,}.*\n)+)|(.*)\n)", block + "\n")
        expr = (m.group(2) or m.group(3) or "") if m else ""
        found.append((name, expr, block))
    return found


def slug(heading):
    """GitHub's anchor of a Markdown heading."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def check_source(names):
    out = promtool("check", "rules", str(RULES))
    if out.returncode != 0:
        fail(f"promtool check rules: {out.stdout}{out.stderr}")
    out = promtool("test", "rules", str(RULE_TESTS))
    if out.returncode != 0:
        fail(f"promtool test rules: {out.stdout}{out.stderr}")
    text = RULES.read_text()
    tests = RULE_TESTS.read_text()
    anchors = {slug(line.lstrip("#")) for line in TROUBLESHOOTING.read_text().splitlines()
               if line.startswith("#")}
    found = alerts(text)
    if len(found) < 10:
        fail(f"only {len(found)} alerts read from {RULES.name}")
    for name, expr, block in found:
        if not re.search(r"allocguard_", expr):
            fail(f"{name}: no allocguard metric in {expr!r}")
        for metric in missing_metrics(expr, names):
            fail(f"{name}: {metric} is not exported by the code")
        if not re.search(r"\n\s*severity: (warning|critical)\n", block):
            fail(f"{name}: no severity warning|critical")
        if f"alertname: {name}\n" not in tests:
            fail(f"{name}: no case in {RULE_TESTS.name}")
        m = re.search(r"runbook_url: (\S+)", block)
        if not m or not m.group(1).startswith(SHIPPED_RUNBOOKS + "#"):
            fail(f"{name}: runbook_url is not {SHIPPED_RUNBOOKS}#...")
        elif m.group(1).split("#", 1)[1] not in anchors:
            fail(f"{name}: docs/troubleshooting.md has no heading #{m.group(1).split('#', 1)[1]}")
    return found


def check_rendered(path, source_alerts):
    lines = pathlib.Path(path).read_text().splitlines()
    if "kind: PrometheusRule" not in lines:
        fail("the rendered file is not a PrometheusRule")
        return
    start = lines.index("spec:") + 1
    spec = "\n".join(line[2:] for line in lines[start:]) + "\n"
    version = re.search(r'app.kubernetes.io/version: "([^"]+)"', "\n".join(lines))
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write(spec)
        f.flush()
        out = promtool("check", "rules", f.name)
        if out.returncode != 0:
            fail(f"promtool check rules on the rendered PrometheusRule: {out.stdout}{out.stderr}")
        else:
            print(f"rendered PrometheusRule: {out.stdout.strip().splitlines()[-1].strip()}")
    rendered = [name for name, _, _ in alerts(spec)]
    if rendered != [name for name, _, _ in source_alerts]:
        fail(f"the rendered alerts {rendered} differ from the rules file's")
    if SHIPPED_RUNBOOKS in spec:
        fail("the rendered runbook links still point at main")
    if version and (f"/blob/v{version.group(1)}/docs/troubleshooting.md#" not in spec):
        fail(f"the rendered runbook links do not point at v{version.group(1)}")


def main():
    names = exported_names()
    found = check_source(names)
    if len(sys.argv) == 3 and sys.argv[1] == "--rendered":
        check_rendered(sys.argv[2], found)
    print(f"{RULES.relative_to(ROOT)}: {len(found)} alerts; {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
