{{/* Chart name, truncated to a DNS label. */}}
{{- define "toolgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: the release name, plus the chart name unless it holds it. */}}
{{- define "toolgate.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "toolgate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "toolgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "toolgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "toolgate.labels" -}}
helm.sh/chart: {{ include "toolgate.chart" . }}
{{ include "toolgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "toolgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "toolgate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret the container's environment comes from ("" when none). */}}
{{- define "toolgate.secretName" -}}
{{- if .Values.secrets.existingSecret }}
{{- .Values.secrets.existingSecret }}
{{- else if .Values.secrets.env }}
{{- include "toolgate.fullname" . }}
{{- end }}
{{- end }}

{{/* More than one pod may serve at once. */}}
{{- define "toolgate.multiReplica" -}}
{{- if or .Values.autoscaling.enabled (gt (int .Values.replicaCount) 1) }}true{{ end }}
{{- end }}

{{/* Where runtime state is written (a writable emptyDir). */}}
{{- define "toolgate.dataDir" -}}
{{- $config := .Values.config | default dict }}
{{- $config.data_dir | default "/var/lib/toolgate" }}
{{- end }}

{{/*
The gateway config as YAML: `.Values.config` plus the chart's additions (data_dir,
allowed hosts of the Service and the Ingress).
*/}}
{{- define "toolgate.config" -}}
{{- $config := deepCopy (.Values.config | default dict) }}
{{- $_ := set $config "data_dir" (include "toolgate.dataDir" .) }}
{{- if .Values.autoAllowedHosts }}
{{- $explicit := hasKey $config "allowed_hosts" }}
{{- $hosts := list "localhost" "127.0.0.1" "::1" }}
{{- if $explicit }}
{{- $hosts = $config.allowed_hosts | default list }}
{{- end }}
{{- if or (not $explicit) (gt (len $hosts) 0) }}
{{- $svc := include "toolgate.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- $hosts = concat $hosts (list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns)) }}
{{- if .Values.ingress.enabled }}
{{- range .Values.ingress.hosts }}
{{- if .host }}
{{- $hosts = append $hosts .host }}
{{- end }}
{{- end }}
{{- end }}
{{- $_ := set $config "allowed_hosts" ($hosts | uniq) }}
{{- end }}
{{- end }}
{{- if .Values.serviceMonitor.enabled }}
{{- $metrics := deepCopy ($config.metrics | default dict) }}
{{- if not $metrics.listen }}
{{- $_ := set $metrics "listen" (printf "0.0.0.0:%d" (int .Values.serviceMonitor.port)) }}
{{- end }}
{{- $_ := set $config "metrics" $metrics }}
{{- end }}
{{- toYaml $config }}
{{- end }}

{{/* Refuses values that would deploy a broken gateway. */}}
{{- define "toolgate.validate" -}}
{{- $config := .Values.config | default dict }}
{{- $state := $config.state | default dict }}
{{- if and (include "toolgate.multiReplica" .) (ne ($state.backend | default "memory") "redis") }}
{{- fail "more than one replica (replicaCount > 1 or autoscaling.enabled) needs shared state: set config.state.backend: redis and config.state.url (e.g. \"${REDIS_URL}\" from the Secret); sessions, rate limits and runtime registrations are per pod otherwise" }}
{{- end }}
{{- if and (eq ($state.backend | default "memory") "redis") (not $state.url) }}
{{- fail "config.state.backend is redis but config.state.url is empty: set it, e.g. url: \"${REDIS_URL}\" with REDIS_URL in secrets.env or the existing Secret" }}
{{- end }}
{{- if and .Values.secrets.existingSecret .Values.secrets.env }}
{{- fail "set either secrets.existingSecret or secrets.env, not both (the chart creates no Secret when an existing one is named)" }}
{{- end }}
{{- if le (int .Values.shutdown.terminationGracePeriodSeconds) (int .Values.shutdown.preStopSleepSeconds) }}
{{- fail "shutdown.terminationGracePeriodSeconds must be larger than shutdown.preStopSleepSeconds (the gateway needs time to stop after the sleep)" }}
{{- end }}
{{- if and .Values.podDisruptionBudget.minAvailable .Values.podDisruptionBudget.maxUnavailable }}
{{- fail "podDisruptionBudget: set minAvailable or maxUnavailable, not both" }}
{{- end }}
{{- end }}
