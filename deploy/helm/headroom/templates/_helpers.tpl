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

{{- /* The API server's address for both containers on nodes without kube-proxy (values.yaml). */ -}}
{{- define "headroom.apiServerEnv" -}}
{{- if or .Values.kubernetesServiceHost .Values.kubernetesServicePort }}
{{- if not (and .Values.kubernetesServiceHost .Values.kubernetesServicePort) }}
{{- fail "kubernetesServiceHost and kubernetesServicePort go together: set both or neither" }}
{{- end }}
- name: KUBERNETES_SERVICE_HOST
  value: {{ .Values.kubernetesServiceHost | quote }}
- name: KUBERNETES_SERVICE_PORT
  value: {{ .Values.kubernetesServicePort | toString | quote }}
{{- end }}
{{- end -}}
