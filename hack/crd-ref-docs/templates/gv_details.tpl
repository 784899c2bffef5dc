{{- /* One API group version: its kinds first, then the types they use. */ -}}
{{- define "gvDetails" -}}
{{- $gv := . -}}
## {{ $gv.GroupVersionString }}

{{ template "prose" $gv.Doc }}

### Kinds
{{- range $gv.SortedKinds }}

{{ template "type" ($gv.TypeForKind .) }}
{{- end }}

### Types
{{- range $gv.SortedTypes }}
{{- if and (not .GVK) (markdownShouldRenderType .) }}

{{ template "type" . }}
{{- end }}
{{- end }}
{{- end -}}
