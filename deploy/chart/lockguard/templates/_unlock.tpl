{{- /*
Who may lift a Lock (docs/contract.md rule 18; Go: api/v1alpha1/unlock.go):
deleting a Lock, or an update that lowers what it protects, needs the verb
unlock on the Lock besides RBAC's delete or update. From 1.30 the policy of
unlockpermission.yaml checks it in the API server; before, the webhook entry
unlock.lockguard.core.navique.com (validatingwebhookconfiguration.yaml)
checks it in its matchConditions and lockguard refuses what reaches it
(webhook.UnlockHandler). Both skip unlockPermission.exemptPrincipals.
*/ -}}

{{/* CEL: true when the request's principal holds the verb unlock on the request's Lock (api/v1alpha1.UnlockVerb; resourceNames scope it). The name is the old object's: the request of a deletecollection names none (request.name is then unset). */}}
{{- define "lockguard.unlocker" -}}
authorizer.group('core.navique.com').resource('locks').namespace(request.namespace).name(oldObject.metadata.name).check('unlock').allowed()
{{- end }}

{{/* CEL: the same for a ClusterLock (docs/contract.md rule 22): the verb unlock on the request's ClusterLock. */}}
{{- define "lockguard.clusterUnlocker" -}}
authorizer.group('core.navique.com').resource('clusterlocks').name(oldObject.metadata.name).check('unlock').allowed()
{{- end }}

{{/* CEL: true when the request's principal is not one of unlockPermission.exemptPrincipals. */}}
{{- define "lockguard.unlockNotExempt" -}}
{{- $quoted := list }}
{{- range .Values.unlockPermission.exemptPrincipals }}{{ $quoted = append $quoted (printf "'%s'" .) }}{{ end }}
{{- printf "!(request.userInfo.username in [%s])" (join ", " $quoted) }}
{{- end }}

{{/*
The cases of an update that lowers a Lock, as api/v1alpha1.Lowers decides
them: what is lowered (api/v1alpha1.Lowered) to the CEL that is true when
the update from oldObject to object lowers it. One line per case, here and
in Lowers.
*/}}
{{- define "lockguard.unlockLowers" -}}
level: "has(oldObject.spec.level) && oldObject.spec.level == 'ReadOnly' && !(has(object.spec.level) && object.spec.level == 'ReadOnly')"
expiresAt: "has(object.spec.expiresAt) && (!has(oldObject.spec.expiresAt) || timestamp(string(object.spec.expiresAt)) < timestamp(string(oldObject.spec.expiresAt)))"
enforcement: "!(has(oldObject.spec.enforcement) && oldObject.spec.enforcement == 'Audit') && has(object.spec.enforcement) && object.spec.enforcement == 'Audit'"
{{- end }}

{{/* CEL: the refusal (api/v1alpha1.UnlockDeleteMessage, UnlockLowerMessage) for an action ("deleting", "lowering the level of"). */}}
{{- define "lockguard.unlockMessage" -}}
'{{ . }} Lock ' + request.namespace + '/' + oldObject.metadata.name + ' needs the verb "unlock" on locks.core.navique.com (RBAC); ask for the ClusterRole lockguard-unlock'
{{- end }}

{{/* CEL: the refusal for a ClusterLock (api/v1alpha1.ClusterUnlockMessage). */}}
{{- define "lockguard.clusterUnlockMessage" -}}
'{{ . }} ClusterLock ' + oldObject.metadata.name + ' needs the verb "unlock" on clusterlocks.core.navique.com (RBAC); ask for the ClusterRole lockguard-cluster-unlock'
{{- end }}
