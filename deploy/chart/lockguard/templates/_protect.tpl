{{- /*
Kinds of other groups, by opt-in (docs/contract.md rule 21; protect.resources).

lockguard.protectWebhooks renders the webhook entries of the opted-in
resources, appended to the ValidatingWebhookConfiguration after the guards':
- protect: their DELETEs, answered by the object guard (/validate-delete),
  failing closed (webhook.failurePolicy) as the object guard's entry does.
  Only in namespaces lockguard labels core.navique.com/has-locks=true
  (namespaceSelector): every object a Lock covers is in one (the label is on
  the namespace before the Lock's create is allowed), and a delete anywhere
  else never reaches lockguard, so a lockguard outage refuses deletes of
  these kinds only in namespaces holding Locks, never cluster-wide. Objects
  carrying core.navique.com/protected are left to protect-locked
  (objectSelector DoesNotExist), so that no delete is sent twice.
- protect-locked: the same DELETEs, of the objects carrying
  core.navique.com/protected (objectSelector Exists; lockguard keeps it
  "true" on every object of these kinds a live, enforcing Lock covers, and
  puts it on a targetRef Lock's target before allowing the Lock's create),
  in any namespace: the API server matches an objectSelector against the
  object itself, while it matches the namespaceSelector against its own
  namespace cache, which can lag the has-locks label lockguard put on just
  before a namespace's first Lock was created (issue 40). The two entries
  select complementary objects; an outage refuses, beyond protect's,
  deletes of the labelled (locked) objects only.
- protect-update (guards.readOnly.enabled): their UPDATEs (a PATCH arrives
  as one) of objects a ReadOnly Lock covers (objectSelector
  core.navique.com/read-only=true, the label lockguard keeps on them), in
  the same namespaces, except by the exempt principals; /validate-update.
  Their subresources (statefulsets/scale) are not sent: docs/limits.md.

lockguard.protectArgs renders lockguard's --protect-resource flags, and
lockguard.protectRules the ClusterRole rules lockguard needs to keep the
annotation and labels on those objects (metadata only).
*/ -}}
{{- define "lockguard.protectWebhooks" -}}
{{- $ctx := . }}
{{- if .Values.protect.resources }}
{{- if not .Values.guards.namespace.enabled }}
{{- fail "protect.resources needs guards.namespace.enabled: its webhook entries select the namespaces lockguard labels core.navique.com/has-locks" }}
{{- end }}
{{- range $entry := list "protect" "protect-locked" "protect-update" }}
{{- if or (ne $entry "protect-update") $ctx.Values.guards.readOnly.enabled }}
- name: {{ $entry }}.lockguard.core.navique.com
  admissionReviewVersions: ["v1"]
  clientConfig:
    service:
      name: {{ include "lockguard.webhookServiceName" $ctx }}
      namespace: {{ $ctx.Release.Namespace }}
      path: {{ if eq $entry "protect-update" }}/validate-update{{ else }}/validate-delete{{ end }}
      port: {{ $ctx.Values.webhook.servicePort }}
    {{- if not $ctx.Values.certManager.enabled }}
    caBundle: {{ required "webhook.tls.caBundle (base64 PEM of the CA of webhook.tls.existingSecret) is required when certManager.enabled is false" $ctx.Values.webhook.tls.caBundle }}
    {{- end }}
  failurePolicy: {{ $ctx.Values.webhook.failurePolicy }}
  matchPolicy: Equivalent
  sideEffects: NoneOnDryRun
  timeoutSeconds: {{ $ctx.Values.webhook.timeoutSeconds }}
  {{- if eq $entry "protect-locked" }}
  objectSelector:
    matchExpressions:
      - key: core.navique.com/protected
        operator: Exists
  {{- else }}
  namespaceSelector:
    matchLabels:
      core.navique.com/has-locks: "true"
  {{- end }}
  {{- if eq $entry "protect" }}
  objectSelector:
    matchExpressions:
      - key: core.navique.com/protected
        operator: DoesNotExist
  {{- else if eq $entry "protect-update" }}
  objectSelector:
    matchLabels:
      core.navique.com/read-only: "true"
  {{- end }}
  rules:
    {{- range $ctx.Values.protect.resources }}
    - apiGroups: [{{ .group | quote }}]
      apiVersions: ["*"]
      operations: [{{ if eq $entry "protect-update" }}"UPDATE"{{ else }}"DELETE"{{ end }}]
      resources: {{ toJson .resources }}
      scope: Namespaced
    {{- end }}
  {{- if eq $entry "protect-update" }}
  matchConditions:
    - name: not-exempt
      expression: {{ include "lockguard.notExempt" $ctx | quote }}
  {{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{- define "lockguard.protectArgs" -}}
{{- if and .Values.protect.resources (not (include "lockguard.webhookEnabled" .)) }}
{{- fail "protect.resources needs the webhook (mode webhook or both): the ValidatingAdmissionPolicy guards core.navique.com alone, and Locks on those kinds would say Active while nothing refused their deletes" }}
{{- end }}
{{- range .Values.protect.resources }}
{{- $group := .group }}
{{- range .resources }}
- --protect-resource={{ . }}{{ if $group }}.{{ $group }}{{ end }}
{{- end }}
{{- end }}
{{- end }}

{{- define "lockguard.protectRules" -}}
{{- range .Values.protect.resources }}
- apiGroups: [{{ .group | quote }}]
  resources: {{ toJson .resources }}
  verbs: ["get", "list", "watch", "patch"]
{{- end }}
{{- end }}
