{{- define "type_members" -}}
{{- $field := . -}}
{{- if eq $field.Name "metadata" -}}
The object's metadata: see the Kubernetes API reference for `ObjectMeta`.
{{- else -}}
{{ template "cell" $field.Doc }}
{{- end -}}
{{- end -}}
