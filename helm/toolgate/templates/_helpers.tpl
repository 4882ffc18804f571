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

{{/* Where runtime state is written: the PersistentVolumeClaim of "toolgate.dataClaim", else an emptyDir. */}}
{{- define "toolgate.dataDir" -}}
{{- $config := .Values.config | default dict }}
{{- $config.data_dir | default "/var/lib/toolgate" }}
{{- end }}

{{/*
The state backend the gateway runs with: "redis" with the in-chart Redis
(redis.enabled) or `config.state.backend: redis`, else "memory".
*/}}
{{- define "toolgate.stateBackend" -}}
{{- if .Values.redis.enabled }}redis{{ else }}{{ ((.Values.config | default dict).state | default dict).backend | default "memory" }}{{ end }}
{{- end }}

{{/*
The PersistentVolumeClaim mounted at data_dir ("" when data_dir is an emptyDir). Only
the memory backend keeps state there (registrations made through the admin API, users'
upstream tokens); with Redis it holds nothing that must outlive the pod, and several
pods need Redis ("toolgate.validate"), so the claim is always one pod's.
*/}}
{{- define "toolgate.dataClaim" -}}
{{- if and .Values.persistence.enabled (ne (include "toolgate.stateBackend" .) "redis") }}
{{- .Values.persistence.existingClaim | default (printf "%s-data" (include "toolgate.fullname" .)) }}
{{- end }}
{{- end }}

{{/* The in-chart Redis (redis.enabled): its name, labels and URL. */}}
{{- define "toolgate.redis.fullname" -}}
{{- printf "%s-redis" (include "toolgate.fullname" . | trunc 57 | trimSuffix "-") }}
{{- end }}

{{/*
A name of its own, not only a component label: the gateway's selector (name and
instance, immutable on a Deployment) must not match the Redis pods.
*/}}
{{- define "toolgate.redis.selectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-redis" (include "toolgate.name" . | trunc 57 | trimSuffix "-") }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: redis
{{- end }}

{{/* Not toolgate.labels: the ServiceMonitor selects the gateway's Service by those. */}}
{{- define "toolgate.redis.labels" -}}
helm.sh/chart: {{ include "toolgate.chart" . }}
{{ include "toolgate.redis.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "toolgate.redis.port" -}}6379{{- end }}

{{- define "toolgate.redis.url" -}}
{{- printf "redis://%s.%s.svc:%s/0" (include "toolgate.redis.fullname" .) .Release.Namespace (include "toolgate.redis.port" .) }}
{{- end }}

{{/*
Secrets the pods reference that the chart does not make, comma-separated and sorted:
secrets.existingSecret, Secrets in extraEnvFrom, extraEnv (secretKeyRef) and
extraVolumes (secret, projected). Changing one of them must roll the pods
(checksum/secrets, Reloader).
*/}}
{{- define "toolgate.referencedSecrets" -}}
{{- $names := list }}
{{- with .Values.secrets.existingSecret }}{{ $names = append $names . }}{{ end }}
{{- range .Values.extraEnvFrom }}
{{- with (.secretRef | default dict).name }}{{ $names = append $names . }}{{ end }}
{{- end }}
{{- range .Values.extraEnv }}
{{- with ((.valueFrom | default dict).secretKeyRef | default dict).name }}{{ $names = append $names . }}{{ end }}
{{- end }}
{{- range .Values.extraVolumes }}
{{- with (.secret | default dict).secretName }}{{ $names = append $names . }}{{ end }}
{{- range ((.projected | default dict).sources | default list) }}
{{- with (.secret | default dict).name }}{{ $names = append $names . }}{{ end }}
{{- end }}
{{- end }}
{{- $names | uniq | sortAlpha | join "," }}
{{- end }}

{{/*
A digest of the referenced Secrets' data, read from the cluster with `lookup` at
install and upgrade: a Secret changed since the last release rolls the pods on the
next `helm upgrade`. Offline (`helm template`, Argo CD) `lookup` sees no cluster and
the digest covers the names only; rollout.token or Reloader cover those cases.
*/}}
{{- define "toolgate.referencedSecretsChecksum" -}}
{{- $parts := list }}
{{- range (include "toolgate.referencedSecrets" . | splitList ",") }}
{{- $secret := lookup "v1" "Secret" $.Release.Namespace . | default dict }}
{{- $parts = append $parts (printf "%s=%s" . (toJson ($secret.data | default dict))) }}
{{- end }}
{{- $parts | join "\n" | sha256sum }}
{{- end }}

{{/*
The label matchers that pick this release's series out of Prometheus: the
ServiceMonitor's job (the Service's name) in the release's namespace, unless
prometheusRule.seriesSelector says otherwise.
*/}}
{{- define "toolgate.seriesSelector" -}}
{{- .Values.prometheusRule.seriesSelector | default (printf "namespace=%q, job=%q" .Release.Namespace (include "toolgate.fullname" .)) }}
{{- end }}

{{/*
The share of an upstream's tool calls over the rule window whose outcome matches the
regex `outcomes`, per namespace and upstream (calls to names the caller may not see
have upstream="<unknown>" and belong to none). Takes (dict "root" $ "outcomes" regex).
*/}}
{{- define "toolgate.callShare" -}}
{{- $sel := include "toolgate.seriesSelector" .root }}
{{- $window := .root.Values.prometheusRule.window -}}
sum by (namespace, upstream) (rate(toolgate_tool_calls_total{ {{- $sel }}, upstream!="<unknown>", outcome=~"{{ .outcomes }}"}[{{ $window }}]))
  /
sum by (namespace, upstream) (rate(toolgate_tool_calls_total{ {{- $sel }}, upstream!="<unknown>"}[{{ $window }}]))
{{- end }}

{{/*
The gateway config as YAML: `.Values.config` plus the chart's additions (data_dir,
allowed hosts of the Service and the Ingress).
*/}}
{{- define "toolgate.config" -}}
{{- $config := deepCopy (.Values.config | default dict) }}
{{- $_ := set $config "data_dir" (include "toolgate.dataDir" .) }}
{{- if .Values.redis.enabled }}
{{- /* The URL comes from REDIS_URL, which the Deployment sets to the in-chart Redis. */}}
{{- $state := deepCopy ($config.state | default dict) }}
{{- $_ := set $state "backend" "redis" }}
{{- $_ := set $state "url" "${REDIS_URL}" }}
{{- $_ := set $config "state" $state }}
{{- end }}
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
{{- $backend := include "toolgate.stateBackend" . }}
{{- if and (include "toolgate.multiReplica" .) (ne $backend "redis") }}
{{- fail "more than one replica (replicaCount > 1 or autoscaling.enabled) needs shared state: set config.state.backend: redis and config.state.url (e.g. \"${REDIS_URL}\" from the Secret), or redis.enabled: true for an evaluation install; sessions, rate limits and runtime registrations are per pod otherwise" }}
{{- end }}
{{- if .Values.redis.enabled }}
{{- if or $state.url (and $state.backend (ne $state.backend "redis")) }}
{{- fail "redis.enabled runs a Redis in the chart and points the gateway at it: remove config.state.url and config.state.backend (or set redis.enabled: false to use your own Redis)" }}
{{- end }}
{{- else if and (eq $backend "redis") (not $state.url) }}
{{- fail "config.state.backend is redis but config.state.url is empty: set it, e.g. url: \"${REDIS_URL}\" with REDIS_URL in secrets.env or the existing Secret (or set redis.enabled: true for an evaluation install)" }}
{{- end }}
{{- if and .Values.persistence.existingClaim (eq $backend "redis") }}
{{- fail "persistence.existingClaim is set but the state lives in Redis (config.state.backend: redis or redis.enabled), where data_dir keeps nothing: unset persistence.existingClaim" }}
{{- end }}
{{- if and .Values.networkPolicy.enabled .Values.networkPolicy.egress.enabled (eq $backend "redis") (not .Values.redis.enabled) (not .Values.networkPolicy.egress.redis.to) }}
{{- fail "networkPolicy.egress limits where the pods may connect, and the state lives in your Redis: list where it runs in networkPolicy.egress.redis.to (e.g. [{ipBlock: {cidr: 10.0.5.7/32}}] or a namespaceSelector), or set networkPolicy.egress.enabled: false" }}
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
