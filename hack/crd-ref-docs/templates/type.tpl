{{- /* A type: its doc, validation, where it is used, and its fields or values. */ -}}
{{- define "type" -}}
{{- $type := . -}}
#### {{ $type.Name }}
{{- if $type.IsAlias }}

_Underlying type:_ {{ markdownRenderTypeLink $type.UnderlyingType }}
{{- end }}

{{ template "prose" $type.Doc }}
{{- if or $type.Validation (index $type.Markers "kubebuilder:validation:XValidation") }}

_Validation:_
{{ range $type.Validation }}
{{- if ne . "Optional: {}" }}
- {{ template "validation" . }}
{{- end }}
{{- end }}
{{- range index $type.Markers "kubebuilder:validation:XValidation" }}
- {{ template "rule" . }}
{{- end }}
{{- end }}
{{- if $type.References }}

_Appears in:_ {{ range $i, $r := $type.SortedReferences }}{{ if $i }}, {{ end }}{{ markdownRenderTypeLink $r }}{{ end }}
{{- end }}
{{- if $type.Members }}

| Field | Description | Default | Validation |
| --- | --- | --- | --- |
{{- if $type.GVK }}
| `apiVersion` _string_ | `{{ $type.GVK.Group }}/{{ $type.GVK.Version }}` | | |
| `kind` _string_ | `{{ $type.GVK.Kind }}` | | |
{{- end }}
{{- range $type.Members }}
| `{{ .Name }}` _{{ markdownRenderType .Type }}_ | {{ template "type_members" . }} | {{ with .Default }}`{{ . | replace "{  }" "{}" | replace "|" "\\|" }}`{{ end }} | {{ template "field_validation" . }} |
{{- end }}
{{- end }}
{{- if $type.EnumValues }}

| Value | Description |
| --- | --- |
{{- range $type.EnumValues }}
| `{{ .Name }}` | {{ template "cell" .Doc }} |
{{- end }}
{{- end }}
{{- end -}}
