{{- /*
lockguard.guardWebhooks renders the webhook entries of the namespace and CRD
guards (guards.namespace.enabled, guards.crd.enabled), appended to the
ValidatingWebhookConfiguration. They call the same handler as the object
guard, which tells the requests apart by kind.
- namespace: only namespaces that lockguard's reconciler labels
  core.navique.com/has-locks=true (objectSelector), so that deleting a
  namespace without Locks never waits on lockguard, even while it is down.
- crd: only CustomResourceDefinitions of the core.navique.com group, and
  of the groups of protect.resources a CRD can serve (lockguard.crdGroups:
  a matchCondition on oldObject, beta and on by default in Kubernetes 1.28
  and 1.29, GA from 1.30): other groups' CRDs never reach lockguard.
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
      expression: {{ include "lockguard.crdGroups" $ctx | quote }}
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

{{- /*
lockguard.clusterLockWebhooks renders the ClusterLock guard's entries
(guards.clusterLock.enabled; docs/contract.md rule 22, docs/clusterlock.md):
- cluster-lock: the DELETE of the cluster-scoped kinds a ClusterLock can
  name (api/v1alpha1.ClusterLockableKinds, and the group's cluster-scoped
  kinds but ClusterLocks), of the objects lockguard's reconciler labels
  core.navique.com/cluster-locked=true (objectSelector) only: an outage
  refuses the deletes of cluster-locked objects, never every delete of a
  kind. It fails closed (webhook.failurePolicy), calls
  /validate-cluster-delete.
- cluster-label: the UPDATEs of those objects that remove or change the
  label (matchCondition), except lockguard's own (its ServiceAccount; it
  checks again itself): without it, whoever may update a Namespace could
  take it out of the first entry's selector, then delete it. It fails
  closed whatever webhook.failurePolicy says, calls
  /validate-cluster-label. The API server matches the objectSelector on
  the old and the new object, so the label's removal is seen.
- cluster-create: the CREATE of ClusterLocks: lockguard labels the target
  before allowing it, so that a ClusterLock protects from its create's
  answer (a DELETE sent after it reaches cluster-lock); when RBAC refuses
  lockguard the label (a ClusterRole granting more than it holds), the
  create is refused with the kubectl label command to run first. It fails
  closed whatever webhook.failurePolicy says (a ClusterLock admitted
  without it would protect only once the reconciler labels its target),
  calls /validate-cluster-lock-create; sideEffects NoneOnDryRun.
- cluster-update (with guards.readOnly.enabled too; docs/contract.md rules
  16 and 22): the UPDATEs of the main resource of the same kinds (never a
  subresource, so status never reaches lockguard), of the objects
  lockguard labels core.navique.com/read-only=true (objectSelector, matched
  on the old and the new object, so removing the label is seen): the
  targets of ReadOnly ClusterLocks. The update entry's not-exempt
  matchCondition skips lockguard's own writes and
  readOnly.exemptPrincipals. It fails closed as the update entry does
  (webhook.failurePolicy), calls /validate-cluster-update; its refusal
  records nothing (sideEffects None).
*/ -}}
{{- define "lockguard.clusterLockWebhooks" -}}
{{- $ctx := . }}
{{- if .Values.guards.clusterLock.enabled }}
{{- range $entry := list "cluster-lock" "cluster-label" }}
- name: {{ $entry }}.lockguard.core.navique.com
  admissionReviewVersions: ["v1"]
  clientConfig:
    service:
      name: {{ include "lockguard.webhookServiceName" $ctx }}
      namespace: {{ $ctx.Release.Namespace }}
      path: {{ if eq $entry "cluster-lock" }}/validate-cluster-delete{{ else }}/validate-cluster-label{{ end }}
      port: {{ $ctx.Values.webhook.servicePort }}
    {{- if not $ctx.Values.certManager.enabled }}
    caBundle: {{ required "webhook.tls.caBundle (base64 PEM of the CA of webhook.tls.existingSecret) is required when certManager.enabled is false" $ctx.Values.webhook.tls.caBundle }}
    {{- end }}
  failurePolicy: {{ if eq $entry "cluster-lock" }}{{ $ctx.Values.webhook.failurePolicy }}{{ else }}Fail{{ end }}
  matchPolicy: Equivalent
  sideEffects: {{ if eq $entry "cluster-lock" }}NoneOnDryRun{{ else }}None{{ end }}
  timeoutSeconds: {{ $ctx.Values.webhook.timeoutSeconds }}
  objectSelector:
    matchLabels:
      core.navique.com/cluster-locked: "true"
  rules:
    {{- range $rule := list (list "" "namespaces" "persistentvolumes") (list "apiextensions.k8s.io" "customresourcedefinitions") (list "rbac.authorization.k8s.io" "clusterroles") (list "storage.k8s.io" "storageclasses") (list "core.navique.com" "*") }}
    - apiGroups: {{ list (first $rule) | toJson }}
      apiVersions: ["*"]
      operations: [{{ if eq $entry "cluster-lock" }}"DELETE"{{ else }}"UPDATE"{{ end }}]
      resources: {{ rest $rule | toJson }}
      scope: Cluster
    {{- end }}
  matchConditions:
    - name: not-a-clusterlock
      expression: "request.resource.resource != 'clusterlocks'"
    {{- if eq $entry "cluster-label" }}
    - name: label-removed-or-changed
      expression: "has(oldObject.metadata.labels) && 'core.navique.com/cluster-locked' in oldObject.metadata.labels && oldObject.metadata.labels['core.navique.com/cluster-locked'] == 'true' && !(has(object.metadata.labels) && 'core.navique.com/cluster-locked' in object.metadata.labels && object.metadata.labels['core.navique.com/cluster-locked'] == 'true')"
    - name: not-lockguard
      expression: {{ printf "request.userInfo.username != 'system:serviceaccount:%s:%s'" $ctx.Release.Namespace (include "lockguard.serviceAccountName" $ctx) | quote }}
    {{- end }}
{{- end }}
{{- if .Values.guards.readOnly.enabled }}
- name: cluster-update.lockguard.core.navique.com
  admissionReviewVersions: ["v1"]
  clientConfig:
    service:
      name: {{ include "lockguard.webhookServiceName" $ctx }}
      namespace: {{ $ctx.Release.Namespace }}
      path: /validate-cluster-update
      port: {{ $ctx.Values.webhook.servicePort }}
    {{- if not $ctx.Values.certManager.enabled }}
    caBundle: {{ required "webhook.tls.caBundle (base64 PEM of the CA of webhook.tls.existingSecret) is required when certManager.enabled is false" $ctx.Values.webhook.tls.caBundle }}
    {{- end }}
  failurePolicy: {{ $ctx.Values.webhook.failurePolicy }}
  matchPolicy: Equivalent
  sideEffects: None
  timeoutSeconds: {{ $ctx.Values.webhook.timeoutSeconds }}
  objectSelector:
    matchLabels:
      core.navique.com/read-only: "true"
  rules:
    {{- range $rule := list (list "" "namespaces" "persistentvolumes") (list "apiextensions.k8s.io" "customresourcedefinitions") (list "rbac.authorization.k8s.io" "clusterroles") (list "storage.k8s.io" "storageclasses") (list "core.navique.com" "*") }}
    - apiGroups: {{ list (first $rule) | toJson }}
      apiVersions: ["*"]
      operations: ["UPDATE"]
      resources: {{ rest $rule | toJson }}
      scope: Cluster
    {{- end }}
  matchConditions:
    - name: not-a-clusterlock
      expression: "request.resource.resource != 'clusterlocks'"
    - name: not-exempt
      expression: {{ include "lockguard.notExempt" $ctx | quote }}
{{- end }}
- name: cluster-create.lockguard.core.navique.com
  admissionReviewVersions: ["v1"]
  clientConfig:
    service:
      name: {{ include "lockguard.webhookServiceName" $ctx }}
      namespace: {{ $ctx.Release.Namespace }}
      path: /validate-cluster-lock-create
      port: {{ $ctx.Values.webhook.servicePort }}
    {{- if not $ctx.Values.certManager.enabled }}
    caBundle: {{ required "webhook.tls.caBundle (base64 PEM of the CA of webhook.tls.existingSecret) is required when certManager.enabled is false" $ctx.Values.webhook.tls.caBundle }}
    {{- end }}
  failurePolicy: Fail
  matchPolicy: Equivalent
  sideEffects: NoneOnDryRun
  timeoutSeconds: {{ $ctx.Values.webhook.timeoutSeconds }}
  rules:
    - apiGroups: ["core.navique.com"]
      apiVersions: ["*"]
      operations: ["CREATE"]
      resources: ["clusterlocks"]
      scope: Cluster
{{- end }}
{{- end }}

{{- /*
lockguard.crdGroups is the crd entry's matchCondition: the
CustomResourceDefinitions of core.navique.com and of the groups of
protect.resources that CRDs can serve (a name with a dot: "" and apps
cannot be), whose deletes would delete the objects of an opted-in kind
with no admission of theirs (docs/optin.md); lockguard decides those of
opted-in kinds only.
*/ -}}
{{- define "lockguard.crdGroups" -}}
{{- $groups := list "core.navique.com" }}
{{- range .Values.protect.resources }}
{{- if and (contains "." .group) (not (has .group $groups)) }}
{{- $groups = append $groups .group }}
{{- end }}
{{- end }}
{{- if eq (len $groups) 1 -}}
oldObject.spec.group == 'core.navique.com'
{{- else -}}
oldObject.spec.group in [{{ range $i, $g := $groups }}{{ if $i }}, {{ end }}'{{ $g }}'{{ end }}]
{{- end }}
{{- end }}
