{{/* Name of the chart. */}}
{{- define "lockguard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name of the release's objects (at most 50 characters, so that suffixes fit). */}}
{{- define "lockguard.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Selector labels: stable across upgrades. */}}
{{- define "lockguard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lockguard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "lockguard.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "lockguard.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: lockguard
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* metadata.labels and metadata.annotations of every object; pass a dict with "ctx" (the root) and optionally "annotations". */}}
{{- define "lockguard.metadata" -}}
labels:
  {{- include "lockguard.labels" .ctx | nindent 2 }}
  {{- with .labels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- $annotations := merge (dict) (.annotations | default dict) (.ctx.Values.commonAnnotations | default dict) }}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "lockguard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "lockguard.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "lockguard.webhookServiceName" -}}
{{- printf "%s-webhook" (include "lockguard.fullname" .) }}
{{- end }}

{{- define "lockguard.metricsServiceName" -}}
{{- printf "%s-metrics" (include "lockguard.fullname" .) }}
{{- end }}

{{/* The cert-manager Certificate of the webhook's serving certificate. */}}
{{- define "lockguard.servingCertificateName" -}}
{{- printf "%s-serving" (include "lockguard.fullname" .) }}
{{- end }}

{{/* The Secret holding the serving certificate. */}}
{{- define "lockguard.servingSecretName" -}}
{{- if .Values.certManager.enabled }}
{{- printf "%s-serving-cert" (include "lockguard.fullname" .) }}
{{- else }}
{{- required "webhook.tls.existingSecret is required when certManager.enabled is false" .Values.webhook.tls.existingSecret }}
{{- end }}
{{- end }}

{{/* True when the API server serves ValidatingAdmissionPolicy in admissionregistration.k8s.io/v1. */}}
{{- define "lockguard.policyCapable" -}}
{{- if .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy" }}true{{ end }}
{{- end }}

{{/* True when the ValidatingWebhookConfiguration is rendered. */}}
{{- define "lockguard.webhookEnabled" -}}
{{- if and .Values.lockGuard.enabled (has .Values.mode (list "webhook" "both")) }}true{{ end }}
{{- end }}

{{/* True when the ValidatingAdmissionPolicy and its binding are rendered. */}}
{{- define "lockguard.policyEnabled" -}}
{{- if and .Values.lockGuard.enabled (has .Values.mode (list "policy" "both")) }}
{{- if include "lockguard.policyCapable" . }}true
{{- else if eq .Values.mode "policy" }}
{{- fail "mode=policy needs ValidatingAdmissionPolicy in admissionregistration.k8s.io/v1 (Kubernetes 1.30+), which this API server does not serve: use mode=webhook (or pass --api-versions admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy to helm template)" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "lockguard.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* Labels of the helm test Pod: the release's, but another app.kubernetes.io/name, so that no selector of lockguard's pods (Services, PodDisruptionBudget, NetworkPolicy) selects it. */}}
{{- define "lockguard.testLabels" -}}
{{- $labels := include "lockguard.labels" . | fromYaml }}
{{- $_ := set $labels "app.kubernetes.io/name" (printf "%s-test" (include "lockguard.name" .)) }}
{{- $_ := set $labels "app.kubernetes.io/component" "test" }}
{{- toYaml $labels }}
{{- end }}

{{/* CEL: true when the request's principal may write the replicas' identity Leases (the verb lockguard-peer on leases in the request's namespace, which the chart's Role grants lockguard's ServiceAccount; internal/peers.LeaseWriteVerb). */}}
{{- define "lockguard.peerLeaseWriter" -}}
authorizer.group('coordination.k8s.io').resource('leases').namespace(request.namespace).check('lockguard-peer').allowed()
{{- end }}

{{/* GOMEMLIMIT of the lockguard container: 90% of resources.limits.memory, in bytes (the rest is headroom for what the Go runtime does not count: the binary's pages, stacks growing). The chart is the one place that sets lockguard's soft memory limit (docs/limits.md, Memory). A quantity with a fraction or an exponent is refused. */}}
{{- define "lockguard.goMemLimit" -}}
{{- div (mul (include "lockguard.bytes" (dict "value" . "name" "resources.limits.memory" "use" "the chart sets GOMEMLIMIT from it") | int64) 9) 10 -}}
{{- end }}
