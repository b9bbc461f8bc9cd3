{{- define "headroom.name" -}}headroom{{- end -}}

{{- /* Every object's labels; they include the selector labels, so never add both. */ -}}
{{- define "headroom.labels" -}}
{{ include "headroom.selectorLabels" . }}
app.kubernetes.io/part-of: headroom
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "headroom.selectorLabels" -}}
app.kubernetes.io/name: {{ include "headroom.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "headroom.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "headroom.socket" -}}/run/headroom/headroomd.sock{{- end -}}
