#!/usr/bin/env python3
"""Summarises the API server's own measurement of admission webhook latency.

Reads the API server's /metrics on stdin (kubectl get --raw /metrics) and
prints, per webhook, how many calls apiserver_admission_webhook_admission_
duration_seconds counted, their mean, and the p50 and p99 read off the
histogram (the upper bound of the bucket that holds the quantile, which is
all a Prometheus histogram can say).
"""
import collections
import re
import sys

METRIC = "apiserver_admission_webhook_admission_duration_seconds"
LINE = re.compile(METRIC + r"_(bucket|sum|count)\{([^}]*)\} ([0-9.eE+-]+)$")
LABEL = re.compile(r'(\w+)="([^"]*)"')

buckets = collections.defaultdict(lambda: collections.defaultdict(float))
sums = collections.defaultdict(float)
counts = collections.defaultdict(float)
for line in sys.stdin:
    m = LINE.match(line.strip())
    if not m:
        continue
    kind, labels, value = m.group(1), dict(LABEL.findall(m.group(2))), float(m.group(3))
    key = (labels.get("name", "?"), labels.get("type", "?"))
    if kind == "bucket":
        buckets[key][labels["le"]] += value
    elif kind == "sum":
        sums[key] += value
    else:
        counts[key] += value


def quantile(hist, total, q):
    bounds = sorted(((float("inf") if le == "+Inf" else float(le)), n) for le, n in hist.items())
    for bound, cumulative in bounds:
        if cumulative >= q * total:
            return "> %g s" % bounds[-2][0] if bound == float("inf") else "<= %g s" % bound
    return "?"


if not counts:
    print("  no admission webhook calls recorded")
for key in sorted(counts):
    n = counts[key]
    if n == 0:
        continue
    print("  %-45s %-9s calls %6d  mean %7.2f ms  p50 %-10s p99 %s" % (
        key[0], key[1], n, 1000 * sums[key] / n, quantile(buckets[key], n, 0.5),
        quantile(buckets[key], n, 0.99)))
