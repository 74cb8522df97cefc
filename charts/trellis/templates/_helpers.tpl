{{/* Hand-written, copied by hack/chart (hack/chart/files). */}}

{{/* Helm's labels, on every object besides config's own. */}}
{{- define "trellis.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/* An image from {repository, tag, digest}: repository[:tag][@digest]. */}}
{{- define "trellis.image" -}}
{{- if not .repository }}{{ fail "an image needs a repository" }}{{ end -}}
{{- .repository }}{{ with .tag }}:{{ . }}{{ end }}{{ with .digest }}@{{ . }}{{ end -}}
{{- end }}
