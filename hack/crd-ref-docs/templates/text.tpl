{{- /*
Doc comments made Markdown. "prose" keeps the comment's lines; "cell" joins
them into one table cell, paragraphs apart, pipes escaped. Both escape < and >
outside code spans, since GitHub drops "<name>" as an unknown HTML tag.
*/ -}}
{{- define "prose" -}}
{{- range $i, $part := splitList "`" (trim .) -}}
{{- if $i }}`{{ end -}}
{{- if eq (mod $i 2) 0 }}{{ $part | replace "<" "&lt;" | replace ">" "&gt;" }}{{ else }}{{ $part }}{{ end -}}
{{- end -}}
{{- end -}}

{{- define "cell" -}}
{{- $text := . | trim | replace "\n\n" "<br /><br />" | replace "\n" " " | replace "|" "\\|" -}}
{{- template "prose" $text -}}
{{- end -}}

{{- /*
One of a type's validation markers, "Name: value", and a CEL rule (the API
server's message, then the rule), as list items. A table cell needs its pipes
escaped, even in code spans, and a list item must not have them escaped:
"cellValidation" and "cellRule" are the same for a field's row.
*/ -}}
{{- define "validation" -}}
{{- if eq . "Required: {}" -}}
required
{{- else if eq . "XIntOrString: {}" -}}
integer or string
{{- else -}}
{{ . }}
{{- end -}}
{{- end -}}

{{- define "rule" -}}
{{- if .Message }}{{ template "prose" .Message }}: {{ end }}`{{ .Rule }}`
{{- end -}}

{{- define "cellValidation" -}}
{{- if eq . "Required: {}" -}}
required
{{- else if eq . "XIntOrString: {}" -}}
integer or string
{{- else -}}
{{ . | replace "|" "\\|" }}
{{- end -}}
{{- end -}}

{{- define "cellRule" -}}
{{- if .Message }}{{ template "cell" .Message }}: {{ end }}`{{ .Rule | replace "|" "\\|" }}`
{{- end -}}

{{- /*
A field's validation, one per line. A field inherits its type's markers; the
CEL rules of a struct type are shown once, under the type, not on every field
of that type.
*/ -}}
{{- define "field_validation" -}}
{{- $field := . -}}
{{- $sep := "" -}}
{{- range $field.Validation -}}
{{- if ne . "Optional: {}" }}{{ $sep }}{{ template "cellValidation" . }}{{ $sep = "<br />" }}{{ end -}}
{{- end -}}
{{- $rules := index $field.Markers "kubebuilder:validation:XValidation" -}}
{{- $typeRules := index $field.Type.Markers "kubebuilder:validation:XValidation" -}}
{{- if or (not $typeRules) (ne (printf "%v" $rules) (printf "%v" $typeRules)) -}}
{{- range $rules }}{{ $sep }}{{ template "cellRule" . }}{{ $sep = "<br />" }}{{ end -}}
{{- end -}}
{{- end -}}
