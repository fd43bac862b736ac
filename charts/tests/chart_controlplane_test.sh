#!/usr/bin/env bash
# The allocguard Helm chart against a real API server (e2e/cluster/up.sh):
# lint, schema, server-side dry run, install, upgrade, uninstall. The control
# plane has no nodes, so the operator's pods never run; what is checked is
# what the API server stores and enforces.
#
#   e2e/cluster/build.sh etcd kube-apiserver kubectl helm
#   ALLOCGUARD_CLUSTER_DIR=/tmp/me-cluster e2e/cluster/up.sh
#   source /tmp/me-cluster/env && charts/tests/chart_controlplane_test.sh
#
# With ALLOCGUARD_TEST_OPERATOR=<path to the allocguard binary> (ctest sets
# it) the real operator also runs once with the chart's arguments and the
# chart's ServiceAccount; without it a caBundle is written the way the
# operator writes it.
#
# Exit 77 (ctest: skipped) without a control plane in the environment.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
chart=$repo/charts/allocguard

if [[ -z ${ALLOCGUARD_TEST_KUBECONFIG:-} ]]; then
  echo "SKIP: no control plane (source \$ALLOCGUARD_CLUSTER_DIR/env after e2e/cluster/up.sh)"
  exit 77
fi
source "$repo/e2e/cluster/versions.sh"
helm=${ALLOCGUARD_TEST_HELM:-$HELM_BIN/helm}
kubectl=${ALLOCGUARD_TEST_KUBECTL:-kubectl}
if [[ ! -x $helm ]]; then
  echo "FAIL: no helm at $helm; build it with: e2e/cluster/build.sh helm" >&2
  exit 1
fi
export KUBECONFIG=$ALLOCGUARD_TEST_KUBECONFIG
work=$(mktemp -d /tmp/allocguard-chart-test.XXXXXX)
# Helm's caches and settings stay in the test's directory.
export HELM_CACHE_HOME=$work/cache HELM_CONFIG_HOME=$work/config HELM_DATA_HOME=$work/data

suffix=$(head -c4 /dev/urandom | od -An -tx1 | tr -d ' \n')
ns=allocguard-chart-$suffix
release=ag-$suffix
sa=system:serviceaccount:$ns:$release-allocguard
image=localhost/allocguard:e2e
# Only namespaces carrying this label are sent to this release's webhooks, so
# the test never slows down anything else running against the cluster.
scope=(--set-string "webhook.namespaceSelector.matchLabels.allocguard-chart-test=$suffix")

failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
pass() { echo "ok: $*"; }
expect_eq() {  # what got want
  if [[ $2 == "$3" ]]; then pass "$1 = $3"; else fail "$1: got '$2', want '$3'"; fi
}
operator_pid=""
cleanup() {
  [[ -z $operator_pid ]] || kill -TERM "$operator_pid" 2>/dev/null || true
  "$helm" uninstall "$release" -n "$ns" >/dev/null 2>&1 || true
  "$kubectl" delete namespace "$ns" "$ns-kept" --wait=false >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
jget() {  # kind name jsonpath [namespace]
  "$kubectl" get "$1" "$2" ${4:+-n "$4"} -o "jsonpath=$3"
}

echo "== the chart renders the CRDs of crds/ unchanged (crds.install), kept on uninstall (crds.keep)"
# The chart's CRDs are templates (templates/crds.yaml, written by
# crds/generate_crds.py), so that helm upgrade upgrades them: what they
# render must be the files of crds/ plus the chart's labels and, with
# crds.keep, Helm's resource policy "keep".
# crd_check MODE (keep|nokeep|none) < rendered chart
cat >"$work/crd_check.py" <<'EOF'
import glob, os, sys, yaml
want = {}
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.yaml"))):
    doc = yaml.safe_load(open(path))
    want[doc["metadata"]["name"]] = doc
got = {d["metadata"]["name"]: d for d in yaml.safe_load_all(sys.stdin) if d and d.get("kind") == "CustomResourceDefinition"}
mode = sys.argv[2]
if mode == "none":
    if got:
        sys.exit(f"crds.install=false still renders {sorted(got)}")
    print("no CRD (none)")
    sys.exit(0)
if sorted(got) != sorted(want):
    sys.exit(f"rendered CRDs {sorted(got)}, crds/ has {sorted(want)}")
for name, doc in got.items():
    meta = doc["metadata"]
    if doc["spec"] != want[name]["spec"] or doc["apiVersion"] != want[name]["apiVersion"]:
        sys.exit(f"{name}: the rendered spec differs from crds/; run python3 crds/generate_crds.py")
    if meta.get("labels", {}).get("app.kubernetes.io/managed-by") != "Helm":
        sys.exit(f"{name}: no chart labels: {meta.get('labels')}")
    policy = meta.get("annotations", {}).get("helm.sh/resource-policy")
    if policy != ("keep" if mode == "keep" else None):
        sys.exit(f"{name}: helm.sh/resource-policy is {policy!r} with {mode}")
print(f"{len(got)} CRDs ({mode})")
EOF
crd_check() { python3 "$work/crd_check.py" "$repo/crds" "$1"; }
for mode in keep nokeep none; do
  case $mode in
    keep) crd_set=() ;;
    nokeep) crd_set=(--set crds.keep=false) ;;
    none) crd_set=(--set crds.install=false) ;;
  esac
  if out=$("$helm" template t "$chart" "${crd_set[@]}" | crd_check "$mode" 2>&1); then
    pass "rendered CRDs: $out"
  else
    fail "rendered CRDs ($mode): $out"
  fi
done

echo "== helm lint"
for set in "" "--set certManager.enabled=true" \
  "--set metrics.serviceMonitor.enabled=true --set operator.watchNamespace=apps" \
  "--set grafanaDashboard.enabled=true" "--set networkPolicy.enabled=true" \
  "--set podMonitor.enabled=true --set prometheusRule.enabled=true"; do
  # shellcheck disable=SC2086
  if out=$("$helm" lint --strict "$chart" $set 2>&1); then
    pass "helm lint --strict $set"
  else
    fail "helm lint --strict $set: $out"
  fi
done

echo "== values.schema.json refuses bad values with the field's name"
refuse() {  # what-must-appear-in-the-error helm-args...
  local want=$1
  shift
  if out=$("$helm" template t "$chart" "$@" 2>&1); then
    fail "helm template $* was accepted"
  elif grep -q -- "$want" <<<"$out"; then
    pass "refused $* ($(grep -m1 -- "$want" <<<"$out" | sed "s/^ *//"))"
  else
    fail "helm template $* refused without naming '$want': $out"
  fi
}
refuse failurePolicy --set webhook.failurePolicy=Sometimes
refuse timeoutSeconds --set webhook.timeoutSeconds=60
refuse replicaCount --set replicaCount=0
refuse readOnlyRootFilesystem --set securityContext.readOnlyRootFilesystem=false
refuse runAsNonRoot --set podSecurityContext.runAsNonRoot=false
refuse capabilities/drop --set 'securityContext.capabilities.drop={NET_RAW}'
refuse seccompProfile --set podSecurityContext.seccompProfile.type=Unconfined
refuse pullPolicy --set image.pullPolicy=Sometimes
refuse "must be below replicaCount" --set replicaCount=1  # a PDB that would block every drain
refuse webhok --set webhok.timeoutSeconds=3  # a misspelt key is not silently ignored
refuse "'name' required" --set certManager.enabled=true --set certManager.issuerRef.kind=ClusterIssuer
refuse malloc --set operator.malloc=tcmalloc

echo "== rendered options"
cm=$("$helm" template t "$chart" -n agns --set certManager.enabled=true)
grep -q "cert-manager.io/inject-ca-from: agns/t-allocguard-webhook" <<<"$cm" &&
  pass "certManager: cainjector annotation" || fail "certManager: no inject-ca-from annotation"
grep -q -- "--webhook-cert-dir=/etc/allocguard/webhook-certs" <<<"$cm" &&
  pass "certManager: --webhook-cert-dir" || fail "certManager: no --webhook-cert-dir"
grep -q "kind: Certificate" <<<"$cm" && ! grep -q "webhook-ca-injection" <<<"$cm" &&
  pass "certManager: a Certificate, no caBundle rights for the operator" ||
  fail "certManager: Certificate missing or operator still granted caBundle rights"
wn=$("$helm" template t "$chart" --set operator.watchNamespace=apps)
grep -A3 "kind: RoleBinding" <<<"$wn" | grep -q "namespace: apps" && ! grep -q "name: t-allocguard-manager$" <(grep -A2 "kind: ClusterRoleBinding" <<<"$wn") &&
  pass "watchNamespace: manager role bound in that namespace only" ||
  fail "watchNamespace: manager role not bound in namespace apps alone"

echo "== podMonitor and prometheusRule"
# No Prometheus Operator CRDs here, so the rendered text is read as it is.
pm=$("$helm" template t "$chart" -n agns --show-only templates/podmonitor.yaml \
  --set podMonitor.enabled=true --set 'podMonitor.namespaces={shop}')
has() {  # what line...: each line appears in $pm as it is
  local what=$1 line
  shift
  for line; do grep -qxF -- "$line" <<<"$pm" || { fail "$what: no line '$line' in: $pm"; return; }; done
  pass "$what"
}
has "PodMonitor selects guarded pods" "      allocguard.io/guard: \"true\""
has "PodMonitor scrapes the guard's named port" "    - port: guard-metrics" "      path: /metrics"
has "PodMonitor in the release namespace, watching the namespaces given" "  namespace: agns" \
  "    matchNames:" "      - shop"
"$helm" template t "$chart" --show-only templates/prometheusrule.yaml \
  --set prometheusRule.enabled=true >"$work/prometheusrule.yaml"
if out=$(python3 "$repo/charts/tests/prometheus_rules_test.py" --rendered "$work/prometheusrule.yaml" 2>&1); then
  pass "$(grep '^rendered' <<<"$out")"
else
  fail "rendered PrometheusRule: $out"
fi
off=$("$helm" template t "$chart")
grep -qE "kind: (PodMonitor|PrometheusRule)" <<<"$off" &&
  fail "podMonitor/prometheusRule off renders one" || pass "podMonitor and prometheusRule off by default"

echo "== networkPolicy"
# Off by default: nothing rendered. On: ingress to the webhook and metrics
# ports only (following ports.*), from the peers given, or any source.
off=$("$helm" template t "$chart")
grep -q "kind: NetworkPolicy" <<<"$off" && fail "networkPolicy off renders a NetworkPolicy" ||
  pass "networkPolicy off: no NetworkPolicy"
np_json=$("$helm" template t "$chart" -n agns --show-only templates/networkpolicy.yaml \
  --set networkPolicy.enabled=true --set ports.webhook=10443 \
  --set-json 'networkPolicy.webhook.from=[{"ipBlock":{"cidr":"10.0.0.0/24"}}]' \
  --set-json 'networkPolicy.metrics.from=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]' |
  "$kubectl" create --dry-run=client -o json -f - 2>&1)
np_jq() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)" <<<"$np_json" 2>&1; }
expect_eq "networkPolicy ingress ports" \
  "$(np_jq '",".join(str(r["ports"][0]["port"]) for r in d["spec"]["ingress"])')" "10443,8080"
expect_eq "networkPolicy webhook source" \
  "$(np_jq 'd["spec"]["ingress"][0]["from"][0]["ipBlock"]["cidr"]')" "10.0.0.0/24"
expect_eq "networkPolicy metrics source" \
  "$(np_jq 'd["spec"]["ingress"][1]["from"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]')" \
  "monitoring"
expect_eq "networkPolicy selects the operator pods" \
  "$(np_jq 'd["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"]')" "operator"
any=$("$helm" template t "$chart" --show-only templates/networkpolicy.yaml --set networkPolicy.enabled=true |
  "$kubectl" create --dry-run=client -o json -f - 2>&1)
expect_eq "networkPolicy with no sources allows any" \
  "$(python3 -c 'import json,sys; d=json.load(sys.stdin); print(["from" in r for r in d["spec"]["ingress"]])' <<<"$any" 2>&1)" \
  "[False, False]"
refuse "additional properties 'bogus'" --set networkPolicy.enabled=true \
  --set-json 'networkPolicy.webhook.from=[{"bogus":1}]'

echo "== helm template | kubectl apply --dry-run=server"
"$kubectl" create namespace "$ns" >/dev/null
# Enforce and warn at Pod Security "restricted": the API server reports any
# violation of the operator's pod template when the Deployment is applied.
"$kubectl" label namespace "$ns" pod-security.kubernetes.io/enforce=restricted \
  pod-security.kubernetes.io/warn=restricted "allocguard-chart-test=$suffix" >/dev/null
if out=$("$helm" template "$release" "$chart" -n "$ns" --include-crds "${scope[@]}" \
  --set grafanaDashboard.enabled=true --set networkPolicy.enabled=true |
  "$kubectl" apply --dry-run=server -f - 2>&1); then
  pass "server-side dry run accepted $(grep -c 'created (server dry run)' <<<"$out") objects"
else
  fail "server-side dry run: $out"
fi
if grep -qi "would violate PodSecurity" <<<"$out"; then
  fail "Pod Security restricted: $(grep -i 'would violate' <<<"$out")"
else
  pass "no Pod Security \"restricted\" warning"
fi

echo "== CRDs applied before the chart managed them are adopted as docs/install.md says"
# CRDs applied with kubectl apply -f crds/ (other tests of this tier do) or
# by an earlier chart that had them in its crds/ folder carry no Helm
# ownership metadata. helm install refuses such CRDs until they are
# labelled and annotated for the release (docs/install.md, "CRDs").
crd_names=(allocatorpolicies.allocguard.io replaycanaries.allocguard.io)
"$kubectl" apply --server-side --force-conflicts -f "$repo/crds/" >/dev/null
for crd in "${crd_names[@]}"; do
  "$kubectl" label crd "$crd" app.kubernetes.io/managed-by- >/dev/null 2>&1 || true
  "$kubectl" annotate crd "$crd" meta.helm.sh/release-name- meta.helm.sh/release-namespace- \
    helm.sh/resource-policy- >/dev/null 2>&1 || true
done
if out=$("$helm" install "$release" "$chart" -n "$ns" "${scope[@]}" 2>&1); then
  fail "helm install adopted CRDs without Helm's ownership metadata"
  "$helm" uninstall "$release" -n "$ns" >/dev/null 2>&1 || true
elif grep -q "invalid ownership metadata" <<<"$out"; then
  pass "helm install refuses the CRDs applied without the chart: $(grep -o 'CustomResourceDefinition "[^"]*"' <<<"$out" | head -1)"
else
  fail "helm install failed, but not on the CRDs' ownership: $out"
fi
"$helm" uninstall "$release" -n "$ns" >/dev/null 2>&1 || true  # a failed release record, if any
for crd in "${crd_names[@]}"; do  # the commands of docs/install.md, "CRDs"
  "$kubectl" label crd "$crd" app.kubernetes.io/managed-by=Helm --overwrite >/dev/null
  "$kubectl" annotate crd "$crd" "meta.helm.sh/release-name=$release" "meta.helm.sh/release-namespace=$ns" \
    --overwrite >/dev/null
done

echo "== helm install"
if ! out=$("$helm" install "$release" "$chart" -n "$ns" "${scope[@]}" --set operator.logFormat=json \
  --set image.repository=localhost/allocguard --set image.tag=e2e --set image.pullPolicy=Never 2>&1); then
  fail "helm install: $out"
  exit 1
fi
pass "helm install"
# The first policy the notes print applies as it is (nothing outside the
# packaged chart is needed): a server-side dry run in the release namespace.
notes_policy=$(sed -n "/apply -f - <<'EOF'/,/^ *EOF\$/p" <<<"$out" | sed '1d;$d' | sed 's/^     //')
if [[ -z $notes_policy ]]; then
  fail "NOTES without a first policy to apply: $out"
elif dry=$("$kubectl" apply -n "$ns" --dry-run=server -f - <<<"$notes_policy" 2>&1); then
  pass "NOTES' first AllocatorPolicy is accepted by the API server ($dry)"
else
  fail "NOTES' first AllocatorPolicy is refused: $dry"
fi
for crd in "${crd_names[@]}"; do
  "$kubectl" wait --for condition=established --timeout=60s "crd/$crd" >/dev/null &&
    pass "CRD $crd established" || fail "CRD $crd not established"
  expect_eq "CRD $crd owned by the release" \
    "$(jget crd "$crd" '{.metadata.annotations.meta\.helm\.sh/release-name} {.metadata.labels.app\.kubernetes\.io/managed-by} {.metadata.annotations.helm\.sh/resource-policy}')" \
    "$release Helm keep"
done
name=$release-allocguard
for cr in "$name-manager" "$name-viewer" "$name-editor" "$name-webhook-ca-injection" "$name-guard"; do
  "$kubectl" get clusterrole "$cr" >/dev/null 2>&1 && pass "ClusterRole $cr" || fail "no ClusterRole $cr"
done
expect_eq "viewer aggregates to view" \
  "$(jget clusterrole "$name-viewer" '{.metadata.labels.rbac\.authorization\.k8s\.io/aggregate-to-view}')" true
expect_eq "editor aggregates to edit" \
  "$(jget clusterrole "$name-editor" '{.metadata.labels.rbac\.authorization\.k8s\.io/aggregate-to-edit}')" true
for r in "$name-leader-election" "$name-webhook-certificates"; do
  "$kubectl" -n "$ns" get role "$r" >/dev/null 2>&1 && pass "Role $r" || fail "no Role $r"
done

# With kube-controller-manager (up.sh --with-controller-manager or
# --with-node) the garbage collector and the role aggregation run; it creates
# the namespace's default ServiceAccount, which tells whether it is there.
kcm=0
"$kubectl" -n "$ns" get serviceaccount default >/dev/null 2>&1 && kcm=1
if ((kcm)); then
  "$kubectl" -n "$ns" create rolebinding chart-test-view --clusterrole=view --user=chart-test-viewer >/dev/null
  "$kubectl" -n "$ns" create rolebinding chart-test-edit --clusterrole=edit --user=chart-test-editor >/dev/null
  "$kubectl" -n "$ns" create rolebinding chart-test-admin --clusterrole=admin --user=chart-test-admin >/dev/null
  for _ in $(seq 60); do  # the aggregation controller runs asynchronously
    [[ $("$kubectl" auth can-i --as=chart-test-editor create allocatorpolicies.allocguard.io -n "$ns" 2>/dev/null) == yes &&
      $("$kubectl" auth can-i --as=chart-test-viewer list replaycanaries.allocguard.io -n "$ns" 2>/dev/null) == yes &&
      $("$kubectl" auth can-i --as=chart-test-admin override allocatorpolicies.allocguard.io -n "$ns" 2>/dev/null) == yes ]] && break
    sleep 0.5
  done
  expect_eq "built-in admin role may override holds" \
    "$("$kubectl" auth can-i --as=chart-test-admin override allocatorpolicies.allocguard.io -n "$ns" 2>/dev/null || true)" yes
  expect_eq "built-in edit role may not override holds" \
    "$("$kubectl" auth can-i --as=chart-test-editor override allocatorpolicies.allocguard.io -n "$ns" 2>/dev/null || true)" no
  expect_eq "built-in view role lists ReplayCanaries" \
    "$("$kubectl" auth can-i --as=chart-test-viewer list replaycanaries.allocguard.io -n "$ns" 2>/dev/null || true)" yes
  expect_eq "built-in view role cannot create AllocatorPolicies" \
    "$("$kubectl" auth can-i --as=chart-test-viewer create allocatorpolicies.allocguard.io -n "$ns" 2>/dev/null || true)" no
  expect_eq "built-in edit role creates AllocatorPolicies" \
    "$("$kubectl" auth can-i --as=chart-test-editor create allocatorpolicies.allocguard.io -n "$ns" 2>/dev/null || true)" yes
else
  echo "note: no kube-controller-manager: role aggregation and garbage collection are not checked"
fi

# What the operator's ServiceAccount may do: every call the operator makes...
can() {  # yes|no verb resource [kubectl auth can-i flags...]
  local want=$1
  shift
  local got
  got=$("$kubectl" auth can-i --as="$sa" "$@" 2>/dev/null || true)
  expect_eq "can-i $*" "$got" "$want"
}
can yes list allocatorpolicies.allocguard.io --all-namespaces
can yes watch allocatorpolicies.allocguard.io --all-namespaces
can yes update allocatorpolicies.allocguard.io --subresource=status -n default
can yes create replaycanaries.allocguard.io -n default
can yes update replaycanaries.allocguard.io --subresource=status -n default
can yes update replaycanaries.allocguard.io --subresource=finalizers -n default
can yes patch deployments.apps -n default
can yes watch pods --all-namespaces
can yes delete pods -n default
can yes create jobs.batch -n default
can yes delete jobs.batch -n default
can yes create events.events.k8s.io -n default
can yes patch events.events.k8s.io -n default
can yes create selfsubjectreviews.authentication.k8s.io
can yes create subjectaccessreviews.authorization.k8s.io
can yes override allocatorpolicies.allocguard.io -n default
can yes create leases.coordination.k8s.io -n "$ns"
can yes update lease/allocguard-operator -n "$ns"
can yes create secrets -n "$ns"
can yes get "secret/$name-webhook-tls" -n "$ns"
can yes update "secret/$name-webhook-tls" -n "$ns"
can yes get "secret/$name-webhook-tls-ca" -n "$ns"
can yes update "secret/$name-webhook-tls-ca" -n "$ns"
can yes update "mutatingwebhookconfigurations.admissionregistration.k8s.io/$name"
can yes update "validatingwebhookconfigurations.admissionregistration.k8s.io/$name"
# ...and nothing more.
can no get secret/other -n "$ns"
can no list secrets -n "$ns"
can no get secrets -n default
can no create secrets -n default
can no update mutatingwebhookconfigurations.admissionregistration.k8s.io/someone-else
can no create mutatingwebhookconfigurations.admissionregistration.k8s.io
can no update allocatorpolicies.allocguard.io -n default
can no delete replaycanaries.allocguard.io -n default
can no update deployments.apps -n default
can no create pods -n default
can no update lease/kube-scheduler -n kube-system
can no create leases.coordination.k8s.io -n default

# The guard's role, bound to a workload's ServiceAccount as docs/install.md says.
"$kubectl" -n "$ns" create rolebinding chart-test-guard --clusterrole="$name-guard" \
  --serviceaccount="$ns:web" >/dev/null
guard=system:serviceaccount:$ns:web
expect_eq "guard can patch pods/status" \
  "$("$kubectl" auth can-i --as="$guard" patch pods --subresource=status -n "$ns" 2>/dev/null || true)" yes
expect_eq "guard can create events" \
  "$("$kubectl" auth can-i --as="$guard" create events.events.k8s.io -n "$ns" 2>/dev/null || true)" yes
expect_eq "guard cannot patch pods" \
  "$("$kubectl" auth can-i --as="$guard" patch pods -n "$ns" 2>/dev/null || true)" no
expect_eq "guard cannot patch pods/status elsewhere" \
  "$("$kubectl" auth can-i --as="$guard" patch pods --subresource=status -n default 2>/dev/null || true)" no

expect_eq "operator replicas" "$(jget deployment "$name" '{.spec.replicas}' "$ns")" 2
args=$(jget deployment "$name" '{.spec.template.spec.containers[0].args}' "$ns")
for a in --leader-elect "--image=$image" "--operator-namespace=$ns" "--webhook-secret-name=$name-webhook-tls" \
  "--webhook-service-name=$name-webhook" "--mutating-webhook-configuration=$name" \
  "--validating-webhook-configuration=$name" --log-level=info --log-format=json; do
  grep -q -- "\"$a\"" <<<"$args" && pass "operator arg $a" || fail "operator args lack $a: $args"
done
expect_eq "image" "$(jget deployment "$name" '{.spec.template.spec.containers[0].image}' "$ns")" "$image"
# The operator's own malloc (operator.malloc, default jemalloc), from the
# image's allocator builds; glibc preloads nothing.
preload=$(jget deployment "$name" '{.spec.template.spec.containers[0].env[?(@.name=="LD_PRELOAD")].value}' "$ns")
expect_eq "operator malloc preloaded" "$preload" /opt/allocguard/lib/glibc/libjemalloc.so.2
expect_eq "operator.malloc=glibc preloads nothing" \
  "$("$helm" template t "$chart" --show-only templates/deployment.yaml --set operator.malloc=glibc |
    grep -c 'name: LD_PRELOAD' || true)" 0
expect_eq "pull policy" "$(jget deployment "$name" '{.spec.template.spec.containers[0].imagePullPolicy}' "$ns")" Never
expect_eq "PodDisruptionBudget minAvailable" "$(jget pdb "$name" '{.spec.minAvailable}' "$ns")" 1
expect_eq "webhook Service port" "$(jget service "$name-webhook" '{.spec.ports[0].port}->{.spec.ports[0].targetPort}' "$ns")" "443->webhook"
expect_eq "metrics Service port" "$(jget service "$name-metrics" '{.spec.ports[0].port}' "$ns")" 8080

check_webhooks() {  # when
  local when=$1
  for kind in mutatingwebhookconfiguration validatingwebhookconfiguration; do
    expect_eq "$when: $kind service" \
      "$(jget $kind "$name" '{range .webhooks[*]}{.name} {.clientConfig.service.namespace}/{.clientConfig.service.name}:{.clientConfig.service.port}{.clientConfig.service.path};{end}')" \
      "$(case $kind in
        mutating*) echo "pods.allocguard.io $ns/$name-webhook:443/mutate-v1-pod;deployments.allocguard.io $ns/$name-webhook:443/mutate-apps-v1-deployment;statefulsets.allocguard.io $ns/$name-webhook:443/mutate-apps-v1-statefulset;daemonsets.allocguard.io $ns/$name-webhook:443/mutate-apps-v1-daemonset;" ;;
        *) echo "deployments.validate.allocguard.io $ns/$name-webhook:443/validate-apps-v1-deployment;statefulsets.validate.allocguard.io $ns/$name-webhook:443/validate-apps-v1-statefulset;daemonsets.validate.allocguard.io $ns/$name-webhook:443/validate-apps-v1-daemonset;allocatorpolicies.validate.allocguard.io $ns/$name-webhook:443/validate-allocguard-io-v1alpha1-allocatorpolicy;replaycanaries.validate.allocguard.io $ns/$name-webhook:443/validate-allocguard-io-v1alpha1-replaycanary;" ;;
      esac)"
    local sel want
    sel=$(jget $kind "$name" '{range .webhooks[*]}{.namespaceSelector}{"\n"}{end}')
    want=4
    [[ $kind == validating* ]] && want=5
    local n
    n=$(grep -c "\"operator\":\"NotIn\",\"values\":\[\"kube-system\",\"$ns\"\]" <<<"$sel" || true)
    expect_eq "$when: $kind webhooks excluding kube-system and $ns" "$n" "$want"
    n=$(grep -c "\"allocguard-chart-test\":\"$suffix\"" <<<"$sel" || true)
    expect_eq "$when: $kind webhooks with the namespaceSelector value" "$n" "$want"
  done
}
check_webhooks install
expect_eq "failurePolicy and timeout" \
  "$(jget mutatingwebhookconfiguration "$name" '{.webhooks[0].failurePolicy}/{.webhooks[0].timeoutSeconds}')" Ignore/5
uid_m=$(jget mutatingwebhookconfiguration "$name" '{.metadata.uid}')
uid_v=$(jget validatingwebhookconfiguration "$name" '{.metadata.uid}')

bundles() {
  for kind in mutatingwebhookconfiguration validatingwebhookconfiguration; do
    jget $kind "$name" '{range .webhooks[*]}{.clientConfig.caBundle}{"\n"}{end}'
  done | sort | uniq -c | while read -r n b; do echo "$n $(short "$b")"; done
}
short() { [[ -z $1 ]] && echo "(none)" || echo "sha256:$(printf %s "$1" | sha256sum | cut -c1-16)"; }

operator=${ALLOCGUARD_TEST_OPERATOR:-}
if [[ -n $operator && ! -x $operator ]]; then
  fail "ALLOCGUARD_TEST_OPERATOR=$operator is not an executable (build the allocguard target)"
  operator=""
fi
if [[ -n $operator ]]; then
  echo "== the real operator, with the chart's arguments and its ServiceAccount's rights"
  # The pods never run here, so the operator runs as a local process that
  # authenticates as the chart's ServiceAccount (a TokenRequest token) and
  # gets the Deployment's arguments, with the ports moved to loopback.
  token=$("$kubectl" -n "$ns" create token "$release-allocguard" --duration=1h)
  cat >"$work/operator.kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "$ALLOCGUARD_TEST_APISERVER", certificate-authority: "$ALLOCGUARD_TEST_CA"}}]
users: [{name: u, user: {token: "$token"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
KUBECONFIG
  mapfile -t op_args < <(jget deployment "$name" '{.spec.template.spec.containers[0].args}' "$ns" |
    python3 -c 'import json,sys
for a in json.load(sys.stdin):
    if not a.endswith("-bind-address") and "-bind-address=" not in a: print(a)')
  # The chart's preload, from Debian's build of the same allocator (the
  # image's path exists only in the image); not into a sanitizer's build.
  op_preload=""
  [[ ${ALLOCGUARD_TEST_OPERATOR_PRELOAD:-1} == 1 ]] && op_preload=/usr/lib/x86_64-linux-gnu/$(basename "$preload")
  POD_NAME=chart-test-operator POD_NAMESPACE=$ns \
    LD_PRELOAD=$op_preload "$operator" "${op_args[@]}" \
    --kubeconfig "$work/operator.kubeconfig" --health-probe-bind-address 127.0.0.1:0 \
    --metrics-bind-address 127.0.0.1:0 --webhook-bind-address 127.0.0.1:0 \
    --bound-addresses-file "$work/ports" >"$work/operator.log" 2>&1 &
  operator_pid=$!
  ready=""
  for _ in $(seq 120); do  # a bound, not a measurement: readiness normally takes a second
    if [[ -f $work/ports ]]; then
      health=$(sed -n 's/^health=//p' "$work/ports")
      ready=$(curl -s "http://127.0.0.1:$health/readyz" || true)
      [[ $ready == ok* ]] && break
    fi
    kill -0 "$operator_pid" 2>/dev/null || break
    sleep 0.5
  done
  expect_eq "operator /readyz (caches synced, certificate loaded)" "${ready%%$'\n'*}" ok
  secret_ca=$(jget secret "$name-webhook-tls" '{.data.ca\.crt}' "$ns" 2>/dev/null || true)
  expect_eq "certificate Secret type" "$(jget secret "$name-webhook-tls" '{.type}' "$ns" 2>/dev/null)" kubernetes.io/tls
  # The CA key is in a Secret of its own, never beside the serving pair.
  expect_eq "serving Secret keys" \
    "$(jget secret "$name-webhook-tls" '{.data}' "$ns" 2>/dev/null | python3 -c 'import json,sys; print(" ".join(sorted(json.load(sys.stdin))))')" \
    "ca.crt tls.crt tls.key"
  expect_eq "CA Secret keys" \
    "$(jget secret "$name-webhook-tls-ca" '{.data}' "$ns" 2>/dev/null | python3 -c 'import json,sys; print(" ".join(sorted(k for k in json.load(sys.stdin) if not k.startswith("previous"))))')" \
    "ca.crt ca.key"
  expect_eq "CA Secret owned by the MutatingWebhookConfiguration (deleted with it)" \
    "$(jget secret "$name-webhook-tls-ca" '{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}/{.metadata.ownerReferences[0].uid}' "$ns" 2>/dev/null)" \
    "MutatingWebhookConfiguration/$name/$uid_m"
  for _ in $(seq 60); do [[ $(bundles) == "9 $(short "$secret_ca")" ]] && break; sleep 0.5; done
  if [[ -n $secret_ca ]]; then
    expect_eq "caBundle written by the operator (the Secret's ca.crt)" "$(bundles)" "9 $(short "$secret_ca")"
  else
    fail "the operator wrote no certificate Secret"
  fi
  expect_eq "certificate Secret owned by the MutatingWebhookConfiguration (deleted with it)" \
    "$(jget secret "$name-webhook-tls" '{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}/{.metadata.ownerReferences[0].uid}' "$ns" 2>/dev/null)" \
    "MutatingWebhookConfiguration/$name/$uid_m"
  holder=$(jget lease allocguard-operator '{.spec.holderIdentity}' "$ns" 2>/dev/null || true)
  expect_eq "Lease holder (POD_NAME_pid)" "${holder%_*}" chart-test-operator
  if [[ -n $op_preload ]]; then
    expect_eq "operator's malloc" "$(grep -o 'heap: [a-z]* malloc' "$work/operator.log" | head -1)" "heap: jemalloc malloc"
  fi
  # /metrics of the leading replica: leader, certificate, webhooks, controllers.
  metrics_port=$(sed -n 's/^metrics=//p' "$work/ports")
  scrape=""
  for _ in $(seq 20); do
    scrape=$(curl -s "http://127.0.0.1:$metrics_port/metrics" || true)
    grep -q '^allocguard_leader_election_is_leader{lease="allocguard-operator"} 1$' <<<"$scrape" && break
    sleep 0.5
  done
  expect_eq "metrics: this replica leads"     "$(grep -c '^allocguard_leader_election_is_leader{lease="allocguard-operator"} 1$' <<<"$scrape")" 1
  expiry=$(sed -n 's/^allocguard_webhook_certificate_expiry_seconds //p' <<<"$scrape")
  expect_eq "metrics: certificate valid for more than a day"     "$(python3 -c 'import sys; print(float(sys.argv[1] or 0) > 86400)' "$expiry")" True
  expect_eq "metrics: request counters of the 9 webhook paths"     "$(grep -c '^allocguard_webhook_requests_total{path="/[a-z0-9-]*",outcome="denied"} ' <<<"$scrape")" 9
  expect_eq "metrics: queue depth of the 4 controllers"     "$(grep -c '^allocguard_workqueue_depth{controller="[a-z]*"} ' <<<"$scrape")" 4
  kill -TERM "$operator_pid" 2>/dev/null || true
  op_exit=0
  wait "$operator_pid" || op_exit=$?
  operator_pid=""
  expect_eq "operator exit status after SIGTERM" "$op_exit" 0
  # A refusal by RBAC, not the 403 every client gets for writing into a
  # namespace that is being deleted (other tests' namespaces linger in this
  # tier: no controller-manager finishes their deletion).
  refusals=$(grep -Ei 'forbidden|\(403\)' "$work/operator.log" | grep -v 'because it is being terminated' || true)
  # A write its own CRD refuses (422: a status field out of its schema, such
  # as an empty date-time) is a defect, not a warning in a log.
  # (The API server's status code appears as "(422)" in the operator's
  # messages; a bare 422 would also match a log line's milliseconds.)
  refusals+=$(grep -Ei '\(422\)|Unprocessable|is invalid' "$work/operator.log" || true)
  if [[ -n $refusals ]]; then
    fail "the operator was refused something: $(head -5 <<<"$refusals")"
  else
    pass "the operator was refused nothing (log: $(wc -l <"$work/operator.log") lines)"
  fi
  # operator.logFormat=json (the install above): every line one JSON object
  # with ts, level and msg (docs/operator.md, "Logs").
  if out=$(python3 - "$work/operator.log" <<'EOF'
import json, sys
lines = [l for l in open(sys.argv[1], encoding="utf-8", errors="replace") if l.strip()]
for n, line in enumerate(lines, 1):
    try:
        j = json.loads(line)
    except ValueError:
        sys.exit(f"line {n} is not JSON: {line[:200]!r}")
    if not all(k in j for k in ("ts", "level", "msg")):
        sys.exit(f"line {n} lacks ts, level or msg: {line[:200]!r}")
if not lines:
    sys.exit("the operator logged nothing")
print(f"{len(lines)} lines")
EOF
  ); then
    pass "operator log in JSON (--log-format=json from the chart): $out"
  else
    fail "operator log with --log-format=json: $out"
  fi
  ca=$secret_ca
else
  echo "== caBundle written the way the operator writes it (no ALLOCGUARD_TEST_OPERATOR binary)"
  # What the operator's certificate manager does: GET, set every webhook's
  # clientConfig.caBundle, PUT.
  ca=$(printf -- '-----BEGIN CERTIFICATE-----\nallocguard chart test %s\n-----END CERTIFICATE-----\n' "$suffix" | base64 -w0)
  for kind in mutatingwebhookconfiguration validatingwebhookconfiguration; do
    "$kubectl" get $kind "$name" -o json |
      python3 -c 'import json,sys
o=json.load(sys.stdin)
for w in o["webhooks"]: w["clientConfig"]["caBundle"]=sys.argv[1]
print(json.dumps(o))' "$ca" | "$kubectl" replace -f - >/dev/null
  done
  expect_eq "caBundle written" "$(bundles)" "9 $(short "$ca")"
fi

echo "== helm upgrade keeps the caBundle (the operator is stopped: nothing rewrites it)"
# An upgrade that changes every webhook (timeout 5 -> 7) and one that changes nothing.
if out=$("$helm" upgrade "$release" "$chart" -n "$ns" --reuse-values --set webhook.timeoutSeconds=7 2>&1); then
  pass "helm upgrade (timeoutSeconds 7)"
else
  fail "helm upgrade: $out"
fi
expect_eq "timeout after upgrade" \
  "$(jget validatingwebhookconfiguration "$name" '{.webhooks[1].timeoutSeconds}')" 7
expect_eq "caBundle after upgrade" "$(bundles)" "9 $(short "$ca")"
check_webhooks upgrade
expect_eq "same MutatingWebhookConfiguration (not recreated)" "$(jget mutatingwebhookconfiguration "$name" '{.metadata.uid}')" "$uid_m"
expect_eq "same ValidatingWebhookConfiguration (not recreated)" "$(jget validatingwebhookconfiguration "$name" '{.metadata.uid}')" "$uid_v"
if out=$("$helm" upgrade "$release" "$chart" -n "$ns" --reuse-values 2>&1); then
  pass "helm upgrade (no change)"
else
  fail "helm upgrade (no change): $out"
fi
expect_eq "caBundle after an unchanged upgrade" "$(bundles)" "9 $(short "$ca")"
expect_eq "revision" "$("$helm" status "$release" -n "$ns" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')" 3

echo "== helm upgrade changes a CRD (crds.install)"
# A next version of the chart whose AllocatorPolicy CRD has one more short
# name: helm upgrade must change the CRD on the cluster (Helm never upgrades
# a chart's crds/ folder), and the upgrade back must change it back.
cp -r "$chart" "$work/chart-next"
python3 - "$work/chart-next/templates/crds.yaml" <<'EOF'
import sys
path = sys.argv[1]
text = open(path).read()
old = "    shortNames:\n    - agpolicy\n"
if text.count(old) != 1:
    sys.exit("the AllocatorPolicy CRD's shortNames are not where the test looks for them")
open(path, "w").write(text.replace(old, old + "    - agpnext\n"))
EOF
short_names() { jget crd allocatorpolicies.allocguard.io '{.spec.names.shortNames}'; }
crd_gen_before=$(jget crd allocatorpolicies.allocguard.io '{.metadata.generation}')
if out=$("$helm" upgrade "$release" "$work/chart-next" -n "$ns" --reuse-values 2>&1); then
  pass "helm upgrade to a chart with a changed CRD"
else
  fail "helm upgrade to a chart with a changed CRD: $out"
fi
expect_eq "AllocatorPolicy short names after the upgrade" "$(short_names)" '["agpolicy","agpnext","agp"]'
expect_eq "AllocatorPolicy CRD generation after the upgrade" \
  "$(jget crd allocatorpolicies.allocguard.io '{.metadata.generation}')" $((crd_gen_before + 1))
if out=$("$helm" upgrade "$release" "$chart" -n "$ns" --reuse-values 2>&1); then
  pass "helm upgrade back to this chart"
else
  fail "helm upgrade back to this chart: $out"
fi
expect_eq "AllocatorPolicy short names after the upgrade back" "$(short_names)" '["agpolicy","agp"]'

# An AllocatorPolicy in a namespace outside the test's webhook scope (no
# operator serves the webhooks here): crds.keep must keep it on uninstall.
kept_ns=$ns-kept
"$kubectl" create namespace "$kept_ns" >/dev/null
if out=$("$kubectl" apply -n "$kept_ns" -f - <<<"$notes_policy" 2>&1); then
  pass "an AllocatorPolicy created before the uninstall ($out)"
else
  fail "creating an AllocatorPolicy: $out"
fi

echo "== helm uninstall leaves no webhook configuration, and keeps the CRDs and their objects"
if out=$("$helm" uninstall "$release" -n "$ns" 2>&1); then pass "helm uninstall"; else fail "helm uninstall: $out"; fi
grep -q "kept due to the resource policy" <<<"$out" && pass "helm uninstall says what it kept: $(grep -A3 "kept due" <<<"$out" | tail -n +2 | tr -s " \n" " ")" ||
  fail "helm uninstall did not report the kept CRDs: $out"
for crd in "${crd_names[@]}"; do
  "$kubectl" get crd "$crd" >/dev/null 2>&1 && pass "CRD $crd kept" || fail "CRD $crd deleted by helm uninstall"
done
expect_eq "AllocatorPolicies kept" "$("$kubectl" get allocatorpolicies -n "$kept_ns" -o name | wc -l)" 1
"$kubectl" delete namespace "$kept_ns" --wait=false >/dev/null
for kind in mutatingwebhookconfiguration validatingwebhookconfiguration clusterrole/"$name-manager" \
  clusterrolebinding/"$name-manager" clusterrole/"$name-webhook-ca-injection"; do
  what=$kind
  [[ $kind == */* ]] || what="$kind/$name"
  if "$kubectl" get "$what" >/dev/null 2>&1; then fail "$what left behind"; else pass "$what removed"; fi
done
if [[ -n $operator ]] && ((kcm)); then
  for _ in $(seq 60); do  # the garbage collector runs asynchronously
    "$kubectl" -n "$ns" get secret "$name-webhook-tls" >/dev/null 2>&1 || break
    sleep 0.5
  done
  if "$kubectl" -n "$ns" get secret "$name-webhook-tls" >/dev/null 2>&1; then
    fail "certificate Secret $name-webhook-tls left behind"
  else
    pass "certificate Secret removed with its webhook configuration"
  fi
fi
left=$("$kubectl" get all,roles,rolebindings,serviceaccounts,pdb,leases -n "$ns" -l "app.kubernetes.io/instance=$release" -o name 2>/dev/null)
expect_eq "namespaced objects of the release left" "$left" ""

if ((failures)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all chart checks passed"
