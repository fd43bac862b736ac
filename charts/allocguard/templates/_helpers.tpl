{{/* Names. The release name "allocguard" gives every object the name "allocguard". */}}
{{- define "allocguard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "allocguard.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "allocguard.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "allocguard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "allocguard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "allocguard.labels" -}}
helm.sh/chart: {{ include "allocguard.chart" . }}
{{ include "allocguard.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: allocguard
{{- end -}}

{{- define "allocguard.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "allocguard.serviceAccountName" -}}{{ include "allocguard.fullname" . }}{{- end -}}
{{- define "allocguard.webhookServiceName" -}}{{ include "allocguard.fullname" . }}-webhook{{- end -}}
{{- define "allocguard.metricsServiceName" -}}{{ include "allocguard.fullname" . }}-metrics{{- end -}}
{{- define "allocguard.webhookSecretName" -}}{{ include "allocguard.fullname" . }}-webhook-tls{{- end -}}
{{- define "allocguard.certificateName" -}}{{ include "allocguard.fullname" . }}-webhook{{- end -}}
{{/* The webhook configurations are cluster-scoped: the release name keeps two releases apart. */}}
{{- define "allocguard.webhookConfigurationName" -}}{{ include "allocguard.fullname" . }}{{- end -}}

{{/*
The namespaceSelector of every webhook: the user's selector plus an
expression that always leaves out kube-system and the release namespace.
*/}}
{{- define "allocguard.namespaceSelector" -}}
{{- $sel := deepCopy (default (dict) .Values.webhook.namespaceSelector) -}}
{{- $exprs := default (list) $sel.matchExpressions -}}
{{- $exprs = append $exprs (dict "key" "kubernetes.io/metadata.name" "operator" "NotIn" "values" (list "kube-system" .Release.Namespace)) -}}
{{- $_ := set $sel "matchExpressions" $exprs -}}
{{- toYaml $sel -}}
{{- end -}}

{{/* Fields every webhook shares. caBundle is left out on purpose: see webhooks.yaml. */}}
{{- define "allocguard.webhookCommon" -}}
admissionReviewVersions: ["v1"]
sideEffects: NoneOnDryRun
matchPolicy: Equivalent
failurePolicy: {{ .Values.webhook.failurePolicy }}
timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}
namespaceSelector:
  {{- include "allocguard.namespaceSelector" . | nindent 2 }}
{{- end -}}

{{- define "allocguard.clientConfig" -}}
clientConfig:
  service:
    name: {{ include "allocguard.webhookServiceName" .root }}
    namespace: {{ .root.Release.Namespace }}
    path: {{ .path }}
    port: {{ .root.Values.webhook.service.port }}
{{- end -}}
