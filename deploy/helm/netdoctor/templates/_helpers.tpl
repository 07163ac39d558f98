{{/* The chart's name, or nameOverride. */}}
{{- define "netdoctor.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-qualified name: the release name when it already contains the chart's. */}}
{{- define "netdoctor.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "netdoctor.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "netdoctor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "netdoctor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "netdoctor.labels" -}}
{{ include "netdoctor.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "netdoctor.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "netdoctor.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "netdoctor.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/* The Secret holding the bearer token. */}}
{{- define "netdoctor.tokenSecret" -}}
{{- default (printf "%s-token" (include "netdoctor.fullname" .)) .Values.token.existingSecret -}}
{{- end -}}

{{/* True ("true") when the agent listens on the node's address with a token. */}}
{{- define "netdoctor.onNode" -}}
{{- if eq .Values.agent.listen "node" -}}true{{- else if eq .Values.agent.listen "loopback" -}}{{- else -}}
{{- fail (printf "agent.listen must be \"node\" or \"loopback\", not %q" .Values.agent.listen) -}}
{{- end -}}
{{- end -}}

{{/* True when monitors are to be created: listening on the node and the Operator's API present. */}}
{{- define "netdoctor.monitoring" -}}
{{- if and .Values.monitoring.enabled (include "netdoctor.onNode" .) (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1") -}}true{{- end -}}
{{- end -}}
