#!/usr/bin/env bash
# The whole product on a real single-node cluster, installed the way users
# install it. Run by scripts/test.sh (the README's test command) after the
# control-plane tier; runs alone too:
#
#   e2e/run.sh [--keep]     # --keep leaves the cluster up for a look afterwards
#
# Stages (each prints how long it took; the summary repeats them at the end):
#   0. cluster: the pinned binaries (cached), e2e/cluster/up.sh --with-node,
#      e2e/cluster/smoke.sh
#   1. install: the images from the Dockerfile (buildah), imported into the
#      node's containerd; `helm install` of charts/allocguard; both replicas
#      Ready, exactly one leader
#   2. govern: the demo workload (e2e/workloads) runs; an Enforce
#      AllocatorPolicy (glibc) adopts it; after a restart its pods come up
#      injected and the guard reports the allocator the process really mapped
#   3. hold: a template change is held; the replay canary really runs the
#      workload under the demo load in canary pods; glibc (a 64-CPU node's
#      arena limit) ratchets, jemalloc stays flat; the Deployment stays paused
#      with a Warning event that names jemalloc
#   4. switch: the policy goes to jemalloc; a new canary is Flat (the hold's
#      jemalloc measurement, reused: same template, load and settings); the
#      rollout is released and completes; the new pods have jemalloc mapped
#   5. uninstall: `helm uninstall` leaves nothing of allocguard behind, and
#      pods are still admitted
# Also printed: the operator's memory and CPU while a canary runs, and the
# webhook latency the API server measured.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
source "$here/cluster/versions.sh"

keep=0
for a in "$@"; do
  case $a in
    --keep) keep=1 ;;
    *) echo "e2e/run.sh: unknown argument $a" >&2; exit 2 ;;
  esac
done

export ALLOCGUARD_CLUSTER_DIR=${ALLOCGUARD_CLUSTER_DIR:-/tmp/allocguard-node-e2e}
release=allocguard
system_ns=allocguard-system
demo_ns=allocguard-demo
deploy=ratchet-demo
policy=ratchet-demo
# The most a canary stage may take: two variants of at most 10 minutes each
# (demo-policy.yaml), their readiness timeouts and pod start-up.
canary_timeout=${ALLOCGUARD_E2E_CANARY_TIMEOUT:-1800}

# --- helpers ------------------------------------------------------------------
stage_names=()
stage_times=()
stage_name=""
stage_start=0
stage() {
  end_stage
  stage_name=$1
  stage_start=$SECONDS
  echo
  echo "== e2e stage: $stage_name"
}
end_stage() {
  if [[ -n $stage_name ]]; then
    stage_names+=("$stage_name")
    stage_times+=($((SECONDS - stage_start)))
    echo "== e2e stage done in $((SECONDS - stage_start)) s: $stage_name"
    stage_name=""
  fi
}
summary() {
  echo
  echo "== e2e summary"
  local i
  for i in "${!stage_names[@]}"; do
    printf '  %5d s  %s\n' "${stage_times[$i]}" "${stage_names[$i]}"
  done
  if [[ -n $stage_name ]]; then printf '  %5s    %s (did not finish)\n' "-" "$stage_name"; fi
}
say() { echo "e2e: $*"; }

diagnostics() {
  echo "---- diagnostics"
  kubectl get nodes -o wide 2>&1 || true
  kubectl get pods -A -o wide 2>&1 || true
  kubectl get allocatorpolicies,replaycanaries,deployments,jobs -n "$demo_ns" -o wide 2>&1 || true
  kubectl get replaycanaries -n "$demo_ns" -o yaml 2>&1 | sed -n '/^  status:/,/^- /p' | head -80 || true
  kubectl events -n "$demo_ns" 2>&1 | tail -40 || true
  local p
  for p in $(kubectl get pods -n "$system_ns" -o name 2>/dev/null); do
    echo "---- logs $p"
    kubectl logs -n "$system_ns" "$p" --tail=60 2>&1 || true
  done
  for p in $(kubectl get pods -n "$demo_ns" -o name 2>/dev/null); do
    echo "---- logs $p (all containers)"
    kubectl logs -n "$demo_ns" "$p" --all-containers --tail=20 2>&1 || true
  done
}
fail() {
  echo "e2e: FAILED in stage '$stage_name': $*" >&2
  diagnostics >&2
  summary >&2
  exit 1
}
# wait_for SECONDS DESCRIPTION COMMAND...: polls every 2 s.
wait_for() {
  local timeout=$1 what=$2 start=$SECONDS
  shift 2
  until "$@" >/dev/null 2>&1; do
    ((SECONDS - start < timeout)) || fail "timed out after ${timeout}s waiting for: $what"
    sleep 2
  done
  say "$what ($((SECONDS - start)) s)"
}
# wait_for_quietly SECONDS COMMAND...: like wait_for, but returns 1 on timeout.
wait_for_quietly() {
  local timeout=$1 start=$SECONDS
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS - start < timeout)) || return 1
    sleep 2
  done
  say "$* after $((SECONDS - start)) s"
}
jp() { kubectl get "$@" 2>/dev/null; }  # kubectl get with -o jsonpath, quiet

cleanup() {
  local status=$?
  if ((keep)); then
    say "cluster left running: source $ALLOCGUARD_CLUSTER_DIR/env; e2e/cluster/down.sh to stop it"
  else
    "$root/e2e/cluster/down.sh" >/dev/null 2>&1 || true
  fi
  exit $status
}

# --- 0. cluster ---------------------------------------------------------------
stage "cluster: binaries, node, smoke test"
"$root/scripts/install-deps.sh" --node
"$here/cluster/build.sh" etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl helm
trap cleanup EXIT
# A node cluster whose run was killed (a session or CI job stopped mid-run)
# leaves its claim on the machine behind; its kubelet and containerd are gone.
# Tear it down so this run can start; a live one is left alone (up.sh then
# says who holds the machine).
stale=$(cat /run/allocguard-node/owner 2>/dev/null || true)
if [[ -n $stale ]]; then
  alive=0
  for pidfile in "$stale/kubelet.pid" "$stale/containerd.pid"; do
    [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null && alive=1
  done
  if ((!alive)); then
    say "tearing down the node cluster a killed run left in $stale"
    ALLOCGUARD_CLUSTER_DIR=$stale "$here/cluster/down.sh" >/dev/null 2>&1 || true
    rm -f /run/allocguard-node/owner
  fi
fi
"$here/cluster/up.sh" --with-node
source "$ALLOCGUARD_CLUSTER_DIR/env"
export PATH=$HELM_BIN:$PATH
"$here/cluster/smoke.sh"

# --- 1. install -----------------------------------------------------------------
stage "install: images from the Dockerfile, helm install, two replicas, one leader"
"$here/images/allocguard.sh" --tag e2e
helm install "$release" "$root/charts/allocguard" --namespace "$system_ns" --create-namespace \
  --set image.repository=localhost/allocguard --set image.tag=e2e --set image.pullPolicy=Never \
  --wait --timeout 5m
ready=$(jp deployment/allocguard -n "$system_ns" -o jsonpath='{.status.readyReplicas}')
[[ $ready == 2 ]] || fail "the operator Deployment has $ready ready replicas, want 2"
leader_pod() {
  local holder
  holder=$(jp lease/allocguard-operator -n "$system_ns" -o jsonpath='{.spec.holderIdentity}')
  [[ -n $holder ]] && echo "${holder%_*}"
}
wait_for 60 "a replica holds the leader Lease" leader_pod
leader=$(leader_pod)
pods=$(jp pods -n "$system_ns" -l app.kubernetes.io/name=allocguard -o jsonpath='{.items[*].metadata.name}')
[[ " $pods " == *" $leader "* ]] || fail "the Lease names '$leader', not one of the pods: $pods"
say "replicas ready: $ready; leader: $leader (pods: $pods)"

# --- 2. govern ------------------------------------------------------------------
stage "govern: the demo workload adopted by an Enforce policy, pods injected, allocator confirmed"
kubectl create namespace "$demo_ns"
wait_for 60 "the namespace's default ServiceAccount" kubectl get serviceaccount default -n "$demo_ns"
# The guard reports conditions and events with the pod's own ServiceAccount;
# the chart ships the ClusterRole, a namespace that enables the guard binds it
# (docs/guard.md).
kubectl create rolebinding allocguard-guard -n "$demo_ns" --clusterrole=allocguard-guard \
  --serviceaccount="$demo_ns:default"
kubectl apply -n "$demo_ns" -f "$here/product/demo-deployment.yaml"
kubectl rollout status -n "$demo_ns" deployment/"$deploy" --timeout=120s
kubectl apply -n "$demo_ns" -f "$here/product/demo-policy.yaml"
policy_ready() {
  [[ $(jp allocatorpolicy/"$policy" -n "$demo_ns" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]]
}
wait_for 60 "policy $policy Ready" policy_ready
adopted() {
  [[ -n $(jp deployment/"$deploy" -n "$demo_ns" \
    -o jsonpath='{.metadata.annotations.allocguard\.io/released-candidate}') ]]
}
wait_for 60 "the running template adopted as the baseline" adopted
kubectl rollout restart -n "$demo_ns" deployment/"$deploy"
kubectl rollout status -n "$demo_ns" deployment/"$deploy" --timeout=180s
[[ $(jp deployment/"$deploy" -n "$demo_ns" -o jsonpath='{.spec.paused}') != true ]] ||
  fail "a rollout restart is not a template change, but the Deployment was paused"

# The running pod of the Deployment (not a terminating one).
demo_pod() {
  kubectl get pods -n "$demo_ns" -l app=ratchet-demo -o json | python3 -c '
import json, sys
for p in json.load(sys.stdin)["items"]:
    if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp"):
        print(p["metadata"]["name"]); break'
}
pod=$(demo_pod)
[[ -n $pod ]] || fail "no running pod of $deploy"
injected=$(jp pod/"$pod" -n "$demo_ns" -o jsonpath='{.metadata.annotations.allocguard\.io/injected}')
[[ -n $injected ]] || fail "pod $pod carries no allocguard.io/injected annotation"
say "pod $pod injected: $injected"
containers=$(jp pod/"$pod" -n "$demo_ns" -o jsonpath='{.spec.initContainers[*].name} {.spec.containers[*].name}')
[[ " $containers " == *" allocguard-guard "* ]] || fail "pod $pod has no guard sidecar: $containers"

# What the guard says the workload process really loaded (its mapped
# libraries), read from the guard's /metrics (port 9464, docs/guard.md)
# through the API server's pod proxy: the allocator its processes mapped,
# and whether that is the allocator the policy expects.
guard_metrics() {
  kubectl get --raw "/api/v1/namespaces/$demo_ns/pods/$1:9464/proxy/metrics" 2>/dev/null
}
guard_allocator() {  # POD
  guard_metrics "$1" |
    sed -n 's/^allocguard_guard_allocator_processes{allocator="\([a-z_]*\)"} [1-9][0-9]*$/\1/p' | head -1
}
guard_says() {  # POD ALLOCATOR: the guard saw it loaded, and it is what the policy expects
  local m
  m=$(guard_metrics "$1") || return 1
  grep -qx "allocguard_guard_allocator_processes{allocator=\"$2\"} [1-9][0-9]*" <<<"$m" &&
    grep -qx "allocguard_guard_allocator_loaded{expected=\"$2\"} 1" <<<"$m"
}
# The same check by hand: the workload process's own /proc/PID/maps.
maps_have() {  # POD LIBRARY-SUBSTRING (captured first: `| grep -q` trips pipefail)
  local maps
  maps=$(kubectl exec -n "$demo_ns" "$1" -c server -- sh -c '
    for p in /proc/[0-9]*; do
      case "$(tr "\0" " " <$p/cmdline 2>/dev/null)" in
        /usr/local/bin/ratchet_service*) cat $p/maps ;;
      esac
    done') || return 1
  grep -q "$2" <<<"$maps"
}
wait_for 60 "the guard of $pod reports glibc loaded" guard_says "$pod" glibc
maps_have "$pod" libc.so.6 || fail "ratchet_service in $pod maps no libc"
if maps_have "$pod" libjemalloc; then fail "glibc policy, yet $pod maps jemalloc"; fi
say "guard metric: allocator=$(guard_allocator "$pod"); /proc maps agree (libc, no jemalloc)"

# --- 3. hold --------------------------------------------------------------------
stage "hold: a template change is held, the canary really runs, glibc ratchets, jemalloc is flat"
sample_operator_cpu() {
  local stat
  stat=$(kubectl exec -n "$system_ns" "$leader" -c operator -- cat /proc/1/stat 2>/dev/null) || return 1
  # fields after "(comm) ": state is 1st, utime 12th, stime 13th
  awk '{print $12 + $13}' <<<"${stat##*) }"
}
sample_operator_rss() {
  kubectl exec -n "$system_ns" "$leader" -c operator -- cat /proc/1/status 2>/dev/null |
    awk '/^VmRSS/ {print $2}'
}
kubectl set env -n "$demo_ns" deployment/"$deploy" RELEASE=2
[[ $(jp deployment/"$deploy" -n "$demo_ns" -o jsonpath='{.spec.paused}') == true ]] ||
  fail "the changed template was not held (spec.paused is not true)"
held=$(jp deployment/"$deploy" -n "$demo_ns" -o jsonpath='{.metadata.annotations.allocguard\.io/held-candidate}')
[[ -n $held ]] || fail "no allocguard.io/held-candidate annotation on the held Deployment"
say "held template $held"
canary_for_template() {  # the ReplayCanary of the held template under the current policy
  kubectl get replaycanaries -n "$demo_ns" \
    -o jsonpath="{range .items[?(@.spec.templateHash==\"$held\")]}{.metadata.creationTimestamp}{\" \"}{.metadata.name}{\"\\n\"}{end}" 2>/dev/null |
    sort | tail -1 | awk '{print $2}'
}
wait_canary() { [[ -n $(canary_for_template) ]]; }
wait_for 60 "a ReplayCanary for template $held" wait_canary
canary=$(canary_for_template)
canary_phase() { jp replaycanary/"$1" -n "$demo_ns" -o jsonpath='{.status.phase}'; }
canary_done() { local p; p=$(canary_phase "$1"); [[ $p == Completed || $p == Failed ]]; }
canary_pod_running() {
  [[ -n $(kubectl get pods -n "$demo_ns" -l allocguard.io/canary --field-selector=status.phase=Running -o name 2>/dev/null) ]]
}
wait_for 300 "a canary pod running" canary_pod_running
cpu0=$(sample_operator_cpu) || cpu0=""
t_cpu0=$SECONDS
rss_max=0
rss_samples=0
canary_start=$SECONDS
while ! canary_done "$canary"; do
  ((SECONDS - canary_start < canary_timeout)) || fail "canary $canary not finished after ${canary_timeout}s"
  rss=$(sample_operator_rss) || rss=""
  if [[ -n $rss ]]; then
    ((rss > rss_max)) && rss_max=$rss
    rss_samples=$((rss_samples + 1))
  fi
  sleep 10
done
cpu1=$(sample_operator_cpu) || cpu1=""
if [[ -n $cpu0 && -n $cpu1 ]]; then
  ticks=$(getconf CLK_TCK)
  op_cpu=$(awk -v a="$cpu0" -v b="$cpu1" -v t="$ticks" -v s=$((SECONDS - t_cpu0)) \
    'BEGIN { printf "%.1f CPU s over %d s (%.2f %% of one core)", (b - a) / t, s, 100 * (b - a) / t / s }')
else
  op_cpu="not measured (kubectl exec failed)"
fi
op_rss="peak RSS $((rss_max / 1024)) MiB over $rss_samples samples"
say "canary $canary finished in $((SECONDS - canary_start)) s"
say "operator (leader $leader) while the canary ran: $op_rss; $op_cpu"
kubectl get replaycanary/"$canary" -n "$demo_ns" -o jsonpath='{range .status.variants[*]}  variant {.name} ({.allocator}): {.verdict}, floor slope {.floorSlopeGiBPerHour} GiB/h, peak {.peakMiB} MiB, {.requests} requests, floors (MiB) {.floorsMiB}{"\n"}{end}' || true
verdict=$(jp replaycanary/"$canary" -n "$demo_ns" -o jsonpath='{.status.verdict}')
flat_variant=$(jp replaycanary/"$canary" -n "$demo_ns" -o jsonpath='{.status.flatVariant}')
say "verdict: $verdict; flat variant: ${flat_variant:-none}"
[[ $verdict == AllocatorRetention ]] ||
  fail "canary $canary: verdict '$verdict', want AllocatorRetention (glibc ratchets, jemalloc flat)"
[[ $flat_variant == jemalloc ]] || fail "canary $canary names flat variant '$flat_variant', want jemalloc"
held_event() {
  local events
  events=$(kubectl events -n "$demo_ns" --for deployment/"$deploy" --types=Warning 2>/dev/null) || return 1
  grep RolloutHeld <<<"$events" | grep -q jemalloc
}
wait_for 60 "a RolloutHeld Warning on the Deployment naming jemalloc" held_event
kubectl events -n "$demo_ns" --for deployment/"$deploy" --types=Warning | grep RolloutHeld | tail -1
[[ $(jp deployment/"$deploy" -n "$demo_ns" -o jsonpath='{.spec.paused}') == true ]] ||
  fail "the Deployment was unpaused although the canary was not Flat"
echo "\$ kubectl get allocatorpolicies,replaycanaries -n $demo_ns"
kubectl get allocatorpolicies,replaycanaries -n "$demo_ns"

# --- 4. switch ------------------------------------------------------------------
stage "switch: the policy goes to jemalloc, a new canary is Flat, the rollout completes on jemalloc"
# The canary of a jemalloc candidate needs no comparison run: the glibc
# comparison was just made (variants: [] keeps it to the candidate). And the
# candidate itself, jemalloc on this template under this load, is exactly what
# the hold's canary measured as its jemalloc variant: the operator copies
# that result (status.variants[].reusedFrom) instead of running it again.
kubectl patch allocatorpolicy/"$policy" -n "$demo_ns" --type merge \
  -p '{"spec":{"allocator":{"name":"jemalloc"},"canary":{"variants":[]}}}'
old_canary=$canary
new_canary() { local c; c=$(canary_for_template); [[ -n $c && $c != "$old_canary" ]]; }
wait_for 120 "a new ReplayCanary for the switched policy" new_canary
canary=$(canary_for_template)
canary_start=$SECONDS
while ! canary_done "$canary"; do
  ((SECONDS - canary_start < canary_timeout)) || fail "canary $canary not finished after ${canary_timeout}s"
  sleep 5
done
say "canary $canary finished in $((SECONDS - canary_start)) s"
kubectl get replaycanary/"$canary" -n "$demo_ns" -o jsonpath='{range .status.variants[*]}  variant {.name} ({.allocator}): {.verdict}, floor slope {.floorSlopeGiBPerHour} GiB/h, peak {.peakMiB} MiB, {.requests} requests, floors (MiB) {.floorsMiB}{"\n"}{end}' || true
verdict=$(jp replaycanary/"$canary" -n "$demo_ns" -o jsonpath='{.status.verdict}')
[[ $verdict == Flat ]] || fail "canary $canary of the jemalloc policy: verdict '$verdict', want Flat"
reused=$(jp replaycanary/"$canary" -n "$demo_ns" -o jsonpath='{.status.variants[?(@.name=="candidate")].reusedFrom}')
[[ $reused == "$old_canary" ]] ||
  fail "canary $canary ran jemalloc again instead of reusing $old_canary's identical measurement (reusedFrom '$reused')"
say "the jemalloc result was measured by $reused (identical inputs), not run again"
unpaused() { [[ $(jp deployment/"$deploy" -n "$demo_ns" -o jsonpath='{.spec.paused}') != true ]]; }
wait_for 60 "the Deployment released" unpaused
kubectl rollout status -n "$demo_ns" deployment/"$deploy" --timeout=180s
pod=$(demo_pod)
[[ $(jp pod/"$pod" -n "$demo_ns" -o jsonpath='{.spec.containers[?(@.name=="server")].env[?(@.name=="RELEASE")].value}') == 2 ]] ||
  fail "pod $pod does not run the released template (RELEASE=2)"
wait_for 60 "the guard of $pod reports jemalloc loaded" guard_says "$pod" jemalloc
maps_have "$pod" libjemalloc.so.2 || fail "ratchet_service in $pod does not map libjemalloc.so.2"
say "pod $pod: guard metric allocator=$(guard_allocator "$pod"); /proc maps show libjemalloc.so.2"
echo "\$ kubectl get allocatorpolicies,replaycanaries -n $demo_ns"
kubectl get allocatorpolicies,replaycanaries -n "$demo_ns"

# --- webhook latency as the API server measures it ------------------------------
echo
echo "== webhook latency (apiserver_admission_webhook_admission_duration_seconds)"
kubectl get --raw /metrics | python3 "$here/product/webhook_latency.py"

# --- 5. uninstall ---------------------------------------------------------------
stage "uninstall: nothing of allocguard left, pods still admitted"
helm uninstall "$release" --namespace "$system_ns" --wait --timeout 3m
# `helm uninstall --wait` returns once Helm's own objects are gone; what they
# owned (the operator's pods, the certificate Secret owned by the webhook
# configuration) goes with the garbage collector and the pods' grace period.
leftovers() {
  {
    kubectl get mutatingwebhookconfigurations,validatingwebhookconfigurations -o name
    kubectl get clusterroles,clusterrolebindings -o name | grep allocguard
    kubectl get all,secrets,configmaps,leases,roles,rolebindings,serviceaccounts,poddisruptionbudgets \
      -n "$system_ns" -o name | grep -v -e '^serviceaccount/default$' -e '^configmap/kube-root-ca.crt$'
  } 2>/dev/null || true
}
nothing_left() { [[ -z $(leftovers) ]]; }
if ! wait_for_quietly 120 nothing_left; then
  fail "left behind 120 s after helm uninstall:"$'\n'"$(leftovers)"
fi
say "no webhook configuration, RBAC object or object in $system_ns is left"
kubectl get crd -o name | grep allocguard.io || true
kubectl run admitted-after-uninstall -n "$demo_ns" --image=localhost/ratchet-service:e2e \
  --image-pull-policy=Never --labels=app=ratchet-demo --restart=Never
pod_running() {
  [[ $(jp pod/admitted-after-uninstall -n "$demo_ns" -o jsonpath='{.status.phase}') == Running ]]
}
wait_for 120 "a pod created after the uninstall runs" pod_running
[[ -z $(jp pod/admitted-after-uninstall -n "$demo_ns" -o jsonpath='{.metadata.annotations.allocguard\.io/injected}') ]] ||
  fail "a pod created after the uninstall was still injected"
end_stage
summary
echo "e2e: 1 passed, 0 failed"
