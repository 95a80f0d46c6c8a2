{{/* The memory formula's figures (docs/limits.md, Memory: limits.memory ≥ (R0 + F + L × Locks + O × objects) / 0.9, F = the transport's floor: the body floor, or webhook.maxBufferedBytes when less, and C for each connection of the connection floor, or webhook.maxConnections when fewer), the one place the chart holds them; e2e/chart TestChartSizingFigures checks that they equal limits.md's table and internal/transport's floors. */}}
{{- define "lockguard.sizingFigures" -}}
idleMiB: 15
bodyFloorMiB: 16
connectionFloor: 64
connectionKiB: 61
lockBytes: 1400
objectBytes: 120
{{- end }}

{{/* A memory quantity in bytes: a whole number with an optional suffix k, M, G, T, Ki, Mi, Gi or Ti (dict "value" the quantity, "name" the value's name, "use" what the chart does with it, for the error). */}}
{{- define "lockguard.bytes" -}}
{{- $q := toString .value -}}
{{- if not (kindIs "string" .value) -}}
{{- $q = printf "%.0f" (float64 .value) -}}
{{- end -}}
{{- $units := dict "" 1 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 -}}
{{- $num := regexFind "^[0-9]+" $q -}}
{{- $suffix := trimPrefix $num $q -}}
{{- if or (not $num) (not (hasKey $units $suffix)) -}}
{{- fail (printf "%s %q: %s and reads a whole number with an optional suffix k, M, G, T, Ki, Mi, Gi or Ti" .name $q .use) -}}
{{- end -}}
{{- mul (int64 $num) (int64 (get $units $suffix)) -}}
{{- end }}

{{/* The memory budget of the values, in bytes, as YAML: transport (F, the transport's floor, which it holds whatever the caches leave: min(webhook.maxBufferedBytes, the body floor) + C × min(webhook.maxConnections, the connection floor); beyond it the transport holds only what the caches leave under GOMEMLIMIT), needed (R0 + F + L × sizing.locks + O × sizing.objects, what GOMEMLIMIT must hold), required (needed / 0.9, what limits.memory must be), and with a memory limit, limit and goMemLimit (90% of it, as the Deployment sets it). */}}
{{- define "lockguard.sizing" -}}
{{- $f := include "lockguard.sizingFigures" . | fromYaml -}}
{{- $body := include "lockguard.bytes" (dict "value" .Values.webhook.maxBufferedBytes "name" "webhook.maxBufferedBytes" "use" "the chart passes it to --webhook-max-buffered-bytes") | int64 -}}
{{- $transport := add (min $body (mul (int64 $f.bodyFloorMiB) 1048576)) (mul (min (int64 .Values.webhook.maxConnections) (int64 $f.connectionFloor)) (int64 $f.connectionKiB) 1024) -}}
{{- $caches := add (mul (int64 .Values.sizing.locks) (int64 $f.lockBytes)) (mul (int64 .Values.sizing.objects) (int64 $f.objectBytes)) -}}
{{- $needed := add (mul (int64 $f.idleMiB) 1048576) $transport $caches }}
transport: {{ $transport }}
needed: {{ $needed }}
required: {{ div (add (mul $needed 10) 8) 9 }}
{{- with (.Values.resources.limits | default dict).memory }}
limit: {{ include "lockguard.bytes" (dict "value" . "name" "resources.limits.memory" "use" "the chart sets GOMEMLIMIT from it") }}
goMemLimit: {{ include "lockguard.goMemLimit" . }}
{{- end }}
{{- end }}

{{/* Fails the render when lockguard idle and the transport's floor (R0 + F) exceed GOMEMLIMIT: no count of Locks fits then. Nothing without a memory limit. */}}
{{- define "lockguard.checkTransport" -}}
{{- $s := include "lockguard.sizing" . | fromYaml -}}
{{- $f := include "lockguard.sizingFigures" . | fromYaml -}}
{{- $floor := add (mul (int64 $f.idleMiB) 1048576) (int64 $s.transport) -}}
{{- if and (hasKey $s "goMemLimit") (gt $floor (int64 $s.goMemLimit)) -}}
{{- fail (printf "lockguard idle (%d MiB) and the webhook's transport at its floor (%s: the bodies' floor of %d MiB or webhook.maxBufferedBytes when less, and %d connections × %d KiB) hold %s, more than GOMEMLIMIT %s (90%% of resources.limits.memory %s): raise resources.limits.memory (docs/limits.md, Memory)" (int64 $f.idleMiB) (include "lockguard.mib" $s.transport) (int64 $f.bodyFloorMiB) (min (int64 .Values.webhook.maxConnections) (int64 $f.connectionFloor)) (int64 $f.connectionKiB) (include "lockguard.mib" $floor) (include "lockguard.mib" $s.goMemLimit) (include "lockguard.quantity" .Values.resources.limits.memory)) -}}
{{- end -}}
{{- end }}

{{/* Bytes as MiB, to a tenth, with the unit. */}}
{{- define "lockguard.mib" -}}
{{- printf "%.1f MiB" (divf (float64 .) 1048576) -}}
{{- end }}

{{/* A value as written: a string as it is, a number (which a values file gives as a float) whole. */}}
{{- define "lockguard.quantity" -}}
{{- if kindIs "string" . }}{{ . }}{{ else }}{{ printf "%.0f" (float64 .) }}{{ end -}}
{{- end }}
