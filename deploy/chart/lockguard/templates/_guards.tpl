{{- /*
lockguard.guardWebhooks renders the webhook entries of the namespace and CRD
guards (guards.namespace.enabled, guards.crd.enabled), appended to the
ValidatingWebhookConfiguration. They call the same handler as the object
guard, which tells the requests apart by kind.
- namespace: only namespaces that lockguard's reconciler labels
  core.navique.com/has-locks=true (objectSelector), so that deleting a
  namespace without Locks never waits on lockguard, even while it is down.
- crd: only CustomResourceDefinitions of the core.navique.com group (a
  matchCondition on oldObject, beta and on by default in Kubernetes 1.28 and
  1.29, GA from 1.30): other groups' CRDs never reach lockguard.
- readOnly: the UPDATEs (a PATCH arrives as one) of the main resource of
  core.navique.com objects (resources: every resource, never its
  subresources, so the status subresource never reaches lockguard) that lockguard's reconciler labels
  core.navique.com/read-only=true (objectSelector), that is the objects a
  ReadOnly Lock covers: every other update of the group never calls
  lockguard. The API server matches the objectSelector on the old and the
  new object, so removing the label is seen too. matchConditions skip Locks
  and the exempt principals (readOnly.exemptPrincipals and lockguard's own
  ServiceAccount; lockguard checks them again itself). It calls
  /validate-update.
- readOnly, its second entry (subresource): the UPDATEs of every
  subresource but status (scale, any other) of core.navique.com objects,
  which the first entry's resources leave out. The API server reviews a
  scale with autoscaling/v1 Scale objects, which carry none of the
  object's labels, so an objectSelector cannot pick the frozen objects
  out: this entry selects namespaces instead, those lockguard labels
  core.navique.com/has-locks=true (namespaceSelector; only with
  guards.namespace.enabled, without which it sends every such update of
  the group), and lockguard reads the object's labels itself. A
  subresource update of an object under no ReadOnly Lock in such a
  namespace is reviewed (and allowed); one in a namespace without Locks
  never calls lockguard. Same matchConditions, and a first one that
  skips the main resource and the status subresource.
The namespace and CRD entries fail closed (webhook.failurePolicy): a
namespace or CRD that may hold a locked object is never deleted because
lockguard could not answer; the readOnly entry too: a frozen object is not
changed because lockguard could not answer.
*/ -}}
{{- define "lockguard.guardWebhooks" -}}
{{- $ctx := . }}
{{- range $guard := list "namespace" "crd" "readOnly" }}
{{- if (index $ctx.Values.guards $guard).enabled }}
- name: {{ if eq $guard "readOnly" }}update{{ else }}{{ $guard }}{{ end }}.lockguard.core.navique.com
  admissionReviewVersions: ["v1"]
  clientConfig:
    service:
      name: {{ include "lockguard.webhookServiceName" $ctx }}
      namespace: {{ $ctx.Release.Namespace }}
      path: {{ if eq $guard "readOnly" }}/validate-update{{ else }}/validate-delete{{ end }}
      port: {{ $ctx.Values.webhook.servicePort }}
    {{- if not $ctx.Values.certManager.enabled }}
    caBundle: {{ required "webhook.tls.caBundle (base64 PEM of the CA of webhook.tls.existingSecret) is required when certManager.enabled is false" $ctx.Values.webhook.tls.caBundle }}
    {{- end }}
  failurePolicy: {{ $ctx.Values.webhook.failurePolicy }}
  matchPolicy: Equivalent
  sideEffects: NoneOnDryRun
  timeoutSeconds: {{ $ctx.Values.webhook.timeoutSeconds }}
  {{- if eq $guard "namespace" }}
  objectSelector:
    matchLabels:
      core.navique.com/has-locks: "true"
  rules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["DELETE"]
      resources: ["namespaces"]
      scope: Cluster
  {{- else if eq $guard "readOnly" }}
  objectSelector:
    matchLabels:
      core.navique.com/read-only: "true"
  rules:
    - apiGroups: ["core.navique.com"]
      apiVersions: ["*"]
      operations: ["UPDATE"]
      resources: ["*"]
      scope: Namespaced
  matchConditions:
    - name: not-a-lock
      expression: "request.resource.resource != 'locks'"
    - name: not-exempt
      expression: {{ include "lockguard.notExempt" $ctx | quote }}
  {{- template "lockguard.subresourceWebhook" $ctx }}
  {{- else }}
  rules:
    - apiGroups: ["apiextensions.k8s.io"]
      apiVersions: ["v1"]
      operations: ["DELETE"]
      resources: ["customresourcedefinitions"]
      scope: Cluster
  matchConditions:
    - name: core-navique-com-group
      expression: "oldObject.spec.group == 'core.navique.com'"
  {{- end }}
{{- end }}
{{- end }}
{{- end }}

{{- /*
lockguard.subresourceWebhook renders the readOnly guard's subresource
entry (lockguard.guardWebhooks says what it selects and why), after its
update entry.
*/ -}}
{{- define "lockguard.subresourceWebhook" -}}
{{- $ctx := . }}
- name: subresource.lockguard.core.navique.com
  admissionReviewVersions: ["v1"]
  clientConfig:
    service:
      name: {{ include "lockguard.webhookServiceName" $ctx }}
      namespace: {{ $ctx.Release.Namespace }}
      path: /validate-update
      port: {{ $ctx.Values.webhook.servicePort }}
    {{- if not $ctx.Values.certManager.enabled }}
    caBundle: {{ required "webhook.tls.caBundle (base64 PEM of the CA of webhook.tls.existingSecret) is required when certManager.enabled is false" $ctx.Values.webhook.tls.caBundle }}
    {{- end }}
  failurePolicy: {{ $ctx.Values.webhook.failurePolicy }}
  matchPolicy: Equivalent
  sideEffects: NoneOnDryRun
  timeoutSeconds: {{ $ctx.Values.webhook.timeoutSeconds }}
  {{- if $ctx.Values.guards.namespace.enabled }}
  namespaceSelector:
    matchLabels:
      core.navique.com/has-locks: "true"
  {{- end }}
  rules:
    - apiGroups: ["core.navique.com"]
      apiVersions: ["*"]
      operations: ["UPDATE"]
      resources: ["*/*"]
      scope: Namespaced
  matchConditions:
    - name: subresource-not-status
      expression: "has(request.subResource) && request.subResource != 'status'"
    - name: not-a-lock
      expression: "request.resource.resource != 'locks'"
    - name: not-exempt
      expression: {{ include "lockguard.notExempt" $ctx | quote }}
{{- end }}

{{- /*
lockguard.notExempt is the CEL expression of the update entry's not-exempt
matchCondition: true unless the request's user is lockguard's own
ServiceAccount or a user of readOnly.exemptPrincipals, or is in one of its
group:NAME groups.
*/ -}}
{{- define "lockguard.notExempt" -}}
{{- $users := list (printf "system:serviceaccount:%s:%s" .Release.Namespace (include "lockguard.serviceAccountName" .)) }}
{{- $groups := list }}
{{- range .Values.readOnly.exemptPrincipals }}
{{- if hasPrefix "group:" . }}
{{- $groups = append $groups (trimPrefix "group:" .) }}
{{- else }}
{{- $users = append $users . }}
{{- end }}
{{- end }}
{{- $expr := printf "!(request.userInfo.username in ['%s'])" (join "', '" $users) }}
{{- if $groups }}
{{- $expr = printf "%s && !request.userInfo.groups.exists(g, g in ['%s'])" $expr (join "', '" $groups) }}
{{- end }}
{{- $expr }}
{{- end }}
