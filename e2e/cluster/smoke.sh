#!/usr/bin/env bash
# Smoke test of a node cluster (e2e/cluster/up.sh --with-node), run before
# anything else uses it. Checks what later stages rely on:
#   - a Deployment rolls out and a Job completes (scheduler, controllers,
#     kubelet, containerd, CNI, the locally imported base and pause images);
#   - kubectl logs and kubectl exec work (apiserver -> kubelet);
#   - every pod runs under Pod Security "restricted" (non-root, seccomp
#     RuntimeDefault, no capabilities), as the operator's chart will;
#   - a pod reaches the apiserver at KUBERNETES_SERVICE_HOST:PORT;
#   - a container with a memory limit sits in a cgroup v1 memory cgroup with
#     that limit, and the limit is enforced (a container that exceeds it is
#     OOMKilled);
#   - the apiserver calls an admission webhook served by a pod behind a
#     Service;
#   - a pod and the host reach that Service at its ClusterIP (kube-proxy).
# Prints how long each check took; exits non-zero naming the check that failed.
#
#   e2e/cluster/smoke.sh          # uses $ALLOCGUARD_CLUSTER_DIR/env
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${ALLOCGUARD_CLUSTER_DIR:-/tmp/allocguard-cluster}
[[ -f $dir/env ]] || { echo "smoke.sh: no cluster in $dir (run e2e/cluster/up.sh --with-node)" >&2; exit 1; }
source "$dir/env"
[[ ${ALLOCGUARD_NODE_NAME:-} ]] || { echo "smoke.sh: the cluster in $dir has no node (up.sh --with-node)" >&2; exit 1; }

ns=allocguard-smoke
image=$ALLOCGUARD_BASE_IMAGE
# What Pod Security "restricted" demands of every pod and container.
pod_security='{runAsNonRoot: true, runAsUser: 65534, seccompProfile: {type: RuntimeDefault}}'
container_security='{allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}'
export pod_security container_security
k() { kubectl -n "$ns" "$@"; }
fail() {
  echo "smoke.sh: FAILED: $*" >&2
  k get pods -o wide >&2 2>/dev/null || true
  k get events --sort-by=.lastTimestamp 2>/dev/null | tail -n 15 >&2 || true
  exit 1
}
t_all=$(date +%s.%N)
check() {  # name start
  awk -v n="$1" -v a="$2" -v b="$(date +%s.%N)" 'BEGIN { printf "smoke.sh: ok %-40s %5.1f s\n", n, b - a }'
}

# A fresh namespace each run; deleting it at the end also removes the webhook's objects.
kubectl delete namespace "$ns" --ignore-not-found --wait=true >/dev/null
kubectl delete validatingwebhookconfiguration allocguard-smoke --ignore-not-found >/dev/null
kubectl create namespace "$ns" >/dev/null
kubectl label namespace "$ns" pod-security.kubernetes.io/enforce=restricted >/dev/null
t=$(date +%s.%N)
for ((i = 0; i < 120; i++)); do k get serviceaccount default >/dev/null 2>&1 && break; sleep 0.5; done
k get serviceaccount default >/dev/null 2>&1 || fail "namespace $ns got no default ServiceAccount (kube-controller-manager)"
check "default ServiceAccount" "$t"

# --- Deployment, Job -----------------------------------------------------------
t=$(date +%s.%N)
k apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: smoke}
spec:
  replicas: 1
  selector: {matchLabels: {app: smoke}}
  template:
    metadata: {labels: {app: smoke}}
    spec:
      terminationGracePeriodSeconds: 1
      securityContext: $pod_security
      containers:
      - name: main
        image: $image
        imagePullPolicy: Never
        securityContext: $container_security
        command: [bash, -c, 'echo smoke-ready; exec sleep infinity']
        resources:
          requests: {cpu: 10m, memory: 48Mi}
          limits: {cpu: 500m, memory: 48Mi}
---
apiVersion: batch/v1
kind: Job
metadata: {name: smoke}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      securityContext: $pod_security
      containers:
      - name: main
        image: $image
        imagePullPolicy: Never
        securityContext: $container_security
        command: [bash, -c, 'echo smoke-job-done']
YAML
k rollout status deployment/smoke --timeout=120s >/dev/null || fail "Deployment smoke did not roll out"
check "Deployment rolled out" "$t"
k wait --for=condition=complete job/smoke --timeout=120s >/dev/null || fail "Job smoke did not complete"
check "Job completed" "$t"

# --- logs, exec ----------------------------------------------------------------
t=$(date +%s.%N)
[[ $(k logs job/smoke) == smoke-job-done ]] || fail "kubectl logs job/smoke did not print smoke-job-done"
[[ $(k logs deployment/smoke) == smoke-ready ]] || fail "kubectl logs deployment/smoke did not print smoke-ready"
check "kubectl logs" "$t"
t=$(date +%s.%N)
os=$(k exec deployment/smoke -- cat /etc/os-release) || fail "kubectl exec into deployment/smoke"
grep -q '^VERSION_CODENAME=' <<<"$os" || fail "kubectl exec: unexpected output: $os"
check "kubectl exec" "$t"

# --- pod -> apiserver ------------------------------------------------------------
t=$(date +%s.%N)
k exec deployment/smoke -- bash -c \
  'exec 3<>"/dev/tcp/$KUBERNETES_SERVICE_HOST/$KUBERNETES_SERVICE_PORT"' ||
  fail "a pod cannot connect to the apiserver at KUBERNETES_SERVICE_HOST:PORT"
check "pod reaches the apiserver (Service IP)" "$t"

# --- the memory limit is a real cgroup v1 limit, and enforced -------------------
t=$(date +%s.%N)
want=$((48 * 1024 * 1024))
inside=$(k exec deployment/smoke -- cat /sys/fs/cgroup/memory/memory.limit_in_bytes) ||
  fail "no cgroup v1 memory controller inside the container"
[[ $inside == "$want" ]] || fail "memory.limit_in_bytes inside the container is $inside, want $want"
pod=$(k get pod -l app=smoke -o jsonpath='{.items[0].metadata.uid}')
cid=$(k get pod -l app=smoke -o jsonpath='{.items[0].status.containerStatuses[0].containerID}')
cg=$(find /sys/fs/cgroup/memory/kubepods -maxdepth 4 -type d -path "*pod$pod/${cid#containerd://}" | head -n 1)
[[ $cg ]] || fail "no memory cgroup for container ${cid#containerd://} of pod $pod under /sys/fs/cgroup/memory/kubepods"
host=$(cat "$cg/memory.limit_in_bytes")
[[ $host == "$want" ]] || fail "$cg/memory.limit_in_bytes is $host, want $want"
check "memory limit in a v1 memory cgroup" "$t"
echo "smoke.sh:    ${cg%/*}/${cid:13:12}…/memory.limit_in_bytes = $host"
t=$(date +%s.%N)
# tail keeps a line without a newline in memory: 200 MiB against a 32 MiB limit.
k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: smoke-oom}
spec:
  restartPolicy: Never
  securityContext: $pod_security
  containers:
  - name: main
    image: $image
    imagePullPolicy: Never
    securityContext: $container_security
    command: [bash, -c, 'head -c 200M /dev/zero | tail']
    resources: {limits: {memory: 32Mi}}
YAML
reason=
for ((i = 0; i < 240; i++)); do
  reason=$(k get pod smoke-oom -o jsonpath='{.status.containerStatuses[0].state.terminated.reason}')
  [[ $reason ]] && break
  sleep 0.5
done
[[ $reason == OOMKilled ]] || fail "a container over its 32Mi limit ended with '${reason:-nothing}', want OOMKilled"
check "memory limit enforced (OOMKilled)" "$t"

# --- apiserver -> admission webhook in a pod behind a Service ------------------------
t=$(date +%s.%N)
"$here/smoke_webhook.sh" "$ns" || fail "the apiserver did not call the webhook served by a pod behind a Service"
check "apiserver calls a webhook behind a Service" "$t"

# --- Services' ClusterIPs (kube-proxy) -------------------------------------------
t=$(date +%s.%N)
ip=$(k get service smoke-webhook -o jsonpath='{.spec.clusterIP}')
# kube-proxy programs a new Service on its next sync, which can come after the
# endpoint is ready. A connection tried before that is lost for good: its
# SYN left un-NATed, and conntrack keeps sending the retries the same way.
# So each try is short (a fresh source port each time), for up to 60 s.
k exec deployment/smoke -- bash -c "
  for i in \$(seq 30); do
    timeout 2 bash -c 'exec 3<>/dev/tcp/$ip/443' 2>/dev/null && exit 0
    sleep 0.5
  done
  exit 1" ||
  fail "a pod cannot connect to Service smoke-webhook at its ClusterIP $ip:443 within 60 s (kube-proxy)"
curl -sk --max-time 5 -o /dev/null "https://$ip/" ||
  fail "the host cannot connect to Service smoke-webhook at its ClusterIP $ip:443 (kube-proxy)"
check "pod and host reach a ClusterIP Service" "$t"

kubectl delete namespace "$ns" --wait=false >/dev/null
awk -v a="$t_all" -v b="$(date +%s.%N)" 'BEGIN { printf "smoke.sh: all checks passed in %.1f s\n", b - a }'
