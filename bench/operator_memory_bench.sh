#!/usr/bin/env bash
# The operator's memory idle and with N governed Deployments (default 10 000).
#
#   bench/operator_memory_bench.sh [--deployments N] [--batch 500] [--parallel 2]
#                                  [--mode Audit|Enforce|Off] [--allocguard PATH]
#                                  [--no-operator] [--no-webhooks] [--present] [--pods N]
#                                  [--templates N]
#                                  [--peer full|strip|metadata|metadata-strip [--peer-restart]]
#
# Starts a control plane of its own (e2e/cluster/up.sh; no kubelet, no
# controller-manager, so no ReplicaSets or Pods appear), applies crds/, an
# AllocatorPolicy selecting app=bench (rollout mode Audit unless --mode says
# otherwise; in Audit each new Deployment gets a ReplayCanary and its Jobs,
# in Off only the informers and the policy's status see them), starts
# `allocguard operator` against it, and prints the operator's VmRSS and
# RssAnon idle and after the Deployments exist, the bytes per Deployment,
# how long the creation took, and the apiserver's and etcd's RSS beside them;
# then, over 60 s more, the operator's CPU and its canary reconciles a second.
# The operator registers its admission webhooks by URL (as a local process
# does), so every Deployment created passes its Deployment gate;
# --no-webhooks leaves them unregistered. --no-operator measures only the
# control plane and the creation. --present creates the Deployments first and
# then starts the operator, so its initial list carries all of them (no idle
# figure then; per Deployment is its whole RSS over the count).
#
# --templates N gives the Deployments N distinct pod templates (Deployment i
# gets template i mod N: its image and one env value), as a fleet of
# identical services or a template stamped per tenant would have; each keeps
# labels of its own (app=bench, instance=bench-<i>), which no canary
# measures. Without it every Deployment's template is distinct.
#
# --pods N creates N bare Pods labelled app=bench instead of Deployments (the
# same container; with no scheduler they stay Pending, so their status is
# short) and waits for allocguard_cached_pods: the operator's Pod cache,
# which holds every Pod of the cluster, and the Pod webhook that injects
# each of them.
#
# --peer runs the controller-runtime peer's Deployment informer
# (bench/peers, `peers informer --mode M`, built by bench/peers/build.sh)
# instead of the operator, everything else the same; it registers no
# webhooks, and "operator" in the report means the peer. --peer-restart then
# stops the peer and starts it again with the Deployments present, and
# samples it once more when it holds them all and its RSS has settled.
#
# The operator binary defaults to build/release/operator/cli/allocguard,
# built (RelWithDebInfo, -j2) when missing; another --allocguard path must exist. Everything it starts is stopped on exit.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

deployments=10000
kind=Deployment
batch=500
parallel=2
with_operator=1
with_webhooks=1
present=0
mode=Audit
allocguard=$repo/build/release/operator/cli/allocguard
governed_metric=${ALLOCGUARD_GOVERNED_METRIC:-allocguard_cached_deployments}
peer=
peer_restart=0
templates=0
while (($#)); do
  case $1 in
    --deployments) deployments=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --parallel) parallel=$2; shift 2 ;;
    --allocguard) allocguard=$2; shift 2 ;;
    --no-operator) with_operator=0; shift ;;
    --no-webhooks) with_webhooks=0; shift ;;
    --present) present=1; shift ;;
    --mode) mode=$2; shift 2 ;;
    --pods) kind=Pod; deployments=$2; governed_metric=allocguard_cached_pods; shift 2 ;;
    --peer) peer=$2; with_webhooks=0; governed_metric=peer_cached_deployments; shift 2 ;;
    --peer-restart) peer_restart=1; shift ;;
    --templates) templates=$2; shift 2 ;;
    *) echo "operator_memory_bench: unknown argument $1" >&2; exit 2 ;;
  esac
done

export ALLOCGUARD_CLUSTER_DIR=${ALLOCGUARD_CLUSTER_DIR:-/tmp/ag-operator-memory-bench}
work=$(mktemp -d /tmp/ag-operator-memory-bench.XXXXXX)
operator_pid=
cleanup() {
  if [[ -n $operator_pid ]] && kill -0 "$operator_pid" 2>/dev/null; then
    kill -TERM "$operator_pid" 2>/dev/null || true
    for ((i = 0; i < 40; i++)); do kill -0 "$operator_pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$operator_pid" 2>/dev/null || true
  fi
  "$repo/e2e/cluster/down.sh" >/dev/null 2>&1 || true
  if [[ -n ${ALLOCGUARD_BENCH_KEEP:-} ]]; then
    echo "operator_memory_bench: kept $work" >&2
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT

log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }
now() { date +%s.%N; }
# VmRSS and RssAnon of a process in KiB: "<rss> <anon>".
mem_kib() {
  awk '/^VmRSS:/ {r = $2} /^RssAnon:/ {a = $2} END {print r + 0, a + 0}' "/proc/$1/status"
}
mib() { awk -v k="$1" 'BEGIN {printf "%.1f MiB", k / 1024}'; }
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
# The CPU time (user + system, in clock ticks) process $1 has used.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# The sum of the series of metric $1 (with or without labels) on the
# operator's /metrics; 0 when it is not exported or not answering.
metric_sum() {
  curl -fs "http://127.0.0.1:$metrics_port/metrics" 2>/dev/null |
    awk -v m="$1" '$1 == m || index($1, m "{") == 1 {s += $2} END {print s + 0}'
}
# The canary reconciler's reconciles so far, every result.
canary_reconciles() {
  curl -fs "http://127.0.0.1:$metrics_port/metrics" 2>/dev/null |
    awk 'index($1, "allocguard_reconcile_total{") == 1 && index($1, "controller=\"canary\"") {s += $2}
         END {print s + 0}'
}
# Whether RSS has settled: the last 11 of the samples given (KiB, 2 s apart,
# so 20 s) lie within 1 MiB or 1 % of the highest of them.
rss_settled() {
  (($# >= 11)) || return 1
  printf '%s\n' "${@: -11}" | awk '
    NR == 1 {lo = hi = $1} {if ($1 < lo) lo = $1; if ($1 > hi) hi = $1}
    END {exit !((hi - lo) <= 1024 || (hi - lo) <= hi / 100)}'
}

# --- operator binary ----------------------------------------------------------
if ((with_operator)) && [[ -n $peer ]]; then
  peers=$("$repo/bench/peers/build.sh")
elif ((with_operator)); then
  if [[ ! -x $allocguard && $allocguard == "$repo/build/release/operator/cli/allocguard" ]]; then
    # The release tree as scripts/test.sh configures it, not another build type.
    log "building $allocguard"
    cmake -S "$repo" -B "$repo/build/release" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    cmake --build "$repo/build/release" -j2 --target allocguard >/dev/null
  elif [[ ! -x $allocguard ]]; then
    echo "operator_memory_bench: $allocguard is not an executable" >&2
    exit 2
  fi
  if ! "$allocguard" operator --help >/dev/null 2>&1; then
    echo "operator_memory_bench: $allocguard has no 'operator' subcommand; use --no-operator" >&2
    exit 1
  fi
fi

# --- control plane ------------------------------------------------------------
"$repo/e2e/cluster/down.sh" >/dev/null 2>&1 || true
log "starting a control plane in $ALLOCGUARD_CLUSTER_DIR"
"$repo/e2e/cluster/up.sh" >&2
# shellcheck disable=SC1091
source "$ALLOCGUARD_CLUSTER_DIR/env"
apiserver_pid=$(cat "$ALLOCGUARD_CLUSTER_DIR/kube-apiserver.pid")
etcd_pid=$(cat "$ALLOCGUARD_CLUSTER_DIR/etcd.pid")

kubectl apply -f "$repo/crds/" >/dev/null
for crd in $(kubectl get crd -o name | grep allocguard.io); do
  kubectl wait --for condition=Established --timeout=60s "$crd" >/dev/null
done
operator_ns=allocguard-system
bench_ns=allocguard-bench
kubectl create namespace "$operator_ns" >/dev/null
kubectl create namespace "$bench_ns" >/dev/null
# Without a controller-manager nobody creates the namespace's default
# ServiceAccount, which the API server requires of a Pod.
[[ $kind == Pod ]] && kubectl create serviceaccount default -n "$bench_ns" >/dev/null
kubectl apply -f - >/dev/null <<YAML
apiVersion: allocguard.io/v1alpha1
kind: AllocatorPolicy
metadata:
  name: bench-jemalloc
  namespace: $bench_ns
spec:
  selector:
    matchLabels:
      app: bench
  allocator:
    name: jemalloc
  rollout:
    mode: "$mode"
  canary:
    load:
      port: 8080
      requests:
        - name: health
          path: /healthz
YAML

# --- operator, idle -----------------------------------------------------------
probe_port=$(free_port)
metrics_port=$(free_port)
webhook_port=$(free_port)
start_peer() {
  log "starting the controller-runtime peer: $peers informer --mode $peer"
  "$peers" informer --mode "$peer" --kubeconfig "$KUBECONFIG" \
    --health-probe-bind-address "127.0.0.1:$probe_port" \
    --metrics-bind-address "127.0.0.1:$metrics_port" >>"$work/operator.log" 2>&1 &
  operator_pid=$!
}
idle_rss=0
idle_anon=0
start_operator() {
  if [[ -n $peer ]]; then
    start_peer
  else
    log "starting $allocguard operator"
    webhook_flags=()
    if ((with_webhooks)); then
      webhook_flags=(--webhook-url "https://127.0.0.1:$webhook_port" --webhook-extra-san 127.0.0.1)
    fi
    # No --leader-elect: one replica. Watches every namespace.
    "$allocguard" operator --kubeconfig "$KUBECONFIG" \
      --operator-namespace "$operator_ns" --image allocguard:bench \
      --health-probe-bind-address "127.0.0.1:$probe_port" \
      --metrics-bind-address "127.0.0.1:$metrics_port" \
      --webhook-bind-address "127.0.0.1:$webhook_port" \
      "${webhook_flags[@]}" >"$work/operator.log" 2>&1 &
    operator_pid=$!
  fi
  for ((i = 0; ; i++)); do
    if curl -fs "http://127.0.0.1:$probe_port/readyz" >/dev/null 2>&1; then break; fi
    if ! kill -0 "$operator_pid" 2>/dev/null || ((i >= 480)); then
      echo "operator_memory_bench: the operator did not become ready; its log:" >&2
      tail -n 30 "$work/operator.log" >&2
      exit 1
    fi
    sleep 0.25
  done
}
if ((with_operator && !present)); then
  start_operator
  log "operator ready; letting it settle for 10 s"
  sleep 10
  read -r idle_rss idle_anon < <(mem_kib "$operator_pid")
fi

# --- Deployments --------------------------------------------------------------
# Files of $batch Deployments each, as a user's manifests would look: one
# container with ports, resources, env and probes (about 1.5 KiB in etcd).
log "writing $deployments ${kind}s in files of $batch"
python3 - "$work" "$deployments" "$batch" "$bench_ns" "$kind" "$templates" <<'PY'
import sys
work, total, batch, ns, kind = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
templates = int(sys.argv[6])
pod = """apiVersion: v1
kind: Pod
metadata:
  name: bench-{i:05d}
  namespace: {ns}
  labels: {{app: bench, instance: bench-{i:05d}}}
spec:
  containers:
  - name: server
    image: registry.example/bench/server:1.{i}
    ports: [{{containerPort: 8080, name: http}}]
    env: [{{name: MODE, value: production}}, {{name: INSTANCE, value: bench-{i:05d}}}]
    resources:
      requests: {{cpu: 100m, memory: 128Mi}}
      limits: {{memory: 512Mi}}
    readinessProbe:
      httpGet: {{path: /healthz, port: 8080}}
"""
doc = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: bench-{i:05d}
  namespace: {ns}
  labels: {{app: bench, tier: backend}}
spec:
  replicas: 2
  selector:
    matchLabels: {{app: bench, instance: bench-{i:05d}}}
  template:
    metadata:
      labels: {{app: bench, instance: bench-{i:05d}}}
    spec:
      containers:
      - name: server
        image: registry.example/bench/server:1.{t}
        ports: [{{containerPort: 8080, name: http}}]
        env: [{{name: MODE, value: production}}, {{name: INSTANCE, value: bench-{t:05d}}}]
        resources:
          requests: {{cpu: 100m, memory: 128Mi}}
          limits: {{memory: 512Mi}}
        readinessProbe:
          httpGet: {{path: /healthz, port: 8080}}
"""
if kind == "Pod":
    doc = pod
for start in range(0, total, batch):
    with open(f"{work}/deployments-{start:05d}.yaml", "w") as f:
        f.write("---\n".join(doc.format(i=i, t=i % templates if templates > 0 else i, ns=ns)
                              for i in range(start, min(total, start + batch))))
PY

read -r api_rss_before _ < <(mem_kib "$apiserver_pid")
read -r etcd_rss_before _ < <(mem_kib "$etcd_pid")
log "creating $deployments ${kind}s, $parallel kubectl at a time"
t0=$(now)
ls "$work"/deployments-*.yaml |
  xargs -P "$parallel" -I{} sh -c 'kubectl create -f "$1" >/dev/null' _ {}
t1=$(now)
created=$(kubectl get "$kind" -n "$bench_ns" --no-headers 2>/dev/null | wc -l)
create_seconds=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')
log "created $created ${kind}s in ${create_seconds} s"
object_bytes=$(kubectl get "$kind" -n "$bench_ns" bench-00000 -o json | wc -c)

# --- operator, with the Deployments -----------------------------------------
# Waits until the operator's Deployment-count gauge reaches $deployments (or
# it is not exported), then until its RSS has moved by at most 1 % (or 1 MiB)
# over 20 s, for at most 5 minutes.
seen_by=
settled=
if ((with_operator)); then
  t2=$(now)
  ((present)) && start_operator
  log "waiting for the operator to take in the ${kind}s"
  samples=()
  for ((i = 0; i < 150; i++)); do
    sleep 2
    kill -0 "$operator_pid" 2>/dev/null || { echo "operator exited" >&2; tail -n 30 "$work/operator.log" >&2; exit 1; }
    governed=$(metric_sum "$governed_metric")
    read -r rss _ < <(mem_kib "$operator_pid")
    samples+=("$rss")
    ((i % 5 == 4)) && log "operator VmRSS $(mib "$rss"), $governed_metric $governed"
    if ((governed >= deployments)) && [[ -z $seen_by ]]; then
      seen_by=$(awk -v a="$t2" -v b="$(now)" 'BEGIN {printf "%.0f", b - a}')
      log "the operator reports $governed ${kind}s after ${seen_by} s"
    fi
    if rss_settled "${samples[@]}"; then
      settled=$(awk -v a="$t2" -v b="$(now)" 'BEGIN {printf "%.0f", b - a}')
      break
    fi
  done
  read -r full_rss full_anon < <(mem_kib "$operator_pid")
  peak_rss=$(awk '/^VmHWM:/ {print $2}' "/proc/$operator_pid/status")
  # What the operator does once all is in: its CPU and its canary
  # reconciles over the next 60 s (a queue of canaries waiting for a slot
  # shows here).
  cpu0=$(cpu_ticks "$operator_pid")
  reconciles0=$(canary_reconciles)
  sleep 60
  steady_cpu=$(awk -v a="$cpu0" -v b="$(cpu_ticks "$operator_pid")" -v hz="$(getconf CLK_TCK)" \
    'BEGIN {printf "%.1f", 100 * (b - a) / hz / 60}')
  steady_reconciles=$(awk -v a="$reconciles0" \
    -v b="$(canary_reconciles)" \
    'BEGIN {printf "%.1f", (b - a) / 60}')
fi

# --- the peer again, started with the Deployments present ----------------------
if [[ -n $peer ]] && ((peer_restart)); then
  kill -TERM "$operator_pid"
  wait "$operator_pid" 2>/dev/null || true
  start_peer
  t3=$(now)
  samples=()
  restart_seen_by=
  for ((i = 0; i < 150; i++)); do
    sleep 2
    governed=$(metric_sum "$governed_metric")
    ((governed >= deployments)) || continue
    [[ -n $restart_seen_by ]] || restart_seen_by=$(awk -v a="$t3" -v b="$(now)" 'BEGIN {printf "%.0f", b - a}')
    read -r rss _ < <(mem_kib "$operator_pid")
    samples+=("$rss")
    rss_settled "${samples[@]}" && break
  done
  read -r present_rss present_anon < <(mem_kib "$operator_pid")
  present_peak=$(awk '/^VmHWM:/ {print $2}' "/proc/$operator_pid/status")
fi
read -r api_rss_after _ < <(mem_kib "$apiserver_pid")
read -r etcd_rss_after _ < <(mem_kib "$etcd_pid")
# What the operator wrote, for reading the figures.
policy_bytes=$(kubectl get allocatorpolicy -n "$bench_ns" bench-jemalloc -o json | wc -c)
policy_governed=$(kubectl get allocatorpolicy -n "$bench_ns" bench-jemalloc \
  -o jsonpath='{.status.governedCount} {range .status.governed[*]}x{end}' |
  awk '{print $1 + 0, length($2)}')
events=$(kubectl get events -n "$bench_ns" --no-headers 2>/dev/null | wc -l)
canaries=$(kubectl get replaycanaries -A --no-headers 2>/dev/null | wc -l)
jobs=$(kubectl get jobs -A --no-headers 2>/dev/null | wc -l)

# --- report -------------------------------------------------------------------
webhooks_note=", webhooks registered"
((with_webhooks)) || webhooks_note=", webhooks not registered"
((with_operator)) || webhooks_note=", no operator"
[[ -n $peer ]] && webhooks_note=", the controller-runtime peer's informer (--mode $peer) instead of the operator"
templates_note=
((templates > 0)) && templates_note=" ($templates distinct pod templates)"
echo "operator memory benchmark: $created ${kind}s labelled app=bench$templates_note, AllocatorPolicy in $mode mode$webhooks_note"
echo "  creation: $created ${kind}s in ${create_seconds} s ($parallel kubectl create of $batch each)," \
  "$object_bytes bytes of JSON each"
if ((with_operator)); then
  if ((present)); then
    echo "  operator idle:             not measured (--present: started with the ${kind}s there)"
  else
    echo "  operator idle:             VmRSS $(mib "$idle_rss"), RssAnon $(mib "$idle_anon")"
  fi
  echo "  operator with the ${kind}s: VmRSS $(mib "$full_rss"), RssAnon $(mib "$full_anon")"
  awk -v a="$idle_rss" -v b="$full_rss" -v c="$idle_anon" -v d="$full_anon" -v n="$created" \
    -v k="$kind" 'BEGIN {printf "  per %s:%*s VmRSS %.0f bytes, RssAnon %.0f bytes\n",
            k, 22 - length(k), "", (b - a) * 1024 / n, (d - c) * 1024 / n}'
  echo "  operator peak VmRSS (VmHWM): $(mib "$peak_rss")"
  if [[ -n $seen_by ]]; then
    since="creation ended"
    ((present)) && since="it was started"
    echo "  the operator's $governed_metric reached $deployments ${seen_by} s after $since"
  else
    echo "  ($governed_metric did not reach $deployments)"
  fi
  if [[ -n $settled ]]; then
    echo "  its RSS settled (within 1 % over 20 s) ${settled} s after ${since:-creation ended}"
  else
    echo "  its RSS had not settled 300 s after creation ended; figures are the last sample"
  fi
  read -r count listed <<<"$policy_governed"
  echo "  the policy: $policy_bytes bytes of JSON, status.governedCount $count," \
    "$listed entries in status.governed"
  echo "  in the cluster: $events events in $bench_ns, $canaries ReplayCanaries, $jobs Jobs"
  echo "  over the next 60 s: operator CPU ${steady_cpu} % of one core," \
    "${steady_reconciles} canary reconciles a second"
fi
if [[ -n ${present_rss:-} ]]; then
  echo "  peer started with the Deployments present: VmRSS $(mib "$present_rss")," \
    "RssAnon $(mib "$present_anon"), peak $(mib "$present_peak");" \
    "all $deployments cached ${restart_seen_by:-?} s after its start"
fi
echo "  kube-apiserver VmRSS: $(mib "$api_rss_before") before, $(mib "$api_rss_after") after"
echo "  etcd VmRSS:           $(mib "$etcd_rss_before") before, $(mib "$etcd_rss_after") after"
