# Pinned versions of the control-plane binaries, and where they are cached.
# Sourced by the other scripts in this directory.
#
# Kubernetes stays on 1.34.x: from 1.35 the kubelet refuses cgroup v1 by default.
# etcd is 3.6.x: the apiserver needs RequestWatchProgress (etcd >= 3.5.13).
K8S_VERSION=${K8S_VERSION:-1.34.4}
ETCD_VERSION=${ETCD_VERSION:-3.6.16}
# Helm 3 for the chart tests: the newest 3.x the module proxy serves.
HELM_VERSION=${HELM_VERSION:-3.22.0}

# Binaries are cached outside the repository, keyed by version, so a rebuild
# happens only when a pin changes.
ALLOCGUARD_CACHE=${ALLOCGUARD_CACHE:-/var/cache/allocguard}
K8S_BIN=$ALLOCGUARD_CACHE/k8s-$K8S_VERSION/bin
ETCD_BIN=$ALLOCGUARD_CACHE/etcd-$ETCD_VERSION/bin
HELM_BIN=$ALLOCGUARD_CACHE/helm-$HELM_VERSION/bin
