#!/usr/bin/env python3
"""Leader kills: SIGKILL operator replicas while canaries run and Deployments are held.

Run by e2e/run.sh during its hold stage (beside the demo canary); runs alone
against a cluster that e2e/run.sh --until govern left up:

    source /tmp/allocguard-node-e2e/env
    e2e/chaos.py [--seed N] [--kills 20] [--follower-kills 3]

It applies e2e/product/chaos-workloads.yaml (three Deployments, each paused at
creation with a canary of its own), then kills the leader replica's process
with SIGKILL (the real signal, sent to the container's process found through
the node's containerd) at seeded random moments, and the follower a few
times. A watcher reads the Lease, the ReplayCanaries, Jobs and Deployments
of the watched namespaces throughout and checks:

  - failover: after a leader kill another live replica (or the restarted
    one, under a new identity) holds the Lease and renews it, within the
    bound (the Lease's duration plus two jittered retry periods: a follower
    counts the lease expired lease_duration after it last saw it change,
    which may be one poll after the last renewal, and polls every
    retry_period x 1.2, operator/kube/leader_election.h; plus 2 s for the
    API round trips), measured from the kill to the new holder's
    acquireTime;
    after a follower kill the leader keeps the Lease;
  - duplicates: never two ReplayCanaries with one spec (target, template,
    allocator, canary settings), never two Jobs (by UID, ever) for one run
    of a canary variant (one Job name: an Inconclusive candidate's rerun is
    a run of its own, `<canary>-candidate-r<n>`, recorded in the variant's
    earlierRuns);
  - lost verdicts: a canary's verdict, and each variant's, once written,
    stays; a canary never disappears; every canary completes;
  - unproven releases: a Deployment seen held and then unpaused has a Flat
    canary for the template it held, and released that template;
  - paused without a reason: a paused Deployment carries the template it
    holds; at the end every paused one has a finished non-Flat canary and a
    RolloutHeld event, and every Flat one is released;
  - restarts: an operator container restarts only when this script killed
    it (exit code 137), and comes back Ready.

A pod that has restarted before is replaced when it is killed (deleted,
once it is a follower) instead of restarting again: the kubelet's crash-loop back-off (10 s,
doubling) would otherwise keep it down for minutes. Exit 0 when every check
passed, 1 otherwise; every wait has a deadline.
"""

import argparse
import hashlib
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime

HERE = os.path.dirname(os.path.abspath(__file__))
RETRY_PERIOD_S = 2.0  # LeaderElectionConfig::retry_period; the chart does not set it
RETRY_JITTER = 1.2
# The API round trips inside the bound: the follower's Lease reads (it sees
# a change when its GET returns), on a loaded 2-core machine.
API_SLACK_S = 2.0
CONTAINERD_SOCK = "/run/allocguard-node/containerd.sock"  # e2e/cluster/node.sh
HELD = "allocguard.io/held-candidate"
RELEASED = "allocguard.io/released-candidate"
CANARY_LABEL = "allocguard.io/canary"
VARIANT_LABEL = "allocguard.io/variant"


def log(msg):
    print(f"chaos: {msg}", flush=True)


def template_digest(template, with_labels=True):
    """api::PodTemplateHash of a pod template, or with_labels=False its
    api::MeasuredTemplateHash (a canary's spec.templateHash): the first 16 hex
    digits of a SHA-256 over its spec, its labels and its allocguard.io/
    annotations as compact JSON with sorted keys (operator/api/deployment.cc;
    deployment_test.cc and chaos_test.py check one vector on both sides)."""
    meta = (template or {}).get("metadata") or {}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith("allocguard.io/")}
    labels = (meta.get("labels") or {}) if with_labels else {}
    canonical = {"annotations": annotations, "labels": labels, "spec": (template or {}).get("spec") or {}}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def kubectl(*args, timeout=30):
    out = subprocess.run(["kubectl", *args], capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


def kubectl_json(*args):
    return json.loads(kubectl(*args, "-o", "json"))


class Failure(Exception):
    pass


def wait_until(timeout, what, fn, interval=0.5):
    """Calls fn until it returns something truthy; Failure naming what was last seen."""
    start = time.monotonic()
    last = None
    while True:
        try:
            got = fn()
            if got:
                return got
            last = got
        except (RuntimeError, subprocess.TimeoutExpired, KeyError, ValueError) as e:
            last = e
        if time.monotonic() - start > timeout:
            raise Failure(f"timed out after {timeout:.0f} s waiting for {what} (last seen: {last})")
        time.sleep(interval)


# --- the operator's replicas ------------------------------------------------------------


class Replicas:
    def __init__(self, ns, lease, selector):
        self.ns, self.lease, self.selector = ns, lease, selector

    def lease_spec(self):
        return kubectl_json("get", "lease", self.lease, "-n", self.ns)["spec"]

    def pods(self):
        """name -> (uid, container status of "operator" or {}, ready, deleting)"""
        out = {}
        for p in kubectl_json("get", "pods", "-n", self.ns, "-l", self.selector)["items"]:
            cs = next((c for c in p["status"].get("containerStatuses", []) if c["name"] == "operator"), {})
            ready = any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
            out[p["metadata"]["name"]] = (p["metadata"]["uid"], cs, ready, "deletionTimestamp" in p["metadata"])
        return out

    def both_ready(self, want=2):
        pods = self.pods()
        live = [n for n, (_, cs, ready, deleting) in pods.items() if ready and not deleting and "running" in cs.get("state", {})]
        return live if len(live) == want and len(pods) == want else None

    def leader(self):
        holder = self.lease_spec().get("holderIdentity") or ""
        return holder, holder.rsplit("_", 1)[0] if holder else ""


def container_pid(container_id):
    """The host PID of a container's init process, from the node's containerd."""
    out = subprocess.run(
        ["ctr", "--address", CONTAINERD_SOCK, "--namespace", "k8s.io", "task", "ls"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout
    for line in out.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 3 and fields[0] == container_id and fields[2] == "RUNNING":
            return int(fields[1])
    return None


def sigkill_container(container_id):
    pid = container_pid(container_id)
    if pid is None:
        raise Failure(f"no running task for container {container_id} in containerd")
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
    if "allocguard" not in cmdline:
        raise Failure(f"container {container_id}'s process {pid} is not the operator: {cmdline}")
    os.kill(pid, signal.SIGKILL)
    return pid


# --- the watcher: invariants over what the cluster shows --------------------------------


class Watcher(threading.Thread):
    def __init__(self, namespaces, interval):
        super().__init__(daemon=True)
        self.namespaces, self.interval = set(namespaces), interval
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.violations = {"duplicates": [], "lost verdicts": [], "unproven releases": [], "paused without a reason": []}
        self.canary_specs = {}  # (ns, spec digest) -> set of canary names
        self.job_uids = {}  # (ns, canary, variant, Job name) -> set of Job UIDs
        self.verdicts = {}  # (ns, canary) -> (uid, verdict, {variant: verdict})
        self.held_seen = {}  # (ns, deployment) -> template hash last seen held
        self.canaries = {}  # last snapshot: (ns, name) -> object
        self.deployments = {}
        self.snapshots = 0
        self.errors = 0

    def flag(self, kind, what):
        if what not in self.violations[kind]:
            self.violations[kind].append(what)
            log(f"VIOLATION ({kind}): {what}")

    def counts(self):
        with self.lock:
            return {k: len(v) for k, v in self.violations.items()}

    def run(self):
        while not self.stop.is_set():
            try:
                self.snapshot()
            except (RuntimeError, subprocess.TimeoutExpired, ValueError):
                self.errors += 1  # the API server is fine; a kubectl hiccup is retried
            self.stop.wait(self.interval)

    def snapshot(self):
        items = kubectl_json("get", "replaycanaries.allocguard.io,jobs,deployments", "-A")["items"]
        items = [o for o in items if o["metadata"]["namespace"] in self.namespaces]
        with self.lock:
            self.check(items)
            self.snapshots += 1

    def check(self, items):
        canaries, deployments = {}, {}
        for o in items:
            ns, name = o["metadata"]["namespace"], o["metadata"]["name"]
            if o["kind"] == "ReplayCanary":
                canaries[(ns, name)] = o
            elif o["kind"] == "Deployment":
                deployments[(ns, name)] = o
            elif o["kind"] == "Job":
                labels = o["metadata"].get("labels", {})
                if CANARY_LABEL in labels:
                    key = (ns, labels[CANARY_LABEL], labels.get(VARIANT_LABEL, ""), name)
                    uids = self.job_uids.setdefault(key, set())
                    uids.add(o["metadata"]["uid"])
                    if len(uids) > 1:
                        self.flag("duplicates", f"{len(uids)} Jobs (UIDs) named {name} for canary {key[1]} "
                                                f"variant {key[2]} in {ns}")
        for (ns, name), c in canaries.items():
            spec = c.get("spec", {})
            if not spec.get("templateHash"):
                continue  # not the operator's (e.g. a malformed one a test applies)
            digest = json.dumps(spec, sort_keys=True)
            names = self.canary_specs.setdefault((ns, digest), set())
            names.add(name)
            if len(names) > 1:
                self.flag("duplicates", f"ReplayCanaries {sorted(names)} in {ns} have one spec (template {spec['templateHash']})")
            status = c.get("status", {})
            uid = c["metadata"]["uid"]
            variants = {v.get("name"): v.get("verdict") for v in status.get("variants", []) if v.get("verdict")}
            before = self.verdicts.get((ns, name))
            if before:
                b_uid, b_verdict, b_variants = before
                if uid != b_uid:
                    self.flag("lost verdicts", f"canary {ns}/{name} was created again (uid {b_uid} -> {uid})")
                if b_verdict and status.get("verdict") != b_verdict:
                    self.flag("lost verdicts", f"canary {ns}/{name}: verdict {b_verdict} became '{status.get('verdict')}'")
                for v, verdict in b_variants.items():
                    if variants.get(v) != verdict:
                        self.flag("lost verdicts", f"canary {ns}/{name} variant {v}: {verdict} became '{variants.get(v)}'")
                variants = {**b_variants, **variants}
                verdict = b_verdict or status.get("verdict")
            else:
                verdict = status.get("verdict")
            self.verdicts[(ns, name)] = (uid, verdict, variants)
        for key, (uid, verdict, _) in self.verdicts.items():
            if key not in canaries and (verdict or key in self.canaries):
                self.flag("lost verdicts", f"canary {key[0]}/{key[1]} (verdict '{verdict}') is gone")
        for (ns, name), d in deployments.items():
            ann = d["metadata"].get("annotations", {})
            paused = d["spec"].get("paused", False)
            if paused:
                if not ann.get(HELD):
                    self.flag("paused without a reason", f"{ns}/{name} is paused with no {HELD} annotation")
                else:
                    self.held_seen[(ns, name)] = ann[HELD]
            elif (ns, name) in self.held_seen:
                held = self.held_seen[(ns, name)]
                released = ann.get(RELEASED)
                # A canary's templateHash is the held template as measured
                # (labels aside): known when the template is still the held one.
                measured = {held}
                template = d["spec"].get("template")
                if template is not None and template_digest(template) == held:
                    measured.add(template_digest(template, with_labels=False))
                flat = [
                    cn for (cns, cn), c in canaries.items()
                    if cns == ns and (c["spec"].get("target", {}).get("name") == name
                                      or name in [o.get("name") for o in c["metadata"].get("ownerReferences", [])])
                    and c["spec"].get("templateHash") in measured and c.get("status", {}).get("verdict") == "Flat"
                ]
                if released != held or not flat:
                    self.flag("unproven releases", f"{ns}/{name} unpaused: held {held}, released '{released}', Flat canaries {flat}")
        self.canaries, self.deployments = canaries, deployments


# --- the kills ---------------------------------------------------------------------------


class Chaos:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.replicas = Replicas(args.system_namespace, args.lease, args.selector)
        self.watcher = Watcher([args.namespace, *args.watch_namespace], args.watch_interval)
        self.expected_restarts = {}  # pod uid -> restarts caused by this script
        self.rows = []
        self.start = time.monotonic()

    def setup(self):
        a = self.args
        if subprocess.run(["kubectl", "get", "namespace", a.namespace], capture_output=True).returncode != 0:
            kubectl("create", "namespace", a.namespace)
        wait_until(60, f"the default ServiceAccount in {a.namespace}",
                   lambda: kubectl("get", "serviceaccount", "default", "-n", a.namespace))
        # Policies first (a Deployment created under an Enforce policy is held at creation).
        applied = kubectl("apply", "-n", a.namespace, "-o", "name", "-f", os.path.join(HERE, "product", "chaos-workloads.yaml"))
        self.deployments = [n.split("/", 1)[1] for n in applied.split() if n.startswith("deployment.apps/")]
        if len(self.deployments) < 2:
            raise Failure(f"chaos-workloads.yaml names {self.deployments}")
        policies = kubectl_json("get", "allocatorpolicies.allocguard.io", "-n", a.namespace)["items"]

        def ready_policies():
            got = kubectl_json("get", "allocatorpolicies.allocguard.io", "-n", a.namespace)["items"]
            return all(any(c["type"] == "Ready" and c["status"] == "True" for c in p.get("status", {}).get("conditions", []))
                       for p in got) and got

        wait_until(60, f"the {len(policies)} chaos policies Ready", ready_policies)
        # Applied together, a Deployment may reach the webhook before its policy is
        # in the cache; such a one is running, not held: change its template once.
        time.sleep(2)
        for name in self.deployments:
            d = kubectl_json("get", "deployment", name, "-n", a.namespace)
            if not d["spec"].get("paused"):
                log(f"{name} was admitted before its policy was cached: changing its template to hold it")
                kubectl("set", "env", "-n", a.namespace, f"deployment/{name}", "CHAOS_HELD=1")

        def all_held():
            out = []
            for name in self.deployments:
                d = kubectl_json("get", "deployment", name, "-n", a.namespace)
                if not d["spec"].get("paused") or not d["metadata"].get("annotations", {}).get(HELD):
                    return None
                out.append(name)
            return out

        wait_until(60, f"the chaos Deployments {self.deployments} held", all_held)

        def canaries_running():
            cs = kubectl_json("get", "replaycanaries.allocguard.io", "-n", a.namespace)["items"]
            running = [c["metadata"]["name"] for c in cs if c.get("status", {}).get("phase") == "Running"]
            return running if len(cs) == len(self.deployments) and len(running) >= 2 else None

        running = wait_until(240, "a canary for each chaos Deployment, two of them running", canaries_running, 2)
        log(f"held: {', '.join(self.deployments)}; canaries running: {', '.join(running)}")
        live = wait_until(120, "both operator replicas Ready", self.replicas.both_ready)
        pods = self.replicas.pods()
        for name in live:
            self.expected_restarts[pods[name][0]] = pods[name][1].get("restartCount", 0)

    def elapsed(self):
        return time.monotonic() - self.start

    def check_restarts(self):
        """Every operator container's restarts are this script's kills, each exit 137."""
        for name, (uid, cs, _, deleting) in self.replicas.pods().items():
            if deleting:
                continue
            got = cs.get("restartCount", 0)
            want = self.expected_restarts.setdefault(uid, 0)
            if got != want:
                last = cs.get("lastState", {}).get("terminated", {})
                raise Failure(f"operator pod {name} restarted {got} times, {want} of them killed by this test; "
                              f"last termination: {last.get('reason')} exit {last.get('exitCode')}")
            if got and cs.get("lastState", {}).get("terminated", {}).get("exitCode") != 137:
                raise Failure(f"operator pod {name}'s last termination was not the SIGKILL: {cs.get('lastState')}")

    def kill(self, number, which):
        a = self.args
        self.check_restarts()
        wait_until(180, "both operator replicas Ready", self.replicas.both_ready)
        time.sleep(self.rng.uniform(a.min_gap, a.max_gap))  # a random moment
        live = wait_until(60, "both operator replicas Ready", self.replicas.both_ready)
        holder, leader_pod = wait_until(60, "a leader", lambda: (lambda h: h if h[0] else None)(self.replicas.leader()))
        if leader_pod not in live:
            raise Failure(f"the Lease names {holder}, not one of the Ready replicas {live}")
        target = leader_pod if which == "leader" else next(n for n in live if n != leader_pod)
        pods = self.replicas.pods()
        uid, cs, _, _ = pods[target]
        container_id = cs.get("containerID", "").split("://", 1)[-1]
        renew_before = self.replicas.lease_spec().get("renewTime")
        t_kill = time.monotonic()
        t_kill_wall = time.time()  # the node's clock: the operator's acquireTime uses it too
        pid = sigkill_container(container_id)
        self.expected_restarts[uid] = self.expected_restarts.get(uid, 0) + 1
        bound = None
        if which == "leader":
            duration = self.replicas.lease_spec().get("leaseDurationSeconds", 15)
            bound = duration + 2 * RETRY_PERIOD_S * RETRY_JITTER + API_SLACK_S

            def new_leader():
                spec = self.replicas.lease_spec()
                h = spec.get("holderIdentity") or ""
                if h and h != holder and spec.get("renewTime") != renew_before:
                    return spec
                return None

            spec = wait_until(bound + 30, f"a new leader after killing {holder}", new_leader, 0.25)
            seen = time.monotonic() - t_kill
            new_holder = spec["holderIdentity"]
            # Failover: from the kill to the moment the new holder took the Lease
            # (its acquireTime, written by the operator from the same clock), not
            # to when this script's poll happened to see it.
            acquired = spec.get("acquireTime")
            failover = seen
            if acquired:
                failover = datetime.fromisoformat(acquired.replace("Z", "+00:00")).timestamp() - t_kill_wall
            new_pod = new_holder.rsplit("_", 1)[0]
            pods = self.replicas.pods()
            if new_pod not in pods or "running" not in pods[new_pod][1].get("state", {}):
                raise Failure(f"the Lease went to {new_holder}, not a live replica")
            within = failover <= bound
        else:
            # The leader keeps the Lease and renews it while the follower is down.
            def renewed():
                spec = self.replicas.lease_spec()
                if spec.get("holderIdentity") != holder:
                    raise Failure(f"killing the follower moved the Lease from {holder} to {spec.get('holderIdentity')}")
                return spec.get("renewTime") != renew_before

            wait_until(30, f"{holder} renewing the Lease after the follower's kill", renewed, 0.25)
            failover, seen, new_holder, within = None, None, holder, True
        # The kubelet notices a killed container within its relist period and
        # only then counts the restart; until it does, the pod still reads
        # Ready and running. A follower's kill is over (the leader renewed)
        # sooner than that, so wait for the kubelet before looking again.
        def kill_registered():
            now = self.replicas.pods().get(target)
            if now is None or now[3]:
                return True  # gone or going: nothing more to count on it
            return (now[1].get("restartCount", 0) > cs.get("restartCount", 0)
                    or now[1].get("containerID") != cs.get("containerID"))

        wait_until(60, f"the kubelet registering the kill of {target}'s container", kill_registered, 0.25)
        replaced = ""
        if cs.get("restartCount", 0) >= 1 and new_holder.rsplit("_", 1)[0] != target:
            # Its next restart would wait out the kubelet's back-off: a new pod instead.
            kubectl("delete", "pod", target, "-n", a.system_namespace, "--wait=false")
            replaced = " (replaced)"
        wait_until(180, "both operator replicas Ready again", self.replicas.both_ready)
        if replaced:
            for name, (puid, _, _, _) in self.replicas.pods().items():
                self.expected_restarts.setdefault(puid, 0)
        self.check_restarts()
        try:
            self.watcher.snapshot()  # a look at the state after this kill, beside the watcher's own
        except (RuntimeError, subprocess.TimeoutExpired, ValueError):
            time.sleep(2 * a.watch_interval)  # then the watcher's next look
        counts = self.watcher.counts()
        row = {
            "n": number, "which": which, "pod": target + replaced, "pid": pid, "at": self.elapsed() - (time.monotonic() - t_kill),
            "failover": failover, "within": within, "bound": bound, "new": new_holder, **counts,
        }
        self.rows.append(row)
        fo = (f"{failover:.1f} s (bound {bound:.1f} s; seen by this script after {seen:.1f} s)"
              if failover is not None else "no failover (leader kept the Lease)")
        log(f"kill {number:2d} ({which}) {target}{replaced} pid {pid} at {row['at']:.0f} s: {fo}; leader now {new_holder}; "
            f"duplicates {counts['duplicates']}, lost verdicts {counts['lost verdicts']}, "
            f"unproven releases {counts['unproven releases']}, paused without a reason {counts['paused without a reason']}")
        if not within:
            raise Failure(f"failover took {failover:.1f} s, over the bound of {bound:.1f} s")

    def check_reruns(self):
        """Every rerun Job seen (`<canary>-<variant>-r<n>`) follows a run its canary recorded
        in the variant's earlierRuns: a second Job for a variant is a rerun, never a
        duplicate launch. The status is written before the rerun's Job is created, so a
        list taken after the Jobs were seen shows it."""
        w = self.watcher
        recorded = {}
        for ns in w.namespaces:
            for c in kubectl_json("get", "replaycanaries.allocguard.io", "-n", ns)["items"]:
                for v in c.get("status", {}).get("variants", []):
                    jobs = {r.get("job") for r in v.get("earlierRuns", [])}
                    recorded[(ns, c["metadata"]["name"], v.get("name", ""))] = jobs
        with w.lock:
            for (ns, canary, variant, name) in sorted(w.job_uids):
                m = re.fullmatch(re.escape(f"{canary}-{variant}") + r"-r([0-9]+)", name)
                if not m:
                    continue
                n = int(m.group(1))
                before = f"{canary}-{variant}" + (f"-r{n - 1}" if n > 1 else "")
                if before not in recorded.get((ns, canary, variant), set()):
                    w.flag("duplicates", f"Job {name} in {ns} reruns {before}, which canary {canary} "
                                         f"does not record in variant {variant}'s earlierRuns")

    def finish(self):
        """Every chaos canary completes; Flat releases, the rest stay held with a reason."""
        a = self.args

        def all_done():
            cs = kubectl_json("get", "replaycanaries.allocguard.io", "-n", a.namespace)["items"]
            pending = [c["metadata"]["name"] for c in cs if c.get("status", {}).get("phase") not in ("Completed", "Failed")]
            return cs if not pending else None

        canaries = wait_until(a.canary_timeout, "every chaos canary finished", all_done, 5)
        time.sleep(2 * a.watch_interval)
        by_target = {c["spec"]["target"]["name"]: c for c in canaries}
        results = []
        for name in self.deployments:
            c = by_target.get(name)
            if c is None:
                raise Failure(f"no canary for {name}")
            verdict = c["status"].get("verdict")

            def settled():
                d = kubectl_json("get", "deployment", name, "-n", a.namespace)
                paused = d["spec"].get("paused", False)
                if verdict == "Flat":
                    template = d["spec"].get("template")
                    proven = (d["metadata"].get("annotations", {}).get(RELEASED) == template_digest(template)
                              and template_digest(template, with_labels=False) == c["spec"]["templateHash"])
                    return "released" if not paused and proven else None
                if not paused:
                    return None
                events = kubectl_json("get", "events", "-n", a.namespace, "--field-selector", f"involvedObject.name={name}")["items"]
                held = [e["message"] for e in events if e.get("reason") == "RolloutHeld"]
                return "held: " + held[-1] if held else None

            try:
                state = wait_until(60, f"{name} released (Flat) or held with a RolloutHeld event", settled, 2)
            except Failure as e:
                with self.watcher.lock:
                    self.watcher.flag("paused without a reason" if verdict != "Flat" else "unproven releases", str(e))
                state = "unsettled"
            results.append((name, c["metadata"]["name"], c["status"].get("phase"), verdict, state))
        return results

    def report(self, results):
        print()
        print(f"== leader kills (seed {self.args.seed}): {sum(r['which'] == 'leader' for r in self.rows)} leader kills, "
              f"{sum(r['which'] == 'follower' for r in self.rows)} follower kills, "
              f"{self.watcher.snapshots} watcher snapshots over {self.elapsed():.0f} s")
        print(f"  {'kill':>4}  {'which':8}  {'at':>6}  {'failover':>8}  {'pod killed':38}  new leader")
        for r in self.rows:
            fo = f"{r['failover']:.1f} s" if r["failover"] is not None else "-"
            print(f"  {r['n']:>4}  {r['which']:8}  {r['at']:>5.0f}s  {fo:>8}  {r['pod']:38}  {r['new']}")
        times = [r["failover"] for r in self.rows if r["failover"] is not None]
        counts = self.watcher.counts()
        print()
        print("| kills | failover min / median / max | bound | duplicates | lost verdicts | unproven releases | paused without a reason |")
        print("|---|---|---|---|---|---|---|")
        bound = max((r["bound"] for r in self.rows if r["bound"]), default=0)
        ft = f"{min(times):.1f} / {statistics.median(times):.1f} / {max(times):.1f} s" if times else "-"
        print(f"| {len(times)} leader + {len(self.rows) - len(times)} follower | {ft} | {bound:.1f} s | "
              f"{counts['duplicates']} | {counts['lost verdicts']} | {counts['unproven releases']} | {counts['paused without a reason']} |")
        print()
        for name, canary, phase, verdict, state in results:
            print(f"  {name}: canary {canary} {phase}, verdict {verdict}; {state}")
        for kind, items in self.watcher.violations.items():
            for what in items:
                print(f"  VIOLATION ({kind}): {what}")
        return not any(counts.values())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, default=int(os.environ.get("ALLOCGUARD_CHAOS_SEED", "0")) or None)
    p.add_argument("--kills", type=int, default=20, help="leader kills")
    p.add_argument("--follower-kills", type=int, default=3)
    p.add_argument("--namespace", default="allocguard-chaos", help="where the chaos Deployments go")
    p.add_argument("--watch-namespace", action="append", default=[], help="more namespaces to check (e.g. the demo's)")
    p.add_argument("--system-namespace", default="allocguard-system")
    p.add_argument("--lease", default="allocguard-operator")
    p.add_argument("--selector", default="app.kubernetes.io/name=allocguard")
    p.add_argument("--min-gap", type=float, default=1.0, help="seconds, before a kill, at least")
    p.add_argument("--max-gap", type=float, default=12.0)
    p.add_argument("--watch-interval", type=float, default=2.0)
    p.add_argument("--canary-timeout", type=float, default=900, help="seconds for the chaos canaries to finish after the kills")
    p.add_argument("--cleanup", action="store_true", help="delete the chaos namespace at the end")
    args = p.parse_args()
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 1 << 31)
    log(f"seed {args.seed} (again: --seed {args.seed} or ALLOCGUARD_CHAOS_SEED={args.seed})")
    chaos = Chaos(args)
    ok = False
    try:
        chaos.setup()
        chaos.watcher.start()
        order = ["leader"] * args.kills
        for _ in range(args.follower_kills):
            order.insert(chaos.rng.randrange(1, len(order) + 1), "follower")
        for i, which in enumerate(order, 1):
            chaos.kill(i, which)
        log("kills done; waiting for every chaos canary to finish")
        results = chaos.finish()
        chaos.watcher.stop.set()
        chaos.watcher.join(30)
        chaos.watcher.snapshot()  # one last look, after the last verdicts
        chaos.check_reruns()
        ok = chaos.report(results)
    except (Failure, RuntimeError, subprocess.SubprocessError) as e:
        log(f"FAILED: {e}")
        chaos.watcher.stop.set()
        chaos.report([])
    finally:
        if args.cleanup:
            subprocess.run(["kubectl", "delete", "namespace", args.namespace, "--wait=false"], capture_output=True)
    print(f"chaos: {'passed' if ok else 'FAILED'} (seed {args.seed})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
