#!/usr/bin/env bash
# Starts a throwaway control plane on loopback: etcd + kube-apiserver
# (+ kube-controller-manager with --with-controller-manager), certificates made
# by openssl, free ports picked at start. Builds missing binaries first.
#
# --with-node adds the node tier (one per machine): kube-controller-manager,
# kube-scheduler, containerd with a CNI bridge, and a kubelet, so Deployments,
# Jobs, exec and logs work. It waits for the node to be Ready and the default
# ServiceAccount to exist. See node.sh and docs/cluster.md.
#
#   e2e/cluster/up.sh [--with-controller-manager | --with-node]
#   source "$ALLOCGUARD_CLUSTER_DIR/env"   # KUBECONFIG, ports, URLs
#   e2e/cluster/down.sh
#
# Secrets bypass the watch cache (--watch-cache-sizes=secrets#0), so a watch
# on them sees etcd compaction directly: tests use that to force 410 Gone.
#
# State lives in $ALLOCGUARD_CLUSTER_DIR (default /tmp/allocguard-cluster):
# pki/, logs, pid files, admin.kubeconfig and env.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/versions.sh"

with_kcm=0
with_node=0
for a in "$@"; do
  case $a in
    --with-controller-manager) with_kcm=1 ;;
    --with-node) with_node=1 with_kcm=1 ;;
    *) echo "up.sh: unknown argument $a" >&2; exit 2 ;;
  esac
done

dir=${ALLOCGUARD_CLUSTER_DIR:-/tmp/allocguard-cluster}
if [[ -f $dir/env ]]; then
  echo "up.sh: a cluster already runs from $dir; run e2e/cluster/down.sh first" >&2
  exit 1
fi

t_up=$(date +%s.%N)
step() {  # name start: prints how long a step took
  awk -v n="$1" -v a="$2" -v b="$(date +%s.%N)" 'BEGIN { printf "up.sh: %-22s %5.1f s\n", n, b - a }'
}

if ((with_node)); then
  source "$here/node.sh"
  source "$here/../images/versions.sh"
  node_tools=(containerd ctr runc buildah debootstrap gcc iptables /usr/lib/cni/bridge
    /usr/lib/cni/host-local)
  for tool in "${node_tools[@]}"; do
    command -v "$tool" >/dev/null && continue
    echo "up.sh: $tool is missing; installing the node tier's packages" >&2
    "$here/../../scripts/install-deps.sh" --node
    break
  done
  for tool in "${node_tools[@]}"; do
    command -v "$tool" >/dev/null || { echo "up.sh: $tool is still missing" >&2; exit 1; }
  done
  node_claim "$dir" || exit 1
  up_done=0
  trap '((up_done)) || "$here/down.sh" >/dev/null 2>&1' EXIT
fi

components=(etcd kube-apiserver kubectl)
((with_kcm)) && components+=(kube-controller-manager)
((with_node)) && components+=(kube-scheduler kubelet kube-proxy)
"$here/build.sh" "${components[@]}"

rm -rf "$dir"
mkdir -p "$dir/pki" "$dir/etcd-data"
pki=$dir/pki
((with_node)) && echo "$dir" >"$dir/node"

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
etcd_port=$(free_port)
etcd_peer_port=$(free_port)
api_port=$(free_port)
kcm_port=$(free_port)
sched_port=$(free_port)
proxy_healthz_port=$(free_port)
proxy_metrics_port=$(free_port)
api_host=127.0.0.1
service_range=10.0.0.0/24
if ((with_node)); then
  # Pods reach the apiserver at the `kubernetes` Service IP without kube-proxy:
  # SERVICE_IP is a local address, so the apiserver listens there on 443.
  api_host=$SERVICE_IP
  api_port=443
  service_range=$SERVICE_CIDR
fi

# --- certificates -----------------------------------------------------------
# The node tier uses P-256 keys: nine RSA keys took 8 s on a busy 2-core machine.
newkey=(-newkey rsa:2048)
((with_node)) && newkey=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1)
t=$(date +%s.%N)
(
  cd "$pki"
  openssl req -x509 "${newkey[@]}" -nodes -keyout ca.key -out ca.crt -days 30 \
    -subj /CN=allocguard-e2e-ca 2>/dev/null
  sign() {  # name subject extensions
    openssl req "${newkey[@]}" -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
    printf '%s\n' "$3" >"$1.ext"
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
      -out "$1.crt" -extfile "$1.ext" 2>/dev/null
    rm -f "$1.csr" "$1.ext"
  }
  sign apiserver /CN=kube-apiserver \
    "subjectAltName=DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:localhost,IP:127.0.0.1,IP:10.0.0.1,IP:10.96.0.1"
  sign admin "/O=system:masters/CN=allocguard-e2e-admin" "extendedKeyUsage=clientAuth"
  sign kcm /CN=system:kube-controller-manager "extendedKeyUsage=clientAuth"
  if ((with_node)); then
    sign scheduler /CN=system:kube-scheduler "extendedKeyUsage=clientAuth"
    sign kubelet-client "/O=system:nodes/CN=system:node:$NODE_NAME" "extendedKeyUsage=clientAuth"
    sign kube-proxy /CN=system:kube-proxy "extendedKeyUsage=clientAuth"
    sign kubelet "/CN=$NODE_NAME" "subjectAltName=DNS:$NODE_NAME,IP:$NODE_IP
extendedKeyUsage=serverAuth"
    # The apiserver's client identity towards the kubelet (exec, logs).
    sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" \
      "extendedKeyUsage=clientAuth"
  fi
  if ((with_node)); then
    openssl ecparam -name prime256v1 -genkey -noout -out sa.key 2>/dev/null
    openssl ec -in sa.key -pubout -out sa.pub 2>/dev/null
  else
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  fi
)

kubeconfig() {  # file cert key
  b64() { base64 -w0 <"$1"; }
  cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: https://$api_host:$api_port
    certificate-authority-data: $(b64 "$pki/ca.crt")
users:
- name: u
  user:
    client-certificate-data: $(b64 "$2")
    client-key-data: $(b64 "$3")
contexts:
- name: e2e
  context: {cluster: e2e, user: u, namespace: default}
current-context: e2e
KC
}
((with_node)) && step certificates "$t"
kubeconfig "$dir/admin.kubeconfig" "$pki/admin.crt" "$pki/admin.key"
kubeconfig "$dir/kcm.kubeconfig" "$pki/kcm.crt" "$pki/kcm.key"
if ((with_node)); then
  kubeconfig "$dir/scheduler.kubeconfig" "$pki/scheduler.crt" "$pki/scheduler.key"
  kubeconfig "$dir/kubelet.kubeconfig" "$pki/kubelet-client.crt" "$pki/kubelet-client.key"
  kubeconfig "$dir/kube-proxy.kubeconfig" "$pki/kube-proxy.crt" "$pki/kube-proxy.key"
fi

start() {  # name binary args...
  local name=$1
  shift
  setsid "$@" >"$dir/$name.log" 2>&1 </dev/null &
  echo $! >"$dir/$name.pid"
}

wait_for() {  # what seconds command...
  local what=$1 secs=$2
  shift 2
  for ((i = 0; i < secs * 4; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    # A process that has exited will not become ready: say so at once.
    if [[ -f $dir/$what.pid ]] && ! kill -0 "$(cat "$dir/$what.pid")" 2>/dev/null; then break; fi
    sleep 0.25
  done
  echo "up.sh: $what did not become ready in ${secs}s; its log:" >&2
  tail -n 30 "$dir/$what.log" >&2 || true
  "$here/down.sh" >/dev/null 2>&1 || true
  exit 1
}

# --- node network, containerd, images (in parallel with the control plane) --
if ((with_node)); then
  node_network_up
  node_containerd_up "$dir"
  # Build (first run only) and import the pause and base images while the
  # control plane starts; the kubelet waits for this job.
  (
    t=$(date +%s.%N)
    images=$("$here/../images/base.sh") || exit 1
    step "base images" "$t"
    t=$(date +%s.%N)
    for ((i = 0; i < 240; i++)); do node_ctr version >/dev/null 2>&1 && break; sleep 0.25; done
    step "containerd" "$t"
    t=$(date +%s.%N)
    for a in $images; do node_ctr images import "$a" >/dev/null || exit 1; done
    step "image import" "$t"
  ) >"$dir/images.out" 2>"$dir/images.log" &
  images_pid=$!
fi

# --- etcd -------------------------------------------------------------------
t=$(date +%s.%N)
start etcd "$ETCD_BIN/etcd" --name n0 --data-dir "$dir/etcd-data" \
  --listen-client-urls "http://127.0.0.1:$etcd_port" \
  --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$etcd_peer_port" \
  --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
  --initial-cluster "n0=http://127.0.0.1:$etcd_peer_port" \
  --unsafe-no-fsync --log-level warn
wait_for etcd 30 curl -fs "http://127.0.0.1:$etcd_port/health"
step etcd "$t"

# --- kube-apiserver -----------------------------------------------------------
node_api_flags=()
authz=RBAC
if ((with_node)); then
  authz=Node,RBAC
  # Webhooks and aggregated APIs are dialled at a ready endpoint (podIP:port),
  # not at the Service IP, so no kube-proxy is needed.
  node_api_flags=(--enable-aggregator-routing=true
    --enable-admission-plugins=NodeRestriction
    --kubelet-client-certificate="$pki/apiserver-kubelet-client.crt"
    --kubelet-client-key="$pki/apiserver-kubelet-client.key"
    --kubelet-certificate-authority="$pki/ca.crt"
    --kubelet-preferred-address-types=InternalIP)
fi
t=$(date +%s.%N)
start kube-apiserver "$K8S_BIN/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$etcd_port" \
  --bind-address=$api_host --advertise-address=$api_host --secure-port="$api_port" \
  --service-cluster-ip-range=$service_range --allow-privileged=true \
  --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
  --client-ca-file="$pki/ca.crt" \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
  --authorization-mode=$authz --v=1 \
  --watch-cache-sizes=secrets#0 ${node_api_flags[@]+"${node_api_flags[@]}"}
apiserver_ready() {
  curl -fs --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
    "https://$api_host:$api_port/readyz"
}
wait_for kube-apiserver 120 apiserver_ready
step kube-apiserver "$t"

# --- kube-controller-manager (optional) --------------------------------------
if ((with_kcm)); then
  start kube-controller-manager "$K8S_BIN/kube-controller-manager" \
    --kubeconfig="$dir/kcm.kubeconfig" \
    --authentication-kubeconfig="$dir/kcm.kubeconfig" --authorization-kubeconfig="$dir/kcm.kubeconfig" \
    --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
    --use-service-account-credentials=true --controllers='*' --leader-elect=false \
    --service-cluster-ip-range=$service_range --bind-address=127.0.0.1 --secure-port="$kcm_port" --v=1
fi

# --- the node: scheduler, containerd + images, kubelet -----------------------
if ((with_node)); then
  cat >"$dir/scheduler.yaml" <<YAML
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: $dir/scheduler.kubeconfig}
leaderElection: {leaderElect: false}
YAML
  start kube-scheduler "$K8S_BIN/kube-scheduler" --config="$dir/scheduler.yaml" \
    --authentication-kubeconfig="$dir/scheduler.kubeconfig" \
    --authorization-kubeconfig="$dir/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$sched_port" --v=1
  t=$(date +%s.%N)
  if ! wait "$images_pid"; then
    echo "up.sh: building or importing the base images failed:" >&2
    tail -n 20 "$dir/images.log" "$dir/containerd.log" >&2
    exit 1  # the EXIT trap runs down.sh
  fi
  cat "$dir/images.out"
  step "waited for images" "$t"
  t=$(date +%s.%N)
  node_kubelet_up "$dir"
  node_kube_proxy_up "$dir" "$proxy_healthz_port" "$proxy_metrics_port"
fi
if ((with_kcm)); then
  wait_for kube-controller-manager 60 curl -fsk "https://127.0.0.1:$kcm_port/healthz"
fi
if ((with_node)); then
  wait_for kube-scheduler 60 curl -fsk "https://127.0.0.1:$sched_port/healthz"
  kctl() { "$K8S_BIN/kubectl" --kubeconfig "$dir/admin.kubeconfig" "$@"; }
  node_ready() {
    [[ $(kctl get node "$NODE_NAME" \
      -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]
  }
  wait_for kubelet 180 node_ready
  step "kubelet (node Ready)" "$t"
  t=$(date +%s.%N)
  wait_for kube-proxy 60 curl -fs "http://127.0.0.1:$proxy_healthz_port/healthz"
  step "kube-proxy" "$t"
  t=$(date +%s.%N)
  wait_for kube-controller-manager 60 kctl -n default get serviceaccount default
  step "default ServiceAccount" "$t"
fi

cat >"$dir/env" <<ENV
export KUBECONFIG=$dir/admin.kubeconfig
export ALLOCGUARD_TEST_KUBECONFIG=$dir/admin.kubeconfig
export ALLOCGUARD_TEST_APISERVER=https://$api_host:$api_port
export ALLOCGUARD_TEST_ETCD=http://127.0.0.1:$etcd_port
export ALLOCGUARD_TEST_CA=$pki/ca.crt
export ALLOCGUARD_TEST_KUBECTL=$K8S_BIN/kubectl
export PATH=$K8S_BIN:\$PATH
ENV
if ((with_node)); then
  cat >>"$dir/env" <<ENV
export ALLOCGUARD_NODE_NAME=$NODE_NAME
export ALLOCGUARD_NODE_IP=$NODE_IP
export ALLOCGUARD_CONTAINERD_ADDRESS=$CONTAINERD_SOCK
export ALLOCGUARD_POD_CIDR=$POD_CIDR
export ALLOCGUARD_SERVICE_CIDR=$SERVICE_CIDR
export ALLOCGUARD_IN_CLUSTER_APISERVER=https://$SERVICE_IP:443
export ALLOCGUARD_BASE_IMAGE=$(base_image "$DEBIAN_SUITE")
export ALLOCGUARD_PAUSE_IMAGE=$PAUSE_IMAGE
ENV
  step "node cluster up (total)" "$t_up"
  up_done=1
fi
echo "control plane up: apiserver https://$api_host:$api_port, etcd 127.0.0.1:$etcd_port" \
  "(state in $dir; source $dir/env)"
