#!/usr/bin/env bash
# Part of smoke.sh: proves the apiserver calls an admission webhook served by a
# pod behind a ClusterIP Service (apiserver flag --enable-aggregator-routing=true
# makes it dial the ready endpoint podIP:targetPort; there is no kube-proxy).
#
#   e2e/cluster/smoke_webhook.sh NAMESPACE     # env of the node cluster sourced
#
# Builds smoke_webhook/main.go (Go standard library only) into a FROM-scratch
# image, cached in $ALLOCGUARD_CACHE/images by the source's hash, imports it,
# serves it with a certificate from the cluster CA, and registers a
# ValidatingWebhookConfiguration that denies labelled ConfigMaps. Passes when
# creating such a ConfigMap is denied with the pod's message. Removes the
# webhook configuration on exit, so the cluster is never left with it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../images/versions.sh"
ns=$1
dir=${ALLOCGUARD_CLUSTER_DIR:-/tmp/allocguard-cluster}
k() { kubectl -n "$ns" "$@"; }
say() { echo "smoke_webhook.sh: $*" >&2; }

sum=$(cat "$here/smoke_webhook/main.go" "$here/smoke_webhook/go.mod" | sha256sum | cut -c1-12)
name=localhost/allocguard-smoke-webhook:$sum
archive=$IMAGES_CACHE/smoke-webhook-$sum.tar
if [[ ! -s $archive ]]; then
  work=$(mktemp -d)
  (cd "$here/smoke_webhook" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod \
    go build -trimpath -ldflags "-s -w" -o "$work/webhook" .)
  c=$(buildah from scratch)
  buildah copy --quiet "$c" "$work/webhook" /webhook >/dev/null
  buildah config --entrypoint '["/webhook"]' --user 65534:65534 "$c"
  buildah commit --quiet --rm --format docker "$c" "$name" >/dev/null
  mkdir -p "$IMAGES_CACHE"
  buildah push --quiet "$name" "docker-archive:$archive.tmp:$name"
  mv "$archive.tmp" "$archive"
  rm -rf "$work"
fi
"$here/../images/import.sh" "$archive" 2>/dev/null

# Serving certificate for the Service's DNS name, signed by the cluster CA.
work=$(mktemp -d)
trap 'rm -rf "$work"; kubectl delete validatingwebhookconfiguration allocguard-smoke --ignore-not-found >/dev/null 2>&1' EXIT
svc=smoke-webhook
openssl req -newkey rsa:2048 -nodes -keyout "$work/tls.key" -out "$work/tls.csr" -subj "/CN=$svc.$ns.svc" 2>/dev/null
printf 'subjectAltName=DNS:%s.%s.svc\nextendedKeyUsage=serverAuth\n' "$svc" "$ns" >"$work/ext"
openssl x509 -req -in "$work/tls.csr" -CA "$dir/pki/ca.crt" -CAkey "$dir/pki/ca.key" -CAcreateserial \
  -CAserial "$work/ca.srl" -days 1 -out "$work/tls.crt" -extfile "$work/ext" 2>/dev/null
k create secret tls smoke-webhook --cert="$work/tls.crt" --key="$work/tls.key" >/dev/null

k apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: $svc}
spec:
  replicas: 1
  selector: {matchLabels: {app: $svc}}
  template:
    metadata: {labels: {app: $svc}}
    spec:
      terminationGracePeriodSeconds: 1
      securityContext: ${pod_security:-{\}}
      containers:
      - name: main
        image: $name
        imagePullPolicy: Never
        securityContext: ${container_security:-{\}}
        ports: [{containerPort: 8443}]
        readinessProbe: {tcpSocket: {port: 8443}, periodSeconds: 1}
        volumeMounts: [{name: tls, mountPath: /tls, readOnly: true}]
      volumes: [{name: tls, secret: {secretName: smoke-webhook}}]
---
apiVersion: v1
kind: Service
metadata: {name: $svc}
spec:
  selector: {app: $svc}
  ports: [{port: 443, targetPort: 8443}]
YAML
k rollout status deployment/$svc --timeout=120s >/dev/null || { say "webhook Deployment did not roll out"; exit 1; }

kubectl apply -f - >/dev/null <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: allocguard-smoke}
webhooks:
- name: deny.smoke.allocguard.io
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  timeoutSeconds: 5
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: $ns}}
  objectSelector: {matchLabels: {allocguard-smoke/deny: "true"}}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}]
  clientConfig:
    caBundle: $(base64 -w0 <"$dir/pki/ca.crt")
    service: {namespace: $ns, name: $svc, path: /deny, port: 443}
YAML

# The webhook configuration and the EndpointSlice reach the apiserver's caches
# a moment after they are written: retry until the pod answers.
out=
for ((i = 0; i < 30; i++)); do
  out=$(k create configmap "probe-$i" --from-literal=a=b --dry-run=client -o yaml |
    sed 's/^metadata:/metadata:\n  labels: {allocguard-smoke\/deny: "true"}/' |
    k create -f - 2>&1) && { say "a labelled ConfigMap was admitted: the webhook was not called"; sleep 1; continue; }
  [[ $out == *"denied by the allocguard-smoke webhook pod"* ]] && exit 0
  sleep 1
done
say "last answer: $out"
exit 1
