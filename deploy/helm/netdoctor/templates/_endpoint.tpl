{{/* The scrape settings shared by the ServiceMonitor and the PodMonitor. */}}
{{- define "netdoctor.scrapeEndpoint" -}}
port: metrics
path: /metrics
scheme: http
interval: {{ .Values.monitoring.interval }}
scrapeTimeout: {{ .Values.monitoring.scrapeTimeout }}
authorization:
  type: Bearer
  credentials:
    name: {{ include "netdoctor.tokenSecret" . }}
    key: {{ .Values.token.secretKey }}
{{- if eq .Values.monitoring.instanceLabel "node" }}
relabelings:
  - action: replace
    sourceLabels: [__meta_kubernetes_pod_node_name]
    targetLabel: instance
{{- else if ne .Values.monitoring.instanceLabel "address" }}
{{- fail (printf "monitoring.instanceLabel must be node or address, not %q" .Values.monitoring.instanceLabel) }}
{{- end }}
{{- end -}}
