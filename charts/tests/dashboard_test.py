#!/usr/bin/env python3
"""Checks charts/allocguard/dashboards/allocguard.json.

- it parses, has a uid, unique panel ids, and every query panel reads the
  ${datasource} variable;
- every allocguard_* metric its PromQL names is exported by the code: a
  registered family name (a string literal in operator/ or controllers/), or
  such a histogram's _bucket/_sum/_count series;
- with helm (HELM, else helm on PATH), the chart ships exactly this file in
  the ConfigMap when grafanaDashboard.enabled is true, labelled for the Grafana
  sidecar, and no ConfigMap by default.

Run: python3 charts/tests/dashboard_test.py   (exit 0 when all hold)
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from exported_metrics import METRIC, ROOT, exported_names, missing_metrics  # noqa: E402

DASHBOARD = ROOT / "charts/allocguard/dashboards/allocguard.json"

failures = []


def fail(message):
    failures.append(message)
    print("FAIL:", message)


def query_panels(dashboard):
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])  # collapsed rows


def check_dashboard(dashboard, names):
    if not dashboard.get("uid"):
        fail("the dashboard has no uid")
    ids = [p.get("id") for p in query_panels(dashboard)]
    if len(ids) != len(set(ids)):
        fail(f"panel ids repeat: {ids}")
    variables = {v["name"] for v in dashboard.get("templating", {}).get("list", [])}
    if "datasource" not in variables:
        fail("no datasource variable")
    exprs = 0
    for panel in query_panels(dashboard):
        if panel.get("type") == "row":
            continue
        if panel.get("datasource", {}).get("uid") != "${datasource}":
            fail(f"panel {panel.get('title')!r} does not read ${{datasource}}")
        targets = panel.get("targets", [])
        if not targets:
            fail(f"panel {panel.get('title')!r} has no query")
        for target in targets:
            expr = target.get("expr", "")
            exprs += 1
            if not METRIC.search(expr):
                fail(f"panel {panel.get('title')!r}: no allocguard metric in {expr!r}")
            for name in missing_metrics(expr, names):
                fail(f"panel {panel.get('title')!r}: {name} is not exported by the code")
    return exprs


def helm_binary():
    helm = os.environ.get("HELM") or shutil.which("helm")
    if helm is None and os.access("/var/cache/allocguard/helm-3.22.0/bin/helm", os.X_OK):
        helm = "/var/cache/allocguard/helm-3.22.0/bin/helm"
    return helm


def check_chart(helm, dashboard):
    chart = str(ROOT / "charts/allocguard")
    default = subprocess.run([helm, "template", "t", chart], check=True, capture_output=True,
                             text=True).stdout
    if "grafana-dashboard.yaml" in default:
        fail("the dashboard ConfigMap is rendered although grafanaDashboard.enabled is false")
    rendered = subprocess.run(
        [helm, "template", "t", chart, "--namespace", "monitoring-test",
         "--set", "grafanaDashboard.enabled=true", "--show-only",
         "templates/grafana-dashboard.yaml"],
        check=True, capture_output=True, text=True).stdout
    # The rendered YAML read line by line (no PyYAML needed).
    lines = rendered.splitlines()
    if '    grafana_dashboard: "1"' not in lines:
        fail("the ConfigMap lacks the label grafana_dashboard: \"1\"")
    if "  namespace: monitoring-test" not in lines:
        fail("the ConfigMap is not in the release namespace")
    start = lines.index("  allocguard.json: |-") + 1
    body = "\n".join(line[4:] for line in lines[start:])
    if json.loads(body) != dashboard:
        fail("the ConfigMap's allocguard.json differs from dashboards/allocguard.json")


def main():
    names = exported_names()
    # The checker itself: a name the code does not export must be caught.
    if missing_metrics("rate(allocguard_no_such_metric_total[5m])", names) != [
            "allocguard_no_such_metric_total"]:
        fail("the metric-name check does not catch an unknown name")
    if missing_metrics("allocguard_reconcile_duration_seconds_bucket", names):
        fail("the histogram series of allocguard_reconcile_duration_seconds are not found")
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = check_dashboard(dashboard, names)
    helm = helm_binary()
    if helm:
        check_chart(helm, dashboard)
    else:
        print("note: no helm; the chart's ConfigMap was not checked")
    print(f"{DASHBOARD.relative_to(ROOT)}: {exprs} queries over {len(names)} exported "
          f"allocguard_* names; {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
