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
Both fail closed (webhook.failurePolicy): a namespace or CRD that may hold a
locked object is never deleted because lockguard could not answer.
*/ -}}
{{- define "lockguard.guardWebhooks" -}}
{{- $ctx := . }}
{{- range $guard := list "namespace" "crd" }}
{{- if (index $ctx.Values.guards $guard).enabled }}
- name: {{ $guard }}.lockguard.core.navique.com
  admissionReviewVersions: ["v1"]
  clientConfig:
    service:
      name: {{ include "lockguard.webhookServiceName" $ctx }}
      namespace: {{ $ctx.Release.Namespace }}
      path: /validate-delete
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
