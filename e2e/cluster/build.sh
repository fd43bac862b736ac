#!/usr/bin/env bash
# Builds the pinned etcd and Kubernetes binaries from the Go module proxy into
# the version-keyed cache (see versions.sh). Components already cached are
# skipped, so this is cheap after the first run.
#
#   e2e/cluster/build.sh                    # everything
#   e2e/cluster/build.sh etcd kube-apiserver  # only these
#   e2e/cluster/build.sh helm               # Helm, for the chart tests
#
# Components: etcd kube-apiserver kube-controller-manager kube-scheduler
#             kubelet kubectl kube-proxy helm
# Prints the wall time of whatever it had to build.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/versions.sh"

all=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
wanted=("$@")
((${#wanted[@]})) || wanted=("${all[@]}")

export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
# The module proxy is reachable here but sum.golang.org is not; the proxy
# serves the same content-addressed zips, and go.sum pins them after first use.
export GOSUMDB=${GOSUMDB:-off}
export GOPROXY=${GOPROXY:-https://proxy.golang.org}
# The binaries are stripped (-ldflags "-s -w"), so the compiler need not
# write the DWARF the linker would throw away: on this 2-core machine
# `go build -a std` took 23.2 s with -dwarf=false against 32.2 s without
# (docs/e2e.md, "The fresh machine").
gcflags=all=-dwarf=false

k8s_pkgs=()
need_etcd=0
need_helm=0
for c in "${wanted[@]}"; do
  case $c in
    etcd) [[ -x $ETCD_BIN/etcd ]] || need_etcd=1 ;;
    helm) [[ -x $HELM_BIN/helm ]] || need_helm=1 ;;
    kubectl) [[ -x $K8S_BIN/kubectl ]] || k8s_pkgs+=(k8s.io/kubernetes/cmd/kubectl) ;;
    kube-apiserver | kube-controller-manager | kube-scheduler | kubelet | kube-proxy)
      [[ -x $K8S_BIN/$c ]] || k8s_pkgs+=("k8s.io/kubernetes/cmd/$c") ;;
    *) echo "build.sh: unknown component '$c'" >&2; exit 2 ;;
  esac
done

if ((need_etcd || need_helm || ${#k8s_pkgs[@]})) && ! command -v go >/dev/null; then
  echo "build.sh: Go is not installed (Kubernetes $K8S_VERSION needs Go >= 1.24)" >&2
  exit 1
fi
start=$SECONDS

if ((need_etcd)); then
  echo "building etcd $ETCD_VERSION into $ETCD_BIN"
  # etcd's server module has replace directives, so `go install pkg@v` cannot
  # work; a wrapper module that requires it can. Kept apart from the
  # Kubernetes module so their grpc/otel versions do not mix.
  work=$ALLOCGUARD_CACHE/gobuild/etcd-$ETCD_VERSION
  mkdir -p "$work" "$ETCD_BIN"
  (
    cd "$work"
    [[ -f go.mod ]] || go mod init local/etcdbuild >/dev/null 2>&1
    go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION"
    go build -trimpath -gcflags "$gcflags" -ldflags "-s -w" -o "$ETCD_BIN/etcd.tmp" go.etcd.io/etcd/server/v3
    mv "$ETCD_BIN/etcd.tmp" "$ETCD_BIN/etcd"
  )
fi

if ((need_helm)); then
  echo "building Helm $HELM_VERSION into $HELM_BIN"
  # Helm's module has no replace directives, but a wrapper module keeps its
  # go.sum out of the way and lets us ask which client-go it resolved to.
  work=$ALLOCGUARD_CACHE/gobuild/helm-$HELM_VERSION
  mkdir -p "$work" "$HELM_BIN"
  (
    cd "$work"
    [[ -f go.mod ]] || go mod init local/helmbuild >/dev/null 2>&1
    go get "helm.sh/helm/v3@v$HELM_VERSION"
    # The same version stamps as Helm's Makefile: `helm version`, and the
    # Kubernetes version `helm template` and `helm lint` assume without a cluster.
    kv=$(go list -m -f '{{.Version}}' k8s.io/client-go)  # v0.<minor>.<patch>
    kminor=$(echo "${kv#v}" | cut -d. -f2)
    ld="-s -w -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION"
    ld="$ld -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
    for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
      ld="$ld -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=$kminor"
    done
    go build -trimpath -gcflags "$gcflags" -ldflags "$ld" -o "$HELM_BIN/helm.tmp" helm.sh/helm/v3/cmd/helm
    mv "$HELM_BIN/helm.tmp" "$HELM_BIN/helm"
  )
fi

if ((${#k8s_pkgs[@]})); then
  echo "building Kubernetes $K8S_VERSION (${k8s_pkgs[*]##*/}) into $K8S_BIN"
  work=$ALLOCGUARD_CACHE/gobuild/k8s-$K8S_VERSION
  mkdir -p "$work" "$K8S_BIN"
  (
    cd "$work"
    if [[ ! -f go.mod.ready ]]; then  # absent also after an interrupted setup
      rm -f go.mod go.sum
      go mod init local/k8sbuild >/dev/null 2>&1
      go mod edit -go=1.24.0 -godebug=default=go1.24
      # k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces
      # them with ./staging paths, which a dependent module ignores. Replace
      # each with its published v0.<minor>.<patch> instead.
      gomod=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" |
        sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
      for m in $(sed -n 's|^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/.*|\1|p' "$gomod"); do
        go mod edit "-replace=$m=$m@v0.${K8S_VERSION#1.}"
      done
      touch go.mod.ready
    fi
    go get "${k8s_pkgs[@]/%/@v$K8S_VERSION}"
    minor=$(echo "$K8S_VERSION" | cut -d. -f2)
    ld="-s -w"
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ld="$ld -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
      ld="$ld -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
    done
    tmp=$K8S_BIN/.tmp.$$
    rm -rf "$K8S_BIN"/.tmp.*
    mkdir -p "$tmp"
    go build -trimpath -gcflags "$gcflags" -tags=selinux,notest,grpcnotrace -ldflags "$ld" -o "$tmp/" "${k8s_pkgs[@]}"
    mv "$tmp"/* "$K8S_BIN/"
    rmdir "$tmp"
  )
fi

if ((need_etcd || need_helm || ${#k8s_pkgs[@]})); then
  echo "cluster binaries built in $((SECONDS - start)) s"
else
  echo "cluster binaries cached in $ALLOCGUARD_CACHE"
fi
