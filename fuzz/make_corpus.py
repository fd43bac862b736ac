#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/.

The seeds come from what the repository already has: docs/examples, the
e2e product manifests (YAML, converted to JSON), the CRDs' duration and
quantity fields, the kubeconfig fixtures of operator/kube/config_test.cc and
the replay CSVs of operator/memory/testdata (cut to their first rows). Run it
again after changing those; it replaces the seed files it writes (named
seed-*) and leaves inputs added by hand (crash reproducers) alone.
"""
import copy
import hashlib
import json
import pathlib
import re

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "fuzz" / "corpus"


def write(target, name, data):
    d = OUT / target
    d.mkdir(parents=True, exist_ok=True)
    if isinstance(data, (dict, list)):
        data = json.dumps(data, separators=(",", ":"), sort_keys=True)
    (d / f"seed-{name}").write_text(data)


def clear(target):
    d = OUT / target
    if d.is_dir():
        for f in d.glob("seed-*"):
            f.unlink()


def manifests():
    """(file stem, object) for every object of the YAML examples."""
    files = sorted((ROOT / "docs" / "examples").glob("*.yaml"))
    files += sorted((ROOT / "e2e" / "product").glob("*.yaml"))
    for f in files:
        for i, doc in enumerate(yaml.safe_load_all(f.read_text())):
            if isinstance(doc, dict) and "kind" in doc:
                doc.setdefault("metadata", {}).setdefault("namespace", "team-a")
                doc["metadata"].setdefault("uid", hashlib.sha1(f"{f.stem}{i}".encode()).hexdigest())
                yield f"{f.stem}-{i}", doc


def review(uid, kind, group, version, resource, operation, obj, old=None, user="alice"):
    meta = (obj or old or {}).get("metadata", {})
    req = {
        "uid": uid,
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
        "operation": operation,
        "namespace": meta.get("namespace", "team-a"),
        "name": meta.get("name", ""),
        "userInfo": {"username": user, "uid": "u-1", "groups": ["system:authenticated"]},
        "dryRun": False,
    }
    if obj is not None:
        req["object"] = obj
    if old is not None:
        req["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}


def pod_of(deployment):
    tmpl = copy.deepcopy(deployment["spec"]["template"])
    tmpl["apiVersion"] = "v1"
    tmpl["kind"] = "Pod"
    tmpl.setdefault("metadata", {})["namespace"] = deployment["metadata"]["namespace"]
    tmpl["metadata"]["generateName"] = deployment["metadata"]["name"] + "-"
    return tmpl


def admission(objects):
    clear("admission_fuzzer")
    policies = [o for _, o in objects if o["kind"] == "AllocatorPolicy"]
    canaries = [o for _, o in objects if o["kind"] == "ReplayCanary"]
    deployments = [o for _, o in objects if o["kind"] == "Deployment"]
    for p in policies:
        p["metadata"]["namespace"] = "team-a"
    for d in deployments:
        d["metadata"]["namespace"] = "team-a"
    def selecting(o):
        """The policies that select o's pods (matchLabels only), or the first example."""
        spec = o.get("spec", {})
        labels = (spec.get("template", {}).get("metadata", {}) if "template" in spec
                  else o.get("metadata", {})).get("labels", {}) or {}
        chosen = [p for p in policies
                  if (p.get("spec", {}).get("selector", {}).get("matchLabels") or {}).items() <= labels.items()
                  and p.get("spec", {}).get("selector", {}).get("matchLabels")]
        return chosen[:2] or policies[:1]

    n = 0
    for stem, o in objects:
        setup = {"policies": selecting(o), "canaries": canaries[:1], "deployments": [], "allowed": True}
        n += 1
        uid = f"seed-{n:04d}"
        kind = o["kind"]
        if kind == "Deployment":
            changed = copy.deepcopy(o)
            c = changed["spec"]["template"]["spec"]["containers"][0]
            c["image"] = c.get("image", "x") + "-next"
            write("admission_fuzzer", f"{stem}-create", {**review(uid, "Deployment", "apps", "v1", "deployments", "CREATE", o), "fuzz": setup})
            held = copy.deepcopy(o)
            held["spec"]["paused"] = True
            held["metadata"].setdefault("annotations", {})["allocguard.io/held-candidate"] = "0123abcd"
            write("admission_fuzzer", f"{stem}-update", {**review(uid + "u", "Deployment", "apps", "v1", "deployments", "UPDATE", changed, held), "fuzz": {**setup, "deployments": [o], "allowed": False}})
            write("admission_fuzzer", f"{stem}-pod", {**review(uid + "p", "Pod", "", "v1", "pods", "CREATE", pod_of(o)), "fuzz": setup})
            # The same template as a held DaemonSet's, and the pod its
            # controller creates while held (rule D4: refused).
            ds = {"apiVersion": "apps/v1", "kind": "DaemonSet",
                  "metadata": {"name": o["metadata"]["name"], "namespace": "team-a", "uid": uid + "-ds",
                               "annotations": {"allocguard.io/held-candidate": "0123abcd"}},
                  "spec": {"selector": o["spec"].get("selector", {}), "updateStrategy": {"type": "OnDelete"},
                           "template": o["spec"]["template"]}}
            ds_pod = pod_of(o)
            ds_pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                                      "name": o["metadata"]["name"], "uid": uid + "-ds",
                                                      "controller": True}]
            enforcing = copy.deepcopy(setup["policies"])
            for p in enforcing:
                p.setdefault("spec", {}).setdefault("rollout", {})["mode"] = "Enforce"
            write("admission_fuzzer", f"{stem}-ds-pod", {**review(uid + "d", "Pod", "", "v1", "pods", "CREATE", ds_pod),
                                                         "fuzz": {**setup, "policies": enforcing, "daemonsets": [ds]}})
        elif kind == "Pod":
            write("admission_fuzzer", f"{stem}-create", {**review(uid, "Pod", "", "v1", "pods", "CREATE", o), "fuzz": setup})
        elif kind == "AllocatorPolicy":
            relaxed = copy.deepcopy(o)
            relaxed.setdefault("spec", {}).setdefault("rollout", {})["mode"] = "Audit"
            write("admission_fuzzer", f"{stem}-create", {**review(uid, kind, "allocguard.io", "v1alpha1", "allocatorpolicies", "CREATE", o), "fuzz": setup})
            write("admission_fuzzer", f"{stem}-update", {**review(uid + "u", kind, "allocguard.io", "v1alpha1", "allocatorpolicies", "UPDATE", relaxed, o), "fuzz": {**setup, "deployments": deployments[:1]}})
        elif kind == "ReplayCanary":
            write("admission_fuzzer", f"{stem}-create", {**review(uid, kind, "allocguard.io", "v1alpha1", "replaycanaries", "CREATE", o), "fuzz": {**setup, "operator": True}})
    write("admission_fuzzer", "not-a-review", {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"})


def policy(objects):
    clear("policy_fuzzer")
    for stem, o in objects:
        if o["kind"] in ("AllocatorPolicy", "ReplayCanary"):
            write("policy_fuzzer", stem, o)
    # A canary of every allocator, each as a variant.
    for stem, o in objects:
        if o["kind"] == "ReplayCanary" and "template" in o.get("spec", {}):
            every = copy.deepcopy(o)
            every["spec"]["canary"]["variants"] = [
                {"name": a, "allocator": {"name": a}} for a in ("glibc", "jemalloc", "mimalloc", "tcmalloc")]
            every["spec"]["canary"]["nodeSelector"] = {"kubernetes.io/arch": "amd64"}
            write("policy_fuzzer", f"{stem}-every-allocator", every)
            every["spec"]["canary"].pop("nodeSelector")
            every["spec"]["canary"]["productionCPUs"] = 16
            write("policy_fuzzer", f"{stem}-production-cpus", every)
            break


def quantities():
    clear("quantity_fuzzer")
    for q in ["512Mi", "1.5Gi", "2G", "1048576", "0.5", "1e3", "-1", "100Ki", "64Mi", "1Ti",
              "9223372036854775807", "8Ei", "7Ei", "1.25k", "500m", ""]:
        write("quantity_fuzzer", re.sub(r"[^A-Za-z0-9.]", "_", q) or "empty", q)


def durations():
    clear("duration_fuzzer")
    for d in ["250ms", "30s", "2m", "1h", "1h30m", "1m0.5s", "30", "15m", "2s", "10m", "0",
              "1.5h", "9223372036854775807ms", "-1s", "1d"]:
        write("duration_fuzzer", re.sub(r"[^A-Za-z0-9.]", "_", d), d)


def kubeconfigs():
    clear("kubeconfig_fuzzer")
    text = (ROOT / "operator" / "kube" / "config_test.cc").read_text()
    for i, m in enumerate(re.finditer(r'R"\((.*?)\)"', text, re.S)):
        if "clusters" in m.group(1) or "contexts" in m.group(1):
            write("kubeconfig_fuzzer", f"config-test-{i}", m.group(1))
    write("kubeconfig_fuzzer", "exec", """apiVersion: v1
kind: Config
current-context: c
clusters: [{name: x, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: /usr/bin/get-token
      args: [--cluster, x]
      env: [{name: A, value: b}]
      interactiveMode: Never
      provideClusterInfo: true
contexts: [{name: c, context: {cluster: x, user: u, namespace: team-a}}]
""")


def csvs():
    clear("sample_csv_fuzzer")
    files = sorted((ROOT / "operator" / "memory" / "testdata").glob("*.csv"))
    cut = []
    for f in files:
        lines = f.read_text().splitlines(keepends=True)
        header = [l for l in lines if l.startswith("#")]
        rows = [l for l in lines if not l.startswith("#")]
        cut.append("".join(header + rows[:40]))
        write("sample_csv_fuzzer", f.stem, cut[-1])
    write("sample_csv_fuzzer", "candidate-and-variant", cut[0] + "=====\n" + cut[1])
    write("sample_csv_fuzzer", "three-files", cut[1] + "=====\n" + cut[0] + "=====\n" + cut[2])


if __name__ == "__main__":
    objects = list(manifests())
    admission(copy.deepcopy(objects))
    policy(copy.deepcopy(objects))
    quantities()
    durations()
    kubeconfigs()
    csvs()
    for d in sorted(OUT.iterdir()):
        print(f"{d.name}: {len(list(d.iterdir()))} inputs")
