#!/usr/bin/env bash
# The whole product on a real single-node cluster, installed the way users
# install it. Run by scripts/test.sh (the README's test command) after the
# control-plane tier; runs alone too:
#
#   e2e/run.sh [--keep]     # --keep leaves the cluster up for a look afterwards
#   e2e/run.sh --until install   # stops (cluster kept) after that stage: e.g.
#                                # or govern: to iterate on one stage against it
#
# Stages (each prints how long it took; the summary repeats them at the end):
#   0. cluster: the pinned binaries (cached), e2e/cluster/up.sh --with-node,
#      e2e/cluster/smoke.sh
#   1. install: the images from the Dockerfile (buildah), imported into the
#      node's containerd; the release artifacts (scripts/release.sh), the
#      image archive imported under the chart's default name and `helm
#      install` of the packaged chart with nothing but e2e/values.yaml; both
#      replicas Ready, exactly one leader
#   2. govern: the demo workload (e2e/workloads) runs; an Enforce
#      AllocatorPolicy (glibc) adopts it; after a restart its pods come up
#      injected and the guard reports the allocator the process really mapped
#   3. hold: a template change is held; the replay canary really runs the
#      workload under the demo load in canary pods; glibc (a 64-CPU node's
#      arena limit) ratchets, jemalloc stays flat; the Deployment stays paused
#      with a Warning event that names jemalloc; a malformed ReplayCanary is
#      refused at apply naming the field, and with the canary webhook out it
#      is Stalled while both operator replicas stay up and the hold stays.
#      While the canary runs, e2e/chaos.py SIGKILLs the leader 20 times (the
#      follower 3 times) with three more held Deployments and their canaries
#      in flight: failover within the lease bound, no duplicate canary or
#      Job, no verdict lost, no release without a Flat verdict
#   4. switch: the policy goes to jemalloc; a new canary is Flat (the hold's
#      jemalloc measurement, reused: same template, load and settings); the
#      rollout is released and completes; the new pods have jemalloc mapped
#      (`allocguard gate` exits 2 on the held Deployment, 0 once released)
#   5. guard: a second workload under a policy whose guard acts on memory
#      (e2e/product/guard-demo.yaml); its metrics are scraped; pushed over the
#      threshold, Backpressure takes the pod out of its Service's endpoints
#      and back; with Restart, the guard SIGTERMs a workload creeping towards
#      its cgroup limit before the OOM killer acts
#   6. libc: one C service built on Debian 11, Debian 12, musl (FROM scratch)
#      and as a static binary (e2e/product/libc-demo.yaml), under a policy
#      with libc auto: each dynamic one has jemalloc, then mimalloc, mapped
#      (the glibc build in Debian 11, the musl build in musl), which the
#      process and the guard both report; the static one runs and the guard
#      reports "static binary". Debian 12's own jemalloc in the Debian 11 image
#      (what injection did before) keeps the container from starting. A policy
#      forcing the musl build on a glibc workload: under Enforce its canary
#      reports the candidate Failed with the loader's message, in the held
#      Deployment's event too; set to Off, the pods crash-loop and the circuit
#      breaker trips; the time until a pod runs without the allocator is printed
#   7. uninstall: `helm uninstall` leaves nothing of allocguard behind, and
#      pods are still admitted
# Also printed: the operator's memory and CPU while a canary runs, and the
# webhook latency the API server measured.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
source "$here/cluster/versions.sh"

keep=0
until_stage=""
while (($#)); do
  case $1 in
    --keep) keep=1 ;;
    --until)
      [[ ${2:-} == install || ${2:-} == govern ]] || { echo "e2e/run.sh: --until install|govern" >&2; exit 2; }
      until_stage=$2 keep=1
      shift
      ;;
    *) echo "e2e/run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
# stop_if STAGE: ends the run here (cluster kept) when --until names STAGE.
stop_if() {
  if [[ $until_stage == "$1" ]]; then
    end_stage
    summary
    echo "e2e: stopped after stage $1 (--until)"
    exit 0
  fi
}

export ALLOCGUARD_CLUSTER_DIR=${ALLOCGUARD_CLUSTER_DIR:-/tmp/allocguard-node-e2e}
# The image builds are on this run's critical path: they run at normal
# priority here (their default is nice 19), ahead of the sanitizer build that
# scripts/test.sh runs beside this tier at nice 10.
export ALLOCGUARD_BUILD_NICE=${ALLOCGUARD_BUILD_NICE:-0}
release=allocguard
system_ns=allocguard-system
demo_ns=allocguard-demo
deploy=ratchet-demo
policy=ratchet-demo
sts=ratchet-db  # e2e/product/kinds-demo.yaml
ds=ratchet-agent
# The most a canary stage may take: two variants of at most 12 minutes each
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
# running_pod SELECTOR [ready]: the name of one Running pod in the demo
# namespace matching SELECTOR that is not terminating (with "ready": also
# Ready); nothing when there is none.
running_pod() {
  kubectl get pods -n "$demo_ns" -l "$1" -o json | python3 -c '
import json, sys
want_ready = sys.argv[1] == "ready"
for p in json.load(sys.stdin)["items"]:
    ready = any(c["type"] == "Ready" and c["status"] == "True"
                for c in p["status"].get("conditions", []))
    if (p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
            and (ready or not want_ready)):
        print(p["metadata"]["name"]); break' "${2:-}"
}

# gate_expect CODE WHAT [KIND/NAME]: `allocguard gate` on the demo Deployment
# (or KIND/NAME), as a CI job
# would run it: in the cluster (the leader's container, its ServiceAccount)
# and, when this checkout has a build, from here with the kubeconfig. Both
# must exit CODE (docs/gitops.md: 0 proceed, 2 held).
gate_expect() {  # CODE WHAT [KIND/NAME, the demo Deployment by default]
  local want=$1 what=$2 target=${3:-deployment/$deploy} rc out
  set +e
  out=$(kubectl exec -n "$system_ns" "$leader" -c operator -- \
    allocguard gate "$target" -n "$demo_ns" --timeout 0 -o json 2>&1)
  rc=$?
  set -e
  say "allocguard gate $target (in cluster) exit $rc: $out"
  [[ $rc == "$want" ]] || fail "allocguard gate in the cluster exited $rc on $what $target, want $want"
  local local_gate=$root/build/release/operator/cli/allocguard
  if [[ -x $local_gate ]]; then
    set +e
    out=$("$local_gate" gate "$target" -n "$demo_ns" --timeout 0 --kubeconfig "$KUBECONFIG" 2>&1)
    rc=$?
    set -e
    say "allocguard gate $target (kubeconfig) exit $rc: $out"
    [[ $rc == "$want" ]] || fail "allocguard gate with the kubeconfig exited $rc on $what $target, want $want"
  fi
}

chaos_pid=""
release_dir=""
cleanup() {
  local status=$?
  # e2e/chaos.py, if a failure left it running (it would time out on its own).
  if [[ -n $chaos_pid ]]; then kill "$chaos_pid" 2>/dev/null || true; fi
  # The release's artifacts (stage 1), if a failure came before they were removed.
  if [[ -n $release_dir ]]; then rm -rf "$release_dir"; fi
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
stage "install: images from the Dockerfile, the release artifacts, helm install of the packaged chart, two replicas, one leader"
"$here/images/allocguard.sh" --tag e2e
# What the image ships: the allocator builds per libc, their manifests, and
# the docs' compatibility table generated from them (docs/allocators.md).
"$here/images/check-allocguard.sh" localhost/allocguard:e2e --workload localhost/ratchet-service:e2e ||
  fail "the allocguard image does not ship what docs/allocators.md says"
# The release as a user gets it (docs/install.md, "Installing a release"):
# scripts/release.sh builds the image again (every layer cached by now), as
# an OCI archive, and packages the chart; the archive is loaded into the
# node under the chart's default image name, and the packaged chart installs
# with its defaults (e2e/values.yaml only says never to pull).
release_dir=$(mktemp -d /tmp/allocguard-e2e-release.XXXXXX)
"$root/scripts/release.sh" --out "$release_dir" >/dev/null
(cd "$release_dir" && sha256sum --quiet -c SHA256SUMS) || fail "the release's SHA256SUMS do not match its files"
version=$(head -1 "$root/VERSION")
default_repository=$(helm show values "$release_dir/allocguard-$version.tgz" |
  sed -n '/^image:/,/^[^ ]/ s/^  repository: *//p')
ctr --address "$ALLOCGUARD_CONTAINERD_ADDRESS" --namespace k8s.io images import \
  --base-name "$default_repository" "$release_dir/allocguard-$version.oci.tar" >/dev/null
# The listing is captured before grep reads it: `ctr ... | grep -q` under
# pipefail fails whenever grep stops reading before ctr has written its
# last line (ctr dies of SIGPIPE), which made this check fail at random.
node_images=$(ctr --address "$ALLOCGUARD_CONTAINERD_ADDRESS" --namespace k8s.io images ls -q)
grep -qx "$default_repository:$version" <<<"$node_images" ||
  fail "importing the release's image archive did not give the node $default_repository:$version"
say "release $version: $(cd "$release_dir" && ls -1 | tr '\n' ' ')imported as $default_repository:$version"
helm install "$release" "$release_dir/allocguard-$version.tgz" --namespace "$system_ns" --create-namespace \
  -f "$here/values.yaml" --wait --timeout 5m
image_in_use=$(jp deployment/allocguard -n "$system_ns" -o jsonpath='{.spec.template.spec.containers[0].image}')
[[ $image_in_use == "$default_repository:$version" ]] ||
  fail "the packaged chart runs $image_in_use, want its default $default_repository:$version"
rm -rf "$release_dir"
release_dir=""
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
# The chart preloads the operator's own malloc from the image (operator.malloc,
# default jemalloc); a wrong path would only make ld.so warn and fall back.
heap=$(kubectl logs -n "$system_ns" "$leader" | grep -o 'heap: [a-z]* malloc' | head -1 || true)
[[ $heap == "heap: jemalloc malloc" ]] ||
  fail "the operator logs '$heap', want 'heap: jemalloc malloc' (the chart's operator.malloc)"
say "the operator runs on jemalloc ($heap)"
stop_if install

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
# The same workload as a StatefulSet (two replicas, a claim each, bound to
# two hostPath volumes of a class without a provisioner) and a DaemonSet
# (e2e/product/kinds-demo.yaml), created before the policy: it adopts them.
kinds_volumes() {
  printf 'apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: allocguard-e2e-local}\n'
  printf 'provisioner: kubernetes.io/no-provisioner\nvolumeBindingMode: Immediate\n'
  local i
  for i in 0 1; do
    printf -- '---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {name: allocguard-e2e-pv-%s}\n' "$i"
    printf 'spec:\n  capacity: {storage: 64Mi}\n  accessModes: [ReadWriteOnce]\n'
    printf '  storageClassName: allocguard-e2e-local\n  persistentVolumeReclaimPolicy: Retain\n'
    printf '  hostPath: {path: "%s/volumes/pv-%s", type: DirectoryOrCreate}\n' "$ALLOCGUARD_CLUSTER_DIR" "$i"
  done
}
kinds_volumes | kubectl apply -f -
kubectl apply -n "$demo_ns" -f "$here/product/kinds-demo.yaml"
kubectl rollout status -n "$demo_ns" deployment/"$deploy" --timeout=120s
kubectl rollout status -n "$demo_ns" statefulset/"$sts" --timeout=180s
kubectl rollout status -n "$demo_ns" daemonset/"$ds" --timeout=120s
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
kind_adopted() {  # KIND NAME
  [[ -n $(jp "$1"/"$2" -n "$demo_ns" -o jsonpath='{.metadata.annotations.allocguard\.io/released-candidate}') ]]
}
wait_for 60 "the StatefulSet's running template adopted" kind_adopted statefulset "$sts"
wait_for 60 "the DaemonSet's running template adopted" kind_adopted daemonset "$ds"
kubectl rollout restart -n "$demo_ns" deployment/"$deploy"
kubectl rollout status -n "$demo_ns" deployment/"$deploy" --timeout=180s
[[ $(jp deployment/"$deploy" -n "$demo_ns" -o jsonpath='{.spec.paused}') != true ]] ||
  fail "a rollout restart is not a template change, but the Deployment was paused"

# The running pod of the Deployment (not a terminating one).
demo_pod() {
  running_pod app=ratchet-demo
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
# Scrapeable as Prometheus would: the pod is labelled for the chart's
# PodMonitor, the guard declares its port by name, and /metrics answers on the
# pod IP at that port (the host routes to the pod network).
[[ $(jp pod/"$pod" -n "$demo_ns" -o jsonpath='{.metadata.labels.allocguard\.io/guard}') == true ]] ||
  fail "pod $pod has a guard but no allocguard.io/guard=true label"
guard_port=$(jp pod/"$pod" -n "$demo_ns" \
  -o jsonpath='{range .spec.initContainers[*]}{range .ports[?(@.name=="guard-metrics")]}{.containerPort}{end}{end}{range .spec.containers[*]}{range .ports[?(@.name=="guard-metrics")]}{.containerPort}{end}{end}')
[[ -n $guard_port ]] || fail "the guard of $pod declares no port named guard-metrics"
pod_ip=$(jp pod/"$pod" -n "$demo_ns" -o jsonpath='{.status.podIP}')
scraped=$(curl -sf --max-time 5 "http://$pod_ip:$guard_port/metrics") ||
  fail "GET http://$pod_ip:$guard_port/metrics (the guard's declared port) failed"
grep -q '^allocguard_guard_allocator_loaded{expected="glibc"} 1$' <<<"$scraped" ||
  fail "the guard's /metrics at $pod_ip:$guard_port lack allocguard_guard_allocator_loaded"
say "guard port guard-metrics=$guard_port declared; scraped http://$pod_ip:$guard_port/metrics ($(wc -l <<<"$scraped") lines)"

stop_if govern

# --- 3. hold --------------------------------------------------------------------
stage "hold: a template change is held, the canary really runs, glibc ratchets, jemalloc is flat, the leader is killed 20 times meanwhile"
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
# The StatefulSet's template changes too: the same admission pins its
# partition above the replica count, and neither of its pods is replaced.
# Its canary (the claim as an emptyDir, the identity ratchet-db-0) runs
# beside the Deployment's.
pod_uids() {  # SELECTOR: name=uid of each pod, sorted
  jp pods -n "$demo_ns" -l "$1" -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.uid}{"\n"}{end}' | sort
}
sts_pods_before=$(pod_uids app="$sts")
[[ $(wc -l <<<"$sts_pods_before") == 2 ]] || fail "StatefulSet $sts does not run 2 pods: $sts_pods_before"
sts_t0=$SECONDS
kubectl set env -n "$demo_ns" statefulset/"$sts" RELEASE=2
sts_partition=$(jp statefulset/"$sts" -n "$demo_ns" -o jsonpath='{.spec.updateStrategy.rollingUpdate.partition}')
[[ $sts_partition == 2147483647 ]] ||
  fail "the StatefulSet's changed template was not held: partition '$sts_partition', want 2147483647"
sts_held=$(jp statefulset/"$sts" -n "$demo_ns" -o jsonpath='{.metadata.annotations.allocguard\.io/held-candidate}')
[[ -n $sts_held ]] || fail "no allocguard.io/held-candidate annotation on the held StatefulSet"
# The partition the user had (the API server defaults it to 0), restored on release.
sts_user_partition=$(jp statefulset/"$sts" -n "$demo_ns" -o jsonpath='{.metadata.annotations.allocguard\.io/user-partition}')
say "StatefulSet $sts held at revision $sts_held: partition $sts_partition (the user's, remembered: '$sts_user_partition')"
# canary_of RESOURCE NAME KIND [DIGEST]: the newest ReplayCanary whose target
# kind is KIND and whose spec.templateHash is the workload's template as
# measured, labels aside (chaos.template_digest); the newest one is the
# current policy's. With DIGEST, nothing unless the workload's template (with
# labels) is still that one.
canary_of() {
  { kubectl get "$1"/"$2" -n "$demo_ns" -o json &&
    kubectl get replaycanaries -n "$demo_ns" -o json; } 2>/dev/null | python3 -c '
import json, sys
sys.path.insert(0, sys.argv[1])
from chaos import template_digest
text = sys.stdin.read()
decoder = json.JSONDecoder()
workload, end = decoder.raw_decode(text)
canaries, _ = decoder.raw_decode(text, end + len(text[end:]) - len(text[end:].lstrip()))
template = workload["spec"]["template"]
if sys.argv[3] and template_digest(template) != sys.argv[3]:
    sys.exit(0)
measured = template_digest(template, with_labels=False)
found = sorted((c["metadata"].get("creationTimestamp", ""), c["metadata"]["name"])
               for c in canaries["items"]
               if c["spec"].get("templateHash") == measured
               and c["spec"].get("target", {}).get("kind") == sys.argv[2])
print(found[-1][1] if found else "")' "$here" "$3" "${4:-}" 2>/dev/null
}
# The ReplayCanary of the Deployment's held template under the current policy.
canary_for_template() { canary_of deployment "$deploy" Deployment "$held"; }
wait_canary() { [[ -n $(canary_for_template) ]]; }
has_canary() { [[ -n $(canary_of "$@") ]]; }
wait_for 60 "a ReplayCanary for template $held" wait_canary
canary=$(canary_for_template)
canary_phase() { jp replaycanary/"$1" -n "$demo_ns" -o jsonpath='{.status.phase}'; }
canary_done() { local p; p=$(canary_phase "$1"); [[ $p == Completed || $p == Failed ]]; }
canary_pod_running() {
  [[ -n $(kubectl get pods -n "$demo_ns" -l allocguard.io/canary --field-selector=status.phase=Running -o name 2>/dev/null) ]]
}
wait_for 300 "a canary pod running" canary_pod_running
# The StatefulSet's canary: its own (a StatefulSet's canary measures with the
# set's identity and claims), its pod named ratchet-db-0 by hostname, its
# claim an emptyDir of the claim's size.
wait_for 60 "a ReplayCanary for the StatefulSet's template" has_canary statefulset "$sts" StatefulSet
sts_canary=$(canary_of statefulset "$sts" StatefulSet)
sts_canary_pod() {
  jp pods -n "$demo_ns" -l allocguard.io/canary="$sts_canary" --field-selector=status.phase=Running \
    -o jsonpath='{.items[0].metadata.name}'
}
sts_canary_running() { [[ -n $(sts_canary_pod) ]]; }
wait_for 300 "the StatefulSet's canary pod running" sts_canary_running
scpod=$(sts_canary_pod)
sc_identity=$(jp pod/"$scpod" -n "$demo_ns" -o jsonpath='{.spec.hostname}')
sc_claim=$(jp pod/"$scpod" -n "$demo_ns" -o jsonpath='{.spec.volumes[?(@.name=="data")].emptyDir.sizeLimit}')
[[ $sc_identity == "$sts-0" ]] || fail "the StatefulSet's canary pod $scpod has hostname '$sc_identity', want $sts-0"
[[ $sc_claim == 64Mi ]] || fail "the StatefulSet's canary pod $scpod mounts claim data as '$sc_claim', want an emptyDir of 64Mi"
say "StatefulSet canary $sts_canary: pod $scpod, hostname $sc_identity, claim data an emptyDir of $sc_claim"
# Leader kills while this canary runs (e2e/chaos.py): three more Deployments
# held with canaries of their own, the leader SIGKILLed 20 times and the
# follower 3 times at seeded random moments; it checks failover, duplicates,
# lost verdicts and releases here too (--watch-namespace), and deletes its
# namespace at the end. The canary's CPU is measured once the kills are over
# (a killed leader's counters start again).
chaos_log=$(mktemp /tmp/allocguard-chaos.XXXXXX.log)
python3 "$here/chaos.py" --watch-namespace "$demo_ns" --cleanup >"$chaos_log" 2>&1 &
chaos_pid=$!
chaos_start=$SECONDS
chaos_status=""
chaos_collect() {  # waits for e2e/chaos.py (it has a deadline on every wait), prints its report
  local rc=0
  wait "$chaos_pid" || rc=$?
  chaos_status=$rc
  say "e2e/chaos.py finished in $((SECONDS - chaos_start)) s, exit $rc:"
  cat "$chaos_log"
  rm -f "$chaos_log"
  ((rc == 0)) || fail "the leader-kill test failed (log above; run it again with the seed it printed)"
  leader=$(leader_pod) || fail "no leader after the kills"
}
cpu0=""
t_cpu0=$SECONDS
rss_max=0
rss_samples=0
canary_start=$SECONDS
while ! canary_done "$canary"; do
  ((SECONDS - canary_start < canary_timeout)) || fail "canary $canary not finished after ${canary_timeout}s"
  if [[ -z $chaos_status ]] && ! kill -0 "$chaos_pid" 2>/dev/null; then
    chaos_collect
    cpu0=$(sample_operator_cpu) || cpu0=""
    t_cpu0=$SECONDS
  fi
  leader=$(leader_pod) || true  # the replica leading now: the kills move it
  rss=$(sample_operator_rss) || rss=""
  if [[ -n $rss ]]; then
    ((rss > rss_max)) && rss_max=$rss
    rss_samples=$((rss_samples + 1))
  fi
  sleep 10
done
[[ -n $chaos_status ]] || chaos_collect
cpu1=$(sample_operator_cpu) || cpu1=""
if [[ -n $cpu0 && -n $cpu1 ]]; then
  ticks=$(getconf CLK_TCK)
  op_cpu=$(awk -v a="$cpu0" -v b="$cpu1" -v t="$ticks" -v s=$((SECONDS - t_cpu0)) \
    'BEGIN { printf "%.1f CPU s over %d s (%.2f %% of one core)", (b - a) / t, s, 100 * (b - a) / t / s }')
else
  op_cpu="not measured (the kills went on until the canary ended, or kubectl exec failed)"
fi
op_rss="peak RSS $((rss_max / 1024)) MiB over $rss_samples samples"
say "canary $canary finished in $((SECONDS - canary_start)) s"
say "operator (the leader) while the canary ran: $op_rss (whichever replica led); CPU after the kills: $op_cpu"
kubectl get replaycanary/"$canary" -n "$demo_ns" -o jsonpath='{range .status.variants[*]}  variant {.name} ({.allocator}): {.verdict}, floor slope {.floorSlopeGiBPerHour} GiB/h, peak {.peakMiB} MiB, {.requests} requests, floors (MiB) {.floorsMiB}{"\n"}{end}' || true
# The runs before a variant's last (an Inconclusive candidate runs again):
# why each ended as it did, e.g. the workload falling behind its load.
print_earlier_runs() {  # CANARY
  jp replaycanary/"$1" -n "$demo_ns" -o json | python3 -c '
import json, sys
for v in json.load(sys.stdin).get("status", {}).get("variants", []):
    runs = v.get("earlierRuns", [])
    for i, r in enumerate(runs):
        print("  variant %s run %d of %d: %s, %s requests, %s late, floors (MiB) %s: %s" % (
            v.get("name"), i + 1, len(runs) + 1, r.get("verdict"), r.get("requests"),
            r.get("late"), r.get("floorsMiB"), r.get("message")))' || true
}
print_earlier_runs "$canary"
verdict=$(jp replaycanary/"$canary" -n "$demo_ns" -o jsonpath='{.status.verdict}')
flat_variant=$(jp replaycanary/"$canary" -n "$demo_ns" -o jsonpath='{.status.flatVariant}')
say "verdict: $verdict; flat variant: ${flat_variant:-none}"
[[ $verdict == AllocatorRetention ]] ||
  fail "canary $canary: verdict '$verdict', want AllocatorRetention (glibc ratchets, jemalloc flat)"
[[ $flat_variant == jemalloc ]] || fail "canary $canary names flat variant '$flat_variant', want jemalloc"
held_event() {
  local events
  events=$(kubectl events -n "$demo_ns" --for deployment/"$deploy" --types=Warning 2>/dev/null) || return 1
  [[ $(grep RolloutHeld <<<"$events") == *jemalloc* ]]
}
wait_for 60 "a RolloutHeld Warning on the Deployment naming jemalloc" held_event
kubectl events -n "$demo_ns" --for deployment/"$deploy" --types=Warning | grep RolloutHeld | tail -1
[[ $(jp deployment/"$deploy" -n "$demo_ns" -o jsonpath='{.spec.paused}') == true ]] ||
  fail "the Deployment was unpaused although the canary was not Flat"
echo "\$ kubectl get allocatorpolicies,replaycanaries -n $demo_ns"
kubectl get allocatorpolicies,replaycanaries -n "$demo_ns"
gate_expect 2 "held"

# The crash scenario of docs/security.md (point 1), while the rollout is
# held: a ReplayCanary with a number where the operator reads a string. The
# validating webhook refuses it at apply, naming the field. With the canary
# webhook taken out of the configuration (as while no replica answers), it
# is stored; both replicas stay up, the canary is Stalled with the field
# named, and the Deployment stays held.
malformed=$(kubectl apply -n "$demo_ns" -f "$here/product/malformed-canary.yaml" 2>&1) &&
  fail "the malformed ReplayCanary was admitted: $malformed"
grep -q 'spec.template.spec.containers\[0\].terminationMessagePolicy: must be a string, got 5' <<<"$malformed" ||
  fail "the refusal does not name the field: $malformed"
say "refused at apply: ${malformed##*: admission webhook}"
restarts() {
  jp pods -n "$system_ns" -l app.kubernetes.io/name=allocguard \
    -o jsonpath='{range .items[*]}{.metadata.name}={.status.containerStatuses[0].restartCount} {end}'
}
restarts_before=$(restarts)
vwc=$(kubectl get validatingwebhookconfiguration "$release" -o json)
python3 -c 'import json, sys
c = json.load(sys.stdin)
c["webhooks"] = [w for w in c["webhooks"] if w["name"] != "replaycanaries.validate.allocguard.io"]
c["metadata"].pop("resourceVersion", None)
print(json.dumps(c))' <<<"$vwc" | kubectl replace -f - >/dev/null
stored_malformed() { kubectl apply -n "$demo_ns" -f "$here/product/malformed-canary.yaml"; }
wait_for 60 "the malformed ReplayCanary stored with the canary webhook out" stored_malformed
restore_vwc() {
  python3 -c 'import json, sys
c = json.load(sys.stdin)
c["metadata"].pop("resourceVersion", None)
print(json.dumps(c))' <<<"$vwc" | kubectl replace -f - >/dev/null
}
stalled_malformed() {
  jp replaycanary/malformed -n "$demo_ns" \
    -o jsonpath='{.status.conditions[?(@.type=="Stalled")].reason} {.status.conditions[?(@.type=="Stalled")].message}' |
    grep -q 'InvalidSpec spec.template.spec.containers\[0\].terminationMessagePolicy: must be a string, got 5'
}
wait_for 60 "the malformed ReplayCanary Stalled, reason InvalidSpec, naming the field" stalled_malformed
sleep 10  # a replica that aborted on it would be restarting by now
restore_vwc
[[ $(restarts) == "$restarts_before" ]] ||
  fail "operator containers restarted after the malformed canary: $restarts_before -> $(restarts)"
ready=$(jp deployment/allocguard -n "$system_ns" -o jsonpath='{.status.readyReplicas}')
[[ $ready == 2 ]] || fail "$ready operator replicas ready after the malformed canary, want 2"
[[ $(jp deployment/"$deploy" -n "$demo_ns" -o jsonpath='{.spec.paused}') == true ]] ||
  fail "the held Deployment was released after the malformed canary"
say "both replicas up (restarts $(restarts)), the malformed canary Stalled with the field named, $deploy still held"
kubectl delete replaycanary/malformed -n "$demo_ns" --wait=false >/dev/null

# The StatefulSet, held since the Deployment was: its own canary's verdict.
print_variants() {  # CANARY
  jp replaycanary/"$1" -n "$demo_ns" -o jsonpath='{range .status.variants[*]}  variant {.name} ({.allocator}): {.verdict}, floor slope {.floorSlopeGiBPerHour} GiB/h, peak {.peakMiB} MiB, {.requests} requests, reused from {.reusedFrom}{"\n"}{end}' || true
}
kind_held_event() {  # KIND NAME: a RolloutHeld Warning on it naming jemalloc
  local events
  events=$(kubectl events -n "$demo_ns" --for "$1"/"$2" --types=Warning 2>/dev/null) || return 1
  events=$(grep RolloutHeld <<<"$events") || return 1
  [[ $events == *jemalloc* ]]
}
expect_retention() {  # CANARY WHAT
  local v f
  v=$(jp replaycanary/"$1" -n "$demo_ns" -o jsonpath='{.status.verdict}')
  f=$(jp replaycanary/"$1" -n "$demo_ns" -o jsonpath='{.status.flatVariant}')
  say "$2 canary $1: verdict $v; flat variant ${f:-none}"
  [[ $v == AllocatorRetention && $f == jemalloc ]] ||
    fail "$2 canary $1: verdict '$v', flat variant '$f'; want AllocatorRetention, jemalloc"
}
while ! canary_done "$sts_canary"; do
  ((SECONDS - sts_t0 < canary_timeout)) || fail "the StatefulSet's canary $sts_canary not finished after ${canary_timeout}s"
  sleep 5
done
say "StatefulSet canary $sts_canary finished $((SECONDS - sts_t0)) s after the template change"
print_variants "$sts_canary"
print_earlier_runs "$sts_canary"
expect_retention "$sts_canary" "the StatefulSet's"
sts_reused=$(jp replaycanary/"$sts_canary" -n "$demo_ns" -o jsonpath='{.status.variants[*].reusedFrom}')
[[ -z $sts_reused ]] || fail "the StatefulSet's canary copied measurements ($sts_reused) instead of running its own"
wait_for 60 "a RolloutHeld Warning on the StatefulSet naming jemalloc" kind_held_event statefulset "$sts"
kubectl events -n "$demo_ns" --for statefulset/"$sts" --types=Warning | grep RolloutHeld | tail -1
[[ $(pod_uids app="$sts") == "$sts_pods_before" ]] ||
  fail "a pod of the held StatefulSet was replaced: $(pod_uids app="$sts") (before: $sts_pods_before)"
[[ $(jp statefulset/"$sts" -n "$demo_ns" -o jsonpath='{.spec.updateStrategy.rollingUpdate.partition}') == 2147483647 ]] ||
  fail "the StatefulSet's partition is no longer pinned after the verdict"
say "StatefulSet $sts held $((SECONDS - sts_t0)) s, no pod replaced: revision $(jp statefulset/"$sts" -n "$demo_ns" -o jsonpath='{.status.currentRevision} running, {.status.updateRevision} held')"
gate_expect 2 "held" statefulset/"$sts"
# What `kubectl rollout status` says of a held StatefulSet or DaemonSet, as
# docs/workload-kinds.md tells users: not a signal of a finished rollout.
rollout_says() {  # RESOURCE EXIT-CODE WORDS
  local out rc=0
  out=$(kubectl rollout status -n "$demo_ns" "$1" --timeout=3s 2>&1) || rc=$?
  say "kubectl rollout status $1 while held: exit $rc: $(tr '\n' ' ' <<<"$out")"
  [[ $rc == "$2" && $out == *"$3"* ]] ||
    fail "kubectl rollout status $1 while held: exit $rc, '$out'; docs/workload-kinds.md says exit $2, '$3'"
}
rollout_says statefulset/"$sts" 0 "partitioned roll out complete: 0 new pods have been updated"

# The DaemonSet: its template becomes exactly the held Deployment's, labels
# aside. The same admission switches it to OnDelete (its pod is not
# replaced); its canary finds the Deployment canary's runs of the same Job
# (the measurement key leaves labels out) and copies them.
ds_pods_before=$(pod_uids app="$ds")
[[ -n $ds_pods_before ]] || fail "DaemonSet $ds runs no pod"
ds_patch=$(kubectl get deployment/"$deploy" -n "$demo_ns" -o json | python3 -c '
import json, sys
template = json.load(sys.stdin)["spec"]["template"]
template["metadata"]["labels"] = {"app": sys.argv[1]}
print(json.dumps({"spec": {"template": template}}))' "$ds")
ds_t0=$SECONDS
kubectl patch daemonset/"$ds" -n "$demo_ns" --type merge -p "$ds_patch"
ds_strategy=$(jp daemonset/"$ds" -n "$demo_ns" -o jsonpath='{.spec.updateStrategy.type}')
[[ $ds_strategy == OnDelete ]] || fail "the DaemonSet's changed template was not held: strategy '$ds_strategy', want OnDelete"
[[ -n $(jp daemonset/"$ds" -n "$demo_ns" -o jsonpath='{.metadata.annotations.allocguard\.io/held-candidate}') ]] ||
  fail "no allocguard.io/held-candidate annotation on the held DaemonSet"
say "DaemonSet $ds held: strategy OnDelete, remembered $(jp daemonset/"$ds" -n "$demo_ns" -o jsonpath='{.metadata.annotations.allocguard\.io/user-update-strategy}')"
wait_for 60 "a ReplayCanary for the DaemonSet's template" has_canary daemonset "$ds" DaemonSet
ds_canary=$(canary_of daemonset "$ds" DaemonSet)
[[ $(jp replaycanary/"$ds_canary" -n "$demo_ns" -o jsonpath='{.spec.templateHash}') == \
  "$(jp replaycanary/"$canary" -n "$demo_ns" -o jsonpath='{.spec.templateHash}')" ]] ||
  fail "the DaemonSet's canary $ds_canary measures another template than the Deployment's $canary"
ds_done() { canary_done "$ds_canary"; }
wait_for 120 "the DaemonSet's canary $ds_canary done" ds_done
print_variants "$ds_canary"
expect_retention "$ds_canary" "the DaemonSet's"
ds_reused=$(jp replaycanary/"$ds_canary" -n "$demo_ns" -o jsonpath='{.status.variants[*].reusedFrom}')
[[ $ds_reused == "$canary $canary" ]] ||
  fail "the DaemonSet's canary did not copy both runs of $canary (reusedFrom: '$ds_reused')"
# A candidate the Deployment's canary ran again (Inconclusive first) is
# copied with its earlier run, not started over.
candidate_runs() {  # CANARY: how many runs its candidate's entry records
  jp replaycanary/"$1" -n "$demo_ns" -o json |
    python3 -c 'import json, sys
v = [v for v in json.load(sys.stdin)["status"]["variants"] if v["name"] == "candidate"][0]
print(len(v.get("earlierRuns", [])) + 1)'
}
deploy_runs=$(candidate_runs "$canary")
[[ $(candidate_runs "$ds_canary") == "$deploy_runs" ]] ||
  fail "the DaemonSet's canary records $(candidate_runs "$ds_canary") candidate runs, the Deployment's $deploy_runs"
say "the DaemonSet's canary copied the Deployment's candidate ($deploy_runs run(s)) and jemalloc runs"
wait_for 60 "a RolloutHeld Warning on the DaemonSet naming jemalloc" kind_held_event daemonset "$ds"
kubectl events -n "$demo_ns" --for daemonset/"$ds" --types=Warning | grep RolloutHeld | tail -1
[[ $(pod_uids app="$ds") == "$ds_pods_before" ]] ||
  fail "the held DaemonSet's pod was replaced: $(pod_uids app="$ds") (before: $ds_pods_before)"
say "DaemonSet $ds held with its verdict $((SECONDS - ds_t0)) s after the template change, its pod not replaced"
gate_expect 2 "held" daemonset/"$ds"
rollout_says daemonset/"$ds" 1 "rollout status is only available for RollingUpdate strategy type"
# Its pod deleted while held (as an eviction or a node loss would): the
# controller makes every new pod from the held template, so the Pod webhook
# refuses it (rule D4, docs/workload-kinds.md), and the node runs none of the
# DaemonSet's pods until the release below creates one on the released
# template.
kubectl delete pod -n "$demo_ns" -l app="$ds" --wait=true --timeout=120s >/dev/null
ds_refused() {
  local events
  events=$(kubectl events -n "$demo_ns" --for daemonset/"$ds" --types=Warning 2>/dev/null) || return 1
  events=$(grep FailedCreate <<<"$events") || return 1
  [[ $events == *"DaemonSet $demo_ns/$ds is held by AllocatorPolicy"* ]]
}
wait_for 60 "the DaemonSet controller's new pod refused while held (FailedCreate)" ds_refused
ds_refusal=$(kubectl events -n "$demo_ns" --for daemonset/"$ds" --types=Warning)
grep FailedCreate <<<"$ds_refusal" | tail -1
sleep 10
[[ -z $(pod_uids app="$ds") ]] || fail "the held DaemonSet got a new pod: $(pod_uids app="$ds")"
say "DaemonSet $ds: its deleted pod not replaced while held (the controller's creates refused)"

# --- 4. switch ------------------------------------------------------------------
stage "switch: the policy goes to jemalloc, a new canary is Flat, the rollout completes on jemalloc"
# The canary of a jemalloc candidate needs no comparison run: the glibc
# comparison was just made (variants: [] keeps it to the candidate). And the
# candidate itself, jemalloc on this template under this load, is exactly what
# the hold's canary measured as its jemalloc variant: the operator copies
# that result (status.variants[].reusedFrom) instead of running it again.
switch_t0=$SECONDS
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
gate_expect 0 "released"

# The StatefulSet and the DaemonSet, released by the same switch: their new
# canaries copy the jemalloc runs (the StatefulSet's own, the Deployment's),
# the partition and the strategy come back as the user had them, and the
# pods roll onto jemalloc.
released() {  # KIND NAME
  [[ -z $(jp "$1"/"$2" -n "$demo_ns" -o jsonpath='{.metadata.annotations.allocguard\.io/held-candidate}') ]]
}
wait_for 120 "the StatefulSet released" released statefulset "$sts"
wait_for 120 "the DaemonSet released" released daemonset "$ds"
for k in "statefulset $sts StatefulSet $sts_canary" "daemonset $ds DaemonSet $old_canary"; do
  read -r resource name kind measured_by <<<"$k"
  c=$(canary_of "$resource" "$name" "$kind")
  v=$(jp replaycanary/"$c" -n "$demo_ns" -o jsonpath='{.status.verdict}')
  r=$(jp replaycanary/"$c" -n "$demo_ns" -o jsonpath='{.status.variants[?(@.name=="candidate")].reusedFrom}')
  [[ $v == Flat && $r == "$measured_by" ]] ||
    fail "$resource $name: the jemalloc policy's canary $c is '$v' (reusedFrom '$r'), want Flat from $measured_by"
  say "$resource $name: canary $c Flat, the jemalloc run measured by $r"
done
sts_partition=$(jp statefulset/"$sts" -n "$demo_ns" -o jsonpath='{.spec.updateStrategy.rollingUpdate.partition}')
[[ $sts_partition == "$sts_user_partition" ]] ||
  fail "the StatefulSet's partition is '$sts_partition' after the release, want the user's '$sts_user_partition'"
[[ $(jp daemonset/"$ds" -n "$demo_ns" -o jsonpath='{.spec.updateStrategy.type}') == RollingUpdate ]] ||
  fail "the DaemonSet's RollingUpdate strategy was not restored"
kubectl rollout status -n "$demo_ns" statefulset/"$sts" --timeout=300s
sts_rolled=$((SECONDS - switch_t0))
kubectl rollout status -n "$demo_ns" daemonset/"$ds" --timeout=180s
ds_rolled=$((SECONDS - switch_t0))
for p in "$sts-0" "$sts-1" $(running_pod app="$ds" ready); do
  [[ $(jp pod/"$p" -n "$demo_ns" -o jsonpath='{.spec.containers[?(@.name=="server")].env[?(@.name=="RELEASE")].value}') == 2 ]] ||
    fail "pod $p does not run the released template (RELEASE=2)"
  wait_for 60 "the guard of $p reports jemalloc loaded" guard_says "$p" jemalloc
  maps_have "$p" libjemalloc.so.2 || fail "ratchet_service in $p does not map libjemalloc.so.2"
done
[[ $(pod_uids app="$sts") != "$sts_pods_before" ]] || fail "the StatefulSet's pods were not replaced after the release"
say "StatefulSet $sts rolled ${sts_rolled} s and DaemonSet $ds ${ds_rolled} s after the policy switch; every pod RELEASE=2 with jemalloc mapped, as its guard reports"
gate_expect 0 "released" statefulset/"$sts"
gate_expect 0 "released" daemonset/"$ds"
# Their pods go, to leave the node to the next stages.
kubectl delete -n "$demo_ns" -f "$here/product/kinds-demo.yaml" --wait=false >/dev/null
kubectl delete pvc -n "$demo_ns" data-"$sts"-0 data-"$sts"-1 --wait=false >/dev/null

# --- 5. guard -------------------------------------------------------------------
stage "guard: metrics scraped, Backpressure takes the pod out of its Service and back, Restart before the OOM killer"
# e2e/product/guard-demo.yaml: the demo workload behind a Service, under a
# policy whose guard acts at 256Mi. GET /ballast on the workload (through the
# API server's pod proxy) moves its anonymous memory on demand.
kubectl apply -n "$demo_ns" -f "$here/product/guard-demo.yaml"
kubectl rollout status -n "$demo_ns" deployment/guard-demo --timeout=120s
guard_pod() {
  running_pod app=guard-demo
}
ballast() {  # POD QUERY
  kubectl get --raw "/api/v1/namespaces/$demo_ns/pods/$1:8080/proxy/ballast?$2"
}
pod_condition() {  # POD TYPE
  jp pod/"$1" -n "$demo_ns" -o jsonpath="{.status.conditions[?(@.type==\"$2\")].status}"
}
endpoint_ready() {  # the Service's EndpointSlice: is the pod's address ready?
  jp endpointslices -n "$demo_ns" -l kubernetes.io/service-name=guard-demo \
    -o jsonpath='{.items[*].endpoints[*].conditions.ready}'
}
gpod=$(guard_pod)
[[ -n $gpod ]] || fail "no running pod of guard-demo"
headroom_is() { [[ $(pod_condition "$gpod" allocguard.io/MemoryHeadroom) == "$1" ]]; }
ready_is() { [[ $(pod_condition "$gpod" Ready) == "$1" && $(endpoint_ready) == "$2" ]]; }
wait_for 60 "pod $gpod Ready, its readiness gate allocguard.io/MemoryHeadroom True" headroom_is True
wait_for 60 "pod $gpod in the Service's endpoints, ready" ready_is True true
echo "\$ kubectl get --raw .../pods/$gpod:9464/proxy/metrics (the guard's own metrics)"
guard_metrics_of() { kubectl get --raw "/api/v1/namespaces/$demo_ns/pods/$1:9464/proxy/metrics" 2>/dev/null; }
guard_metrics_of "$gpod" | grep -E '^allocguard_guard_(anon_bytes|judged_bytes|threshold_bytes|limit_bytes|pressure_ratio|floor_bytes|floor_slope_gib_per_hour|allocator_processes|allocator_loaded|state)' ||
  fail "the guard of $gpod serves no metrics"

say "holding 320 MiB in $gpod (threshold 256Mi): $(ballast "$gpod" mib=320)"
t0=$SECONDS
wait_for 60 "the guard set MemoryHeadroom False" headroom_is False
wait_for 60 "pod $gpod not Ready, its endpoint not ready: the Service sends it no traffic" ready_is False false
backpressure_s=$((SECONDS - t0))
say "releasing the ballast: $(ballast "$gpod" mib=0)"
t0=$SECONDS
wait_for 60 "the guard set MemoryHeadroom True again (after its release samples)" headroom_is True
wait_for 60 "pod $gpod Ready and in the Service's endpoints again" ready_is True true
release_s=$((SECONDS - t0))
pod_events() { kubectl events -n "$demo_ns" --for pod/"$1" 2>/dev/null; }
events=$(pod_events "$gpod")
grep -qw MemoryBackpressure <<<"$events" || fail "no MemoryBackpressure event on $gpod"
grep -q MemoryBackpressureReleased <<<"$events" || fail "no MemoryBackpressureReleased event on $gpod"
grep -E 'MemoryBackpressure' <<<"$events" || true
say "Backpressure: out of the Service ${backpressure_s} s after crossing the threshold, back ${release_s} s after the memory went"

# Restart: the same workload under a 512Mi cgroup limit, its memory creeping
# up at 16 MiB/s towards 700 MiB. The guard must SIGTERM it at its restart
# level (the threshold, 384Mi) before the kernel's OOM killer would SIGKILL it.
kubectl patch allocatorpolicy/guard-demo -n "$demo_ns" --type merge \
  -p '{"spec":{"guard":{"action":"Restart","threshold":"384Mi"}}}'
kubectl rollout restart -n "$demo_ns" deployment/guard-demo
kubectl rollout status -n "$demo_ns" deployment/guard-demo --timeout=120s
gpod=$(guard_pod)
[[ -n $gpod ]] || fail "no running pod of guard-demo after the restart"
restarts() {
  jp pod/"$gpod" -n "$demo_ns" -o jsonpath='{.status.containerStatuses[?(@.name=="server")].restartCount}'
}
[[ $(restarts) == 0 ]] || fail "pod $gpod restarted before the test began"
guard_args=$(jp pod/"$gpod" -n "$demo_ns" -o jsonpath='{.spec.initContainers[?(@.name=="allocguard-guard")].args}{.spec.containers[?(@.name=="allocguard-guard")].args}')
[[ $guard_args == *Restart* ]] || fail "the guard of $gpod was not injected with the Restart action: $guard_args"
guard_serves() {
  local m
  m=$(guard_metrics_of "$gpod") || return 1
  grep -q '^allocguard_guard_limit_bytes' <<<"$m"
}
wait_for 60 "the guard of $gpod (action Restart) serves its metrics" guard_serves
say "growing $gpod towards 700 MiB at 16 MiB/s (limit 512Mi): $(ballast "$gpod" 'mib=700&rate=16')"
t0=$SECONDS
restarted() { [[ $(restarts) -ge 1 ]]; }
wait_for 120 "the server container restarted" restarted
restart_s=$((SECONDS - t0))
last=$(jp pod/"$gpod" -n "$demo_ns" -o jsonpath='{.status.containerStatuses[?(@.name=="server")].lastState.terminated.reason} exit {.status.containerStatuses[?(@.name=="server")].lastState.terminated.exitCode}')
say "the server container's last termination: $last"
[[ $last != OOMKilled* ]] || fail "the kernel OOM-killed the workload: the guard did not act first"
restart_event() {
  local events
  events=$(pod_events "$gpod") || return 1
  grep -q MemoryRestart <<<"$events"
}
wait_for 30 "a MemoryRestart event on $gpod" restart_event
pod_events "$gpod" | grep MemoryRestart | tail -1
say "Restart: SIGTERM from the guard, container restarted ${restart_s} s after the growth began, not OOM-killed"

# --- 6. libc ---------------------------------------------------------------------
stage "libc: Debian 11, Debian 12, musl and pre-forking pods load the allocator and publish its books, a static binary runs without either, the breaker trips on a wrong libc for a Deployment and a StatefulSet"
# e2e/product/libc-demo.yaml: one C service built on four bases
# (e2e/images/libc-demo.sh), governed by a jemalloc policy with libc auto.
"$here/images/libc-demo.sh"
kubectl apply -n "$demo_ns" -f "$here/product/libc-demo.yaml"
libc_variants=(debian11 debian12 musl static forking)
libc_pod() {  # VARIANT: its running pod
  running_pod app=libc-demo,variant="$1"
}
# What the process itself says serves its malloc: GET /allocator reads its
# own /proc/self/maps and names the mapped allocator library ("none").
libc_allocator() { kubectl get --raw "/api/v1/namespaces/$demo_ns/pods/$1:8080/proxy/allocator" 2>/dev/null; }
# The allocator's books (docs/allocator-books.md): the stats agent preloaded
# beside the allocator publishes in-use and retained bytes, and the guard
# exports them per container.
books_published() {  # POD (captured first: `| grep -q` trips pipefail)
  local m
  m=$(guard_metrics "$1") || return 1
  grep -Eq '^allocguard_allocator_books_processes\{container="server",state="published"\} [1-9]' <<<"$m"
}
books_processes() {  # POD: how many of the server's processes published books
  local m
  m=$(guard_metrics "$1") || return 1
  sed -n 's/^allocguard_allocator_books_processes{container="server",state="published"} \([0-9]*\)$/\1/p' <<<"$m"
}
two_books() { [[ $(books_processes "$1") == 2 ]]; }
books_line() {  # POD: what the guard exports of the server's books
  guard_metrics "$1" | sed -n 's/^allocguard_allocator_\(in_use\|retained\)_bytes{container="server"} \([0-9.e+]*\)$/\1=\2/p' | tr '\n' ' '
}
libc_check() {  # ALLOCATOR: every variant, after a rollout
  local v lpod answer
  for v in "${libc_variants[@]}"; do
    kubectl rollout status -n "$demo_ns" deployment/libc-demo-"$v" --timeout=120s >/dev/null
    lpod=$(libc_pod "$v")
    [[ -n $lpod ]] || fail "no running pod of libc-demo-$v"
    if [[ $v == static ]]; then
      answer=$(libc_allocator "$lpod")
      [[ $answer == none ]] || fail "the static binary in $lpod says its malloc is $answer"
      static_reported() {
        [[ $(pod_condition "$lpod" allocguard.io/AllocatorLoaded) == False ]] &&
          [[ $(jp pod/"$lpod" -n "$demo_ns" -o jsonpath='{.status.conditions[?(@.type=="allocguard.io/AllocatorLoaded")].message}') == *"static binary"* ]]
      }
      wait_for 60 "the guard of $lpod reports the static binary as not loaded" static_reported
      [[ $(jp pod/"$lpod" -n "$demo_ns" -o jsonpath='{.status.conditions[?(@.type=="allocguard.io/AllocatorLoaded")].message}') == *"no allocator books"* ]] ||
        fail "the guard of $lpod does not say the static binary has no books"
      ! books_published "$lpod" || fail "the static binary in $lpod publishes books"
      say "$v: running, Ready; the process says malloc is served by: $answer; the guard: $(jp pod/"$lpod" -n "$demo_ns" -o jsonpath='{.status.conditions[?(@.type=="allocguard.io/AllocatorLoaded")].message}')"
    else
      answer=$(libc_allocator "$lpod")
      [[ $answer == /opt/allocguard/inject/*lib$1* ]] || fail "$v: $lpod says its malloc is '$answer', want the injected $1"
      wait_for 60 "the guard of $lpod reports $1 loaded" guard_says "$lpod" "$1"
      # jemalloc's books split in-use from retained; mimalloc's have no
      # split (docs/allocator-books.md), so its round checks the allocator only.
      if [[ $1 == jemalloc ]]; then
        wait_for 60 "the guard of $lpod exports the books of $1" books_published "$lpod"
        # The pre-forking server: the child publishes books of its own,
        # beside its parent's (never a copy of the parent's file).
        if [[ $v == forking ]]; then
          wait_for 60 "both processes of $lpod publish their books" two_books "$lpod"
        fi
      fi
      say "$v: malloc served by $answer; guard: allocator=$(guard_allocator "$lpod"), books: $(books_line "$lpod")(processes published: $(books_processes "$lpod"))"
    fi
  done
}
libc_check jemalloc
case $(libc_allocator "$(libc_pod musl)") in
  */musl/*) ;;
  *) fail "the musl pod did not load the musl build" ;;
esac
case $(libc_allocator "$(libc_pod debian11)") in
  */glibc/*) ;;
  *) fail "the Debian 11 pod did not load the glibc build" ;;
esac
kubectl patch allocatorpolicy/libc-demo -n "$demo_ns" --type merge -p '{"spec":{"allocator":{"name":"mimalloc"}}}'
for v in "${libc_variants[@]}"; do kubectl rollout restart -n "$demo_ns" deployment/libc-demo-"$v" >/dev/null; done
libc_check mimalloc

# Before: what the injection did with Debian 12's own jemalloc in a Debian 11
# image (e2e/product/libc-before.yaml): the container never starts.
kubectl apply -n "$demo_ns" -f "$here/product/libc-before.yaml"
before_failed() {
  [[ $(jp pod/libc-before -n "$demo_ns" -o jsonpath='{.status.containerStatuses[0].restartCount}') -ge 1 ]] &&
    [[ $(jp pod/libc-before -n "$demo_ns" -o jsonpath='{.status.containerStatuses[0].lastState.terminated.message}') == *GLIBC_2.34* ]]
}
wait_for 120 "the Debian 11 pod with Debian 12's jemalloc fails to start and restarts" before_failed
say "before: $(jp pod/libc-before -n "$demo_ns" -o jsonpath='{.status.containerStatuses[0].state.waiting.reason} restarts={.status.containerStatuses[0].restartCount}: {.status.containerStatuses[0].lastState.terminated.message}' | tr -s '\n' ' ')"

# A wrong libc (e2e/product/libc-wrong.yaml: the musl build forced on a glibc
# workload). Under Enforce the new Deployment is held and its canary must
# report the candidate Failed with the loader's words.
kubectl apply -n "$demo_ns" -f "$here/product/libc-wrong.yaml"
# The same wrong library on a StatefulSet, its rollouts not gated: its pod
# crash-loops at once, and the breaker must keep it up (checked below). The
# StatefulSet comes once the policy is reconciled, so its pod is injected.
kubectl apply -n "$demo_ns" -f "$here/product/libc-wrong-statefulset.yaml" -l e2e-part=policy
db_policy_seen() { [[ -n $(jp allocatorpolicy/libc-wrong-db -n "$demo_ns" -o jsonpath='{.status.observedGeneration}') ]]; }
wait_for 60 "policy libc-wrong-db reconciled" db_policy_seen
kubectl apply -n "$demo_ns" -f "$here/product/libc-wrong-statefulset.yaml" -l e2e-part=workload
db_t0=$SECONDS
wrong_canary() {
  kubectl get replaycanaries -n "$demo_ns" -o json | python3 -c '
import json, sys
for c in json.load(sys.stdin)["items"]:
    if c["spec"].get("target", {}).get("name") == "libc-wrong":
        print(c["metadata"]["name"]); break'
}
wrong_canary_done() { local c; c=$(wrong_canary); [[ -n $c ]] && canary_done "$c"; }
wait_for 300 "the canary of libc-wrong finishes" wrong_canary_done
wcanary=$(wrong_canary)
start_failure=$(jp replaycanary/"$wcanary" -n "$demo_ns" -o jsonpath='{.status.variants[?(@.name=="candidate")].startFailure}')
say "canary $wcanary: $(jp replaycanary/"$wcanary" -n "$demo_ns" -o jsonpath='{.status.verdict}: {.status.explanation}')"
[[ $(jp replaycanary/"$wcanary" -n "$demo_ns" -o jsonpath='{.status.variants[?(@.name=="candidate")].phase}') == Failed ]] ||
  fail "the candidate of $wcanary is not Failed"
[[ $start_failure == *"error while loading shared libraries"* ]] ||
  fail "the candidate of $wcanary carries no loader message: '$start_failure'"
[[ $(jp deployment/libc-wrong -n "$demo_ns" -o jsonpath='{.spec.paused}') == true ]] ||
  fail "libc-wrong is not held after a Failed canary"
held_with_loader() {
  local events
  events=$(kubectl events -n "$demo_ns" --for deployment/libc-wrong 2>/dev/null) || return 1
  grep -q "error while loading shared libraries" <<<"$events"
}
wait_for 60 "an event on the held Deployment libc-wrong with the loader's message" held_with_loader
kubectl events -n "$demo_ns" --for deployment/libc-wrong 2>/dev/null | grep "error while loading" | tail -1

# Off releases the hold; the pods crash-loop under the wrong build, and the
# breaker must leave the workload running without the allocator.
kubectl patch allocatorpolicy/libc-wrong -n "$demo_ns" --type merge -p '{"spec":{"rollout":{"mode":"Off"}}}'
t0=$SECONDS
wrong_pod() {
  running_pod app=libc-wrong ready
}
wrong_runs() { [[ -n $(wrong_pod) ]]; }
wait_for 300 "a libc-wrong pod Ready (the breaker stopped injecting)" wrong_runs
breaker_s=$((SECONDS - t0))
wpod=$(wrong_pod)
suspended=$(jp pod/"$wpod" -n "$demo_ns" -o jsonpath='{.metadata.annotations.allocguard\.io/injection-suspended}')
[[ -n $suspended ]] || fail "$wpod runs, but carries no allocguard.io/injection-suspended annotation"
[[ -z $(jp pod/"$wpod" -n "$demo_ns" -o jsonpath='{.metadata.annotations.allocguard\.io/injected}') ]] ||
  fail "$wpod runs, yet says it was injected"
[[ $(libc_allocator "$wpod") == none ]] || fail "$wpod runs with an allocator preloaded"
failing=$(jp allocatorpolicy/libc-wrong -n "$demo_ns" -o jsonpath='{.status.conditions[?(@.type=="InjectionFailing")].status} {.status.conditions[?(@.type=="InjectionFailing")].message}')
[[ $failing == True* ]] || fail "policy libc-wrong has no InjectionFailing=True condition: $failing"
policy_events=$(kubectl events -n "$demo_ns" --for allocatorpolicy/libc-wrong 2>/dev/null || true)
grep -q InjectionFailing <<<"$policy_events" ||
  fail "no InjectionFailing event on policy libc-wrong"
say "breaker: pod $wpod Ready without the allocator ${breaker_s} s after the hold was released"
say "  pod annotation: $suspended"
say "  policy condition InjectionFailing: $failing"

# The StatefulSet: suspended by its pods' controller-revision-hash, its pod
# deleted and recreated by the StatefulSet controller without the allocator.
db_pod_runs() {
  [[ $(jp pod/libc-wrong-db-0 -n "$demo_ns" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]] &&
    [[ -n $(jp pod/libc-wrong-db-0 -n "$demo_ns" -o jsonpath='{.metadata.annotations.allocguard\.io/injection-suspended}') ]]
}
wait_for 300 "libc-wrong-db-0 Ready without the allocator (the breaker stopped injecting into the StatefulSet)" db_pod_runs
db_s=$((SECONDS - db_t0))
[[ $(libc_allocator libc-wrong-db-0) == none ]] || fail "libc-wrong-db-0 runs with an allocator preloaded"
db_revision=$(jp pod/libc-wrong-db-0 -n "$demo_ns" -o jsonpath='{.metadata.labels.controller-revision-hash}')
db_suspended=$(jp allocatorpolicy/libc-wrong-db -n "$demo_ns" -o jsonpath='{.status.injectionSuspended[0].workload} {.status.injectionSuspended[0].podTemplateHash}')
[[ $db_suspended == "StatefulSet/libc-wrong-db $db_revision" ]] ||
  fail "policy libc-wrong-db suspends '$db_suspended', want StatefulSet/libc-wrong-db $db_revision"
db_event() {
  local events
  events=$(kubectl events -n "$demo_ns" --for statefulset/libc-wrong-db 2>/dev/null) || return 1
  [[ $events == *InjectionFailing* ]]
}
wait_for 60 "an InjectionFailing event on StatefulSet libc-wrong-db" db_event
say "breaker (StatefulSet): libc-wrong-db-0 Ready without the allocator ${db_s} s after the StatefulSet was created"
say "  suspended: $db_suspended; pod annotation: $(jp pod/libc-wrong-db-0 -n "$demo_ns" -o jsonpath='{.metadata.annotations.allocguard\.io/injection-suspended}')"
kubectl delete -n "$demo_ns" -f "$here/product/libc-before.yaml" -f "$here/product/libc-demo.yaml" \
  -f "$here/product/libc-wrong.yaml" -f "$here/product/libc-wrong-statefulset.yaml" --wait=false >/dev/null

# --- webhook latency as the API server measures it ------------------------------
echo
echo "== webhook latency (apiserver_admission_webhook_admission_duration_seconds)"
kubectl get --raw /metrics | python3 "$here/product/webhook_latency.py"

# --- 7. uninstall ---------------------------------------------------------------
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
