#!/usr/bin/env bash
# Starts a throwaway control plane on loopback: etcd + kube-apiserver
# (+ kube-controller-manager with --with-controller-manager), certificates made
# by openssl, free ports picked at start. Builds missing binaries first.
#
#   e2e/cluster/up.sh [--with-controller-manager]
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
for a in "$@"; do
  case $a in
    --with-controller-manager) with_kcm=1 ;;
    *) echo "up.sh: unknown argument $a" >&2; exit 2 ;;
  esac
done

dir=${ALLOCGUARD_CLUSTER_DIR:-/tmp/allocguard-cluster}
if [[ -f $dir/env ]]; then
  echo "up.sh: a cluster already runs from $dir; run e2e/cluster/down.sh first" >&2
  exit 1
fi

components=(etcd kube-apiserver kubectl)
((with_kcm)) && components+=(kube-controller-manager)
"$here/build.sh" "${components[@]}"

rm -rf "$dir"
mkdir -p "$dir/pki" "$dir/etcd-data"
pki=$dir/pki

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
etcd_port=$(free_port)
etcd_peer_port=$(free_port)
api_port=$(free_port)
kcm_port=$(free_port)

# --- certificates -----------------------------------------------------------
(
  cd "$pki"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 30 \
    -subj /CN=allocguard-e2e-ca 2>/dev/null
  sign() {  # name subject extensions
    openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
    printf '%s\n' "$3" >"$1.ext"
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
      -out "$1.crt" -extfile "$1.ext" 2>/dev/null
    rm -f "$1.csr" "$1.ext"
  }
  sign apiserver /CN=kube-apiserver \
    "subjectAltName=DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:localhost,IP:127.0.0.1,IP:10.0.0.1"
  sign admin "/O=system:masters/CN=allocguard-e2e-admin" "extendedKeyUsage=clientAuth"
  sign kcm /CN=system:kube-controller-manager "extendedKeyUsage=clientAuth"
  openssl genrsa -out sa.key 2048 2>/dev/null
  openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
)

kubeconfig() {  # file cert key
  b64() { base64 -w0 <"$1"; }
  cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: https://127.0.0.1:$api_port
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
kubeconfig "$dir/admin.kubeconfig" "$pki/admin.crt" "$pki/admin.key"
kubeconfig "$dir/kcm.kubeconfig" "$pki/kcm.crt" "$pki/kcm.key"

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
    sleep 0.25
  done
  echo "up.sh: $what did not become ready in ${secs}s; its log:" >&2
  tail -n 30 "$dir/$what.log" >&2 || true
  "$here/down.sh" >/dev/null 2>&1 || true
  exit 1
}

# --- etcd -------------------------------------------------------------------
start etcd "$ETCD_BIN/etcd" --name n0 --data-dir "$dir/etcd-data" \
  --listen-client-urls "http://127.0.0.1:$etcd_port" \
  --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$etcd_peer_port" \
  --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
  --initial-cluster "n0=http://127.0.0.1:$etcd_peer_port" \
  --unsafe-no-fsync --log-level warn
wait_for etcd 30 curl -fs "http://127.0.0.1:$etcd_port/health"

# --- kube-apiserver -----------------------------------------------------------
start kube-apiserver "$K8S_BIN/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$etcd_port" \
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$api_port" \
  --service-cluster-ip-range=10.0.0.0/24 --allow-privileged=true \
  --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
  --client-ca-file="$pki/ca.crt" \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
  --authorization-mode=RBAC --v=1 \
  --watch-cache-sizes=secrets#0
apiserver_ready() {
  curl -fs --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
    "https://127.0.0.1:$api_port/readyz"
}
wait_for kube-apiserver 120 apiserver_ready

# --- kube-controller-manager (optional) --------------------------------------
if ((with_kcm)); then
  start kube-controller-manager "$K8S_BIN/kube-controller-manager" \
    --kubeconfig="$dir/kcm.kubeconfig" \
    --authentication-kubeconfig="$dir/kcm.kubeconfig" --authorization-kubeconfig="$dir/kcm.kubeconfig" \
    --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
    --use-service-account-credentials=true --controllers='*' --leader-elect=false \
    --service-cluster-ip-range=10.0.0.0/24 --bind-address=127.0.0.1 --secure-port="$kcm_port" --v=1
  wait_for kube-controller-manager 60 curl -fsk "https://127.0.0.1:$kcm_port/healthz"
fi

cat >"$dir/env" <<ENV
export KUBECONFIG=$dir/admin.kubeconfig
export ALLOCGUARD_TEST_KUBECONFIG=$dir/admin.kubeconfig
export ALLOCGUARD_TEST_APISERVER=https://127.0.0.1:$api_port
export ALLOCGUARD_TEST_ETCD=http://127.0.0.1:$etcd_port
export ALLOCGUARD_TEST_CA=$pki/ca.crt
export ALLOCGUARD_TEST_KUBECTL=$K8S_BIN/kubectl
export PATH=$K8S_BIN:\$PATH
ENV
echo "control plane up: apiserver https://127.0.0.1:$api_port, etcd 127.0.0.1:$etcd_port" \
  "(state in $dir; source $dir/env)"
