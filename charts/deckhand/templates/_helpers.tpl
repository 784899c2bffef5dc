{{/*
The namespace of the manager and its namespaced objects.
*/}}
{{- define "deckhand.namespace" -}}
{{- default .Release.Namespace .Values.namespace -}}
{{- end -}}

{{/*
Helm's own labels, on every object besides the labels config/ gives it.
*/}}
{{- define "deckhand.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/*
The labels most of config/'s objects carry.
*/}}
{{- define "deckhand.labels" -}}
app.kubernetes.io/name: deckhand
app.kubernetes.io/part-of: deckhand
{{ include "deckhand.helmLabels" . }}
{{- end -}}

{{/*
The labels of the objects controller-gen generates (RBAC role, webhook
configurations): config/ gives them only part-of.
*/}}
{{- define "deckhand.generatedLabels" -}}
app.kubernetes.io/part-of: deckhand
{{ include "deckhand.helmLabels" . }}
{{- end -}}

{{/*
The manager pods' selector labels.
*/}}
{{- define "deckhand.selectorLabels" -}}
app.kubernetes.io/name: deckhand
control-plane: controller-manager
{{- end -}}

{{/*
GOMEMLIMIT: goMemLimit if set, else 90% of resources.limits.memory in whole
MiB (the Go runtime then collects harder as it nears the limit instead of
being OOM-killed), else nothing.
*/}}
{{- define "deckhand.goMemLimit" -}}
{{- if .Values.goMemLimit -}}
{{- .Values.goMemLimit -}}
{{- else -}}
{{- $limit := "" -}}
{{- with .Values.resources -}}{{- with .limits -}}{{- with .memory -}}{{- $limit = toString . -}}{{- end -}}{{- end -}}{{- end -}}
{{- if $limit -}}
{{- $number := regexFind "^[0-9.]+" $limit -}}
{{- $unit := trimPrefix $number $limit -}}
{{- $factors := dict "" 1.0 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "k" 1000.0 "K" 1000.0 "M" 1000000.0 "G" 1000000000.0 "T" 1000000000000.0 -}}
{{- if or (not $number) (not (hasKey $factors $unit)) -}}
{{- fail (printf "resources.limits.memory %q: set goMemLimit explicitly (no GOMEMLIMIT can be derived from it)" $limit) -}}
{{- end -}}
{{- $bytes := mulf (float64 $number) (get $factors $unit) -}}
{{- printf "%dMiB" (int (floor (divf (mulf $bytes 0.9) 1048576.0))) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
"true" when SidecarSets in Policy mode are injected by MutatingAdmissionPolicies
Deckhand writes (--sidecarset-policy-injection, implied by a Policy default)
and the manager runs SidecarSets, else empty: the manager's permission on
those policies follows it.
*/}}
{{- define "deckhand.policyInjection" -}}
{{- if and (has "sidecarset" .Values.controllers) (or .Values.sidecarSet.policyInjection (eq .Values.sidecarSet.injectionMode "Policy")) -}}
true
{{- end -}}
{{- end -}}

{{- /*
The kinds the manager runs, as --controllers spells them: in the manager's
order, whatever the order of the controllers value.
*/}}
{{- define "deckhand.controllers" -}}
{{- $on := list }}
{{- range $kind := list "sidecarset" "podset" "webserver" "restartschedule" }}
{{- if has $kind $.Values.controllers }}
{{- $on = append $on $kind }}
{{- end }}
{{- end }}
{{- join "," $on }}
{{- end -}}
