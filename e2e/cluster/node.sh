# The node tier of e2e/cluster/up.sh --with-node: containerd (Debian 1.6) with
# a CNI bridge, and a kubelet. Sourced by up.sh and down.sh; not run directly.
# docs/cluster.md explains the addresses and why they were chosen.
#
# Only one node cluster runs per machine: the kubelet's cgroups (kubepods),
# its ports (10250, 10248), the apiserver's 10.96.0.1:443 and the interfaces
# below are machine-wide. $NODE_RUN/owner names the cluster directory that
# holds them.

NODE_RUN=/run/allocguard-node                 # containerd state, socket, netns, runc
NODE_NAME=${ALLOCGUARD_NODE_NAME:-allocguard-node}
NODE_LINK=allocguard0                         # holds NODE_IP and SERVICE_IP (a bridge with no ports:
                                              # this kernel has no dummy interfaces)
NODE_IP=10.89.0.1                             # the kubelet's InternalIP and serving address
SERVICE_CIDR=10.96.0.0/16
SERVICE_IP=10.96.0.1                          # the `kubernetes` Service; the apiserver listens on it
POD_CIDR=10.244.0.0/16                        # not podman's 10.88/16, so buildah/podman never collide
POD_GATEWAY=10.244.0.1
POD_BRIDGE=allocguard-cni
CONTAINERD_SOCK=$NODE_RUN/containerd.sock
# Sysctls the kubelet sets on start (setupKernelTunables) plus ip_forward, which
# the bridge plugin turns on; down.sh puts the saved values back.
NODE_SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward)

node_now() { date +%s.%N; }
node_since() { awk -v a="$1" -v b="$(node_now)" 'BEGIN { printf "%.1f", b - a }'; }

# node_claim DIR: take the machine's node slot or explain who holds it.
node_claim() {
  mkdir -p "$NODE_RUN"
  if ! (set -o noclobber; echo "$1" >"$NODE_RUN/owner") 2>/dev/null; then
    local owner
    owner=$(cat "$NODE_RUN/owner" 2>/dev/null)
    echo "up.sh: a node cluster already runs on this machine (state in ${owner:-?});" \
      "only one can. Stop it with: ALLOCGUARD_CLUSTER_DIR=${owner:-<dir>} e2e/cluster/down.sh" >&2
    return 1
  fi
  for v in "${NODE_SYSCTLS[@]}"; do echo "$v=$(sysctl -n "$v")"; done >"$NODE_RUN/sysctl.saved"
}

node_network_up() {
  ip link add "$NODE_LINK" type bridge
  ip addr add "$NODE_IP/32" dev "$NODE_LINK"
  ip addr add "$SERVICE_IP/32" dev "$NODE_LINK"
  ip link set "$NODE_LINK" up
}

# node_containerd_up DIR: write the config and CNI conflist, start containerd.
node_containerd_up() {
  local dir=$1
  mkdir -p "$dir/containerd/root" "$dir/cni/net.d" "$NODE_RUN/containerd"
  # Images and snapshots on a tmpfs: unpacking is faster, and down.sh drops
  # them with one umount instead of deleting thousands of files (7 s on disk).
  mount -t tmpfs -o mode=0711 allocguard-containerd "$dir/containerd/root"
  cat >"$dir/cni/net.d/10-allocguard.conflist" <<CNI
{"cniVersion": "1.0.0", "name": "allocguard", "plugins": [
  {"type": "bridge", "bridge": "$POD_BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$NODE_RUN/cni-ipam",
            "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$POD_GATEWAY"}]],
            "routes": [{"dst": "0.0.0.0/0"}]}}]}
CNI
  cat >"$dir/containerd/config.toml" <<TOML
version = 2
root = "$dir/containerd/root"
state = "$NODE_RUN/containerd"
[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # The VM lacks CAP_SYS_RESOURCE: without this every sandbox fails to start
  # ("can't get final child's PID from pipe: EOF") when the kubelet asks for a
  # negative oom_score_adj.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "$(command -v runc)"
        Root = "$NODE_RUN/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni/net.d"
    max_conf_num = 1
TOML
  # setsid gives containerd its own session, so $! is containerd's own PID.
  setsid containerd --config "$dir/containerd/config.toml" >"$dir/containerd.log" 2>&1 </dev/null &
  echo $! >"$dir/containerd.pid"
}

node_ctr() { ctr --address "$CONTAINERD_SOCK" --namespace k8s.io "$@"; }

# node_kubelet_up DIR: certificates must exist in DIR/pki; writes the config.
node_kubelet_up() {
  local dir=$1
  mkdir -p "$dir/kubelet" "$dir/pod-logs"
  cat >"$dir/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $dir/pki/kubelet.crt
tlsPrivateKeyFile: $dir/pki/kubelet.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization: {mode: Webhook}
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
podLogsDir: $dir/pod-logs
evictionHard: {memory.available: "100Mi", nodefs.available: "2%", nodefs.inodesFree: "2%", imagefs.available: "2%"}
# Nothing can be pulled again, and containerd 1.6 does not pin the pause image.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
YAML
  setsid "$K8S_BIN/kubelet" --config="$dir/kubelet.yaml" --kubeconfig="$dir/kubelet.kubeconfig" \
    --root-dir="$dir/kubelet" --cert-dir="$dir/kubelet/pki" \
    --node-ip="$NODE_IP" --hostname-override="$NODE_NAME" --v=1 \
    --containerd="$CONTAINERD_SOCK" \
    >"$dir/kubelet.log" 2>&1 </dev/null &
  echo $! >"$dir/kubelet.pid"
}

# node_kube_proxy_up DIR HEALTHZ_PORT METRICS_PORT: Services' ClusterIPs in
# the host's netfilter (iptables mode). Leaves conntrack sysctls and
# route_localnet alone; NodePorts open only on NODE_IP.
node_kube_proxy_up() {
  local dir=$1
  cat >"$dir/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $dir/kube-proxy.kubeconfig}
hostnameOverride: $NODE_NAME
mode: iptables
clusterCIDR: $POD_CIDR
healthzBindAddress: 127.0.0.1:$2
metricsBindAddress: 127.0.0.1:$3
nodePortAddresses: [$NODE_IP/32]
iptables: {localhostNodePorts: false}
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
YAML
  setsid "$K8S_BIN/kube-proxy" --config="$dir/kube-proxy.yaml" --v=1 \
    >"$dir/kube-proxy.log" 2>&1 </dev/null &
  echo $! >"$dir/kube-proxy.pid"
}

# Removes every KUBE-* chain and the rules that jump to them: kube-proxy's
# Service rules and the kubelet's own (KUBE-FIREWALL, KUBE-KUBELET-CANARY),
# which the kubelet writes whenever an iptables binary exists.
node_iptables_clean() {
  local ipt table rule c chains
  for ipt in iptables ip6tables; do
    command -v $ipt >/dev/null || continue
    for table in filter nat mangle; do
      $ipt -t $table -S 2>/dev/null | grep -E '^-A [A-Z]+ .*-j KUBE-' | sed 's/^-A/-D/' |
        while read -r rule; do eval "$ipt -t $table $rule" 2>/dev/null; done
      chains=$($ipt -t $table -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^KUBE-/ { print $2 }')
      for c in $chains; do $ipt -t $table -F "$c" 2>/dev/null; done
      for c in $chains; do $ipt -t $table -X "$c" 2>/dev/null; done
    done
  done
}

# node_kill_pid_files FILE...: TERM them all, wait up to 3 s, KILL the rest.
node_kill_pid_files() {
  local f pids=() alive i
  for f in "$@"; do
    [[ -f $f ]] || continue
    kill -TERM "$(cat "$f")" 2>/dev/null && pids+=("$(cat "$f")")
    rm -f "$f"
  done
  for ((i = 0; i < 12 && ${#pids[@]}; i++)); do
    alive=()
    for f in "${pids[@]}"; do kill -0 "$f" 2>/dev/null && alive+=("$f"); done
    pids=(${alive[@]+"${alive[@]}"})
    ((${#pids[@]})) && sleep 0.25
  done
  for f in ${pids[@]+"${pids[@]}"}; do kill -KILL "$f" 2>/dev/null; done
  return 0
}

# The kubepods cgroup tree in every hierarchy, deepest first.
node_kubepods_cgroups() {
  local h
  for h in /sys/fs/cgroup/*/ /sys/fs/cgroup/unified/; do
    [[ -d ${h}kubepods ]] && find "${h}kubepods" -depth -type d
  done
}

# node_down DIR: undo node_claim .. node_kubelet_up, in reverse. Best effort,
# quiet, and safe to run twice or after a partial start.
node_down() {
  local dir=$1 pid m cg i
  node_kill_pid_files "$dir/kube-proxy.pid" "$dir/kubelet.pid"
  # Every container process of every pod (the pods' cgroups), then the shims
  # that served this containerd, then containerd itself.
  for i in 1 2 3 4 5; do
    local left=0
    while read -r cg; do
      [[ -f $cg/cgroup.procs ]] || continue
      while read -r pid; do
        kill -KILL "$pid" 2>/dev/null && left=1
      done <"$cg/cgroup.procs"
    done < <(node_kubepods_cgroups 2>/dev/null)
    ((left)) || break
    sleep 0.2
  done
  for pid in $(grep -lsa -- "$CONTAINERD_SOCK" /proc/[0-9]*/cmdline | cut -d/ -f3); do
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == containerd-shim* ]] && kill -KILL "$pid" 2>/dev/null
  done
  node_kill_pid_files "$dir/containerd.pid"
  # Mounts left under the runtime and cluster directories (overlay rootfs,
  # netns bind mounts, shm, volumes, the image tmpfs), deepest first.
  for ((i = 0; i < 3; i++)); do
    for m in "$NODE_RUN" "$dir"; do
      awk '{print $2}' /proc/mounts | grep "^$m/" | sort -r |
        while read -r m; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
    done
  done
  while read -r cg; do rmdir "$cg" 2>/dev/null; done < <(node_kubepods_cgroups 2>/dev/null)
  node_iptables_clean
  ip link del "$POD_BRIDGE" 2>/dev/null
  ip link del "$NODE_LINK" 2>/dev/null
  # The kubelet links every container log into /var/log/containers.
  for m in /var/log/containers/*.log; do
    [[ -L $m && $(readlink "$m") == "$dir/"* ]] && rm -f "$m"
  done
  # libcni caches results in /var/lib/cni: our network's, and containerd's
  # loopback ones keyed by sandbox id.
  rm -f /var/lib/cni/results/allocguard-* 2>/dev/null
  for m in "$NODE_RUN"/containerd/io.containerd.grpc.v1.cri/sandboxes/*; do
    [[ -d $m ]] && rm -f "/var/lib/cni/results/cni-loopback-${m##*/}-lo"
  done
  rmdir /var/log/containers /var/log/pods /var/lib/cni/results /var/lib/cni 2>/dev/null
  if [[ -f $NODE_RUN/sysctl.saved ]]; then
    sysctl -q -p "$NODE_RUN/sysctl.saved" >/dev/null 2>&1
  fi
  rm -rf --one-file-system "$NODE_RUN"
}
