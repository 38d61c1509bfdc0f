{{/* Names, labels and the pieces every fleet pod shares. */}}

{{- define "ex2d.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ex2d.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "ex2d.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels shared by everything the release makes. */}}
{{- define "ex2d.labels" -}}
helm.sh/chart: {{ include "ex2d.chart" . }}
app.kubernetes.io/name: {{ include "ex2d.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: ex2d
{{- end -}}

{{/* Selector of every pod of the release (fleet, ctl job, Redis). */}}
{{- define "ex2d.releaseSelector" -}}
app.kubernetes.io/name: {{ include "ex2d.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Selector of one component: (dict "root" $ "component" "reader"). */}}
{{- define "ex2d.selectorLabels" -}}
{{ include "ex2d.releaseSelector" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Fleet pods (reader, worker, writer) carry this label: scraped, allowed to reach Redis. */}}
{{- define "ex2d.fleetLabel" -}}
ex2d.desi/fleet: "true"
{{- end -}}

{{- define "ex2d.redisHost" -}}
{{- if .Values.redis.enabled -}}
{{- printf "%s-redis" (include "ex2d.fullname" .) -}}
{{- else -}}
{{- required "redis.external.host is required when redis.enabled is false" .Values.redis.external.host -}}
{{- end -}}
{{- end -}}

{{- define "ex2d.redisPort" -}}
{{- if .Values.redis.enabled -}}{{ .Values.redis.port }}{{- else -}}{{ .Values.redis.external.port }}{{- end -}}
{{- end -}}

{{- define "ex2d.redisAuthSecret" -}}
{{- default (printf "%s-redis-auth" (include "ex2d.fullname" .)) .Values.redis.auth.existingSecret -}}
{{- end -}}

{{/* image reference of a role: (dict "root" $ "spec" .Values.reader) */}}
{{- define "ex2d.image" -}}
{{- $tag := default (default .root.Chart.AppVersion .root.Values.image.tag) .spec.image.tag -}}
{{- printf "%s:%s" .spec.image.repository $tag -}}
{{- end -}}

{{/* The configuration file: values.config plus the keys the chart owns. */}}
{{- define "ex2d.configYaml" -}}
{{- $c := deepCopy .Values.config -}}
{{- $owned := dict
  "redis" (dict "host" (include "ex2d.redisHost" .) "port" (include "ex2d.redisPort" . | int))
  "service" (dict "http_host" "0.0.0.0" "http_port" (.Values.ports.http | int))
  "zmq" (dict "bind" (printf "tcp://0.0.0.0:%d" (.Values.ports.zmq | int)) "allow_plaintext" (not .Values.curve.enabled))
  "worker" (dict "backend" .Values.worker.backend) -}}
{{- toYaml (mergeOverwrite $c $owned) -}}
{{- end -}}

{{/* Checks that stop a render whose fleet could not work. */}}
{{- define "ex2d.validate" -}}
{{- if not (has .Values.worker.backend (list "cpu" "cuda" "auto")) -}}
{{- fail (printf "worker.backend must be cpu, cuda or auto, not %q" .Values.worker.backend) -}}
{{- end -}}
{{- if le (.Values.terminationGracePeriodSeconds | float64) (.Values.config.service.drain_timeout_s | float64) -}}
{{- fail (printf "terminationGracePeriodSeconds (%v) must exceed config.service.drain_timeout_s (%v): a draining process would be killed mid-frame" .Values.terminationGracePeriodSeconds .Values.config.service.drain_timeout_s) -}}
{{- end -}}
{{- if .Values.config.redis.password -}}
{{- fail "config.redis.password must stay empty: give passwords through redis.auth (Secrets mounted as files)" -}}
{{- end -}}
{{- if and .Values.keda.enabled (not .Values.keda.nightly) (empty .Values.keda.campaigns) -}}
{{- fail "keda.enabled needs keda.nightly or at least one name in keda.campaigns" -}}
{{- end -}}
{{- if not .Values.redis.enabled -}}
{{- $_ := include "ex2d.redisHost" . -}}
{{- end -}}
{{- range $role, $pw := .Values.redis.auth.passwords -}}
{{- if and $pw (lt (len $pw) 16) -}}
{{- fail (printf "redis.auth.passwords.%s is shorter than 16 characters" $role) -}}
{{- end -}}
{{- end -}}
{{- if .Values.curve.enabled -}}
{{- range $role := list "reader" "worker" "writer" -}}
{{- if not (and (index $.Values.curve.secrets $role) (index $.Values.curve.allowedKeys $role)) -}}
{{- fail (printf "curve.enabled needs curve.secrets.%s and curve.allowedKeys.%s" $role $role) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
A fleet container and its pod: (dict "root" $ "role" "reader" "spec" .Values.reader).
Renders the pod template's spec.
*/}}
{{- define "ex2d.podSpec" -}}
{{- $root := .root -}}
{{- $role := .role -}}
{{- $spec := .spec -}}
{{- $auth := $root.Values.redis.auth.enabled -}}
{{- $binds := has $role (list "reader" "writer") -}}
{{- $data := and (has $role (list "reader" "writer" "ctl")) (or $root.Values.data.existingClaim $root.Values.data.volume) -}}
{{- $curve := and $root.Values.curve.enabled (has $role (list "reader" "worker" "writer")) -}}
enableServiceLinks: false
automountServiceAccountToken: false
terminationGracePeriodSeconds: {{ $root.Values.terminationGracePeriodSeconds }}
{{- with $root.Values.image.pullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml $root.Values.podSecurityContext | nindent 2 }}
{{- if and (eq $role "worker") $spec.hostIPC }}
hostIPC: true
{{- end }}
{{- with $spec.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $spec.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $spec.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
containers:
  - name: {{ $role }}
    image: {{ include "ex2d.image" (dict "root" $root "spec" $spec) | quote }}
    imagePullPolicy: {{ default $root.Values.image.pullPolicy $spec.image.pullPolicy }}
    {{- with $spec.command }}
    command:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- with $spec.extraArgs }}
    args:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    env:
      - name: EX2D_CONFIG
        value: /etc/ex2d/ex2d.yaml
      - name: POD_NAME
        valueFrom: {fieldRef: {fieldPath: metadata.name}}
      - name: POD_IP
        valueFrom: {fieldRef: {fieldPath: status.podIP}}
      - name: EX2D_SERVICE_NAME
        value: "$(POD_NAME)"
      # The images set these too; the pod's values win over the image's.
      - name: EX2D_SERVICE_HTTP_HOST
        value: "0.0.0.0"
      - name: EX2D_SERVICE_HTTP_PORT
        value: {{ $root.Values.ports.http | quote }}
      {{- if $binds }}
      # Bound to the pod IP, which is what the process advertises in Redis to its peers.
      - name: EX2D_ZMQ_BIND
        value: "tcp://$(POD_IP):{{ $root.Values.ports.zmq }}"
      {{- end }}
      {{- if $auth }}
      - name: EX2D_REDIS_USER
        value: "ex2d-{{ $role }}"
      - name: EX2D_REDIS_PASSWORD_FILE
        value: /etc/ex2d/redis/password
      {{- end }}
      {{- if $curve }}
      - name: EX2D_ZMQ_CURVE_SECRET_KEY_FILE
        value: /etc/ex2d/curve/own/{{ $root.Values.curve.secretKey }}
      - name: EX2D_ZMQ_CURVE_ALLOWED_KEYS
        value: /etc/ex2d/curve/allowed
      {{- end }}
      {{- with $spec.extraEnv }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
    ports:
      - name: http
        containerPort: {{ $root.Values.ports.http }}
        protocol: TCP
      {{- if $binds }}
      - name: zmq
        containerPort: {{ $root.Values.ports.zmq }}
        protocol: TCP
      {{- end }}
    startupProbe:
      httpGet: {path: {{ $root.Values.probes.startup.path }}, port: http}
      periodSeconds: {{ $root.Values.probes.startup.periodSeconds }}
      timeoutSeconds: {{ $root.Values.probes.startup.timeoutSeconds }}
      failureThreshold: {{ $root.Values.probes.startup.failureThreshold }}
    livenessProbe:
      httpGet: {path: {{ $root.Values.probes.liveness.path }}, port: http}
      periodSeconds: {{ $root.Values.probes.liveness.periodSeconds }}
      timeoutSeconds: {{ $root.Values.probes.liveness.timeoutSeconds }}
      failureThreshold: {{ $root.Values.probes.liveness.failureThreshold }}
    readinessProbe:
      httpGet: {path: {{ $root.Values.probes.readiness.path }}, port: http}
      periodSeconds: {{ $root.Values.probes.readiness.periodSeconds }}
      timeoutSeconds: {{ $root.Values.probes.readiness.timeoutSeconds }}
      failureThreshold: {{ $root.Values.probes.readiness.failureThreshold }}
    resources:
      {{- $res := deepCopy $spec.resources }}
      {{- if and (eq $role "worker") (eq $root.Values.worker.backend "cuda") }}
      {{- $limits := default (dict) $res.limits }}
      {{- $_ := set $limits $root.Values.worker.gpu.resourceName ($root.Values.worker.gpu.count | int) }}
      {{- $_ := set $res "limits" $limits }}
      {{- end }}
      {{- toYaml $res | nindent 6 }}
    securityContext:
      {{- toYaml $root.Values.containerSecurityContext | nindent 6 }}
    volumeMounts:
      - name: config
        mountPath: /etc/ex2d/ex2d.yaml
        subPath: ex2d.yaml
        readOnly: true
      - name: tmp
        mountPath: /tmp
      {{- if $auth }}
      - name: redis-password
        mountPath: /etc/ex2d/redis
        readOnly: true
      {{- end }}
      {{- if $curve }}
      - name: curve-secret-key
        mountPath: /etc/ex2d/curve/own
        readOnly: true
      - name: curve-allowed-keys
        mountPath: /etc/ex2d/curve/allowed
        readOnly: true
      {{- end }}
      {{- if $data }}
      - name: data
        mountPath: {{ $root.Values.data.mountPath }}
        readOnly: {{ eq $role "reader" }}
      {{- end }}
volumes:
  - name: config
    configMap:
      name: {{ include "ex2d.fullname" $root }}-config
  - name: tmp
    emptyDir: {sizeLimit: 1Gi}
  {{- if $auth }}
  - name: redis-password
    secret:
      secretName: {{ include "ex2d.redisAuthSecret" $root }}
      defaultMode: 0440
      items:
        - key: {{ $role }}
          path: password
  {{- end }}
  {{- if $curve }}
  - name: curve-secret-key
    secret:
      secretName: {{ index $root.Values.curve.secrets $role }}
      defaultMode: 0440
      items:
        - key: {{ $root.Values.curve.secretKey }}
          path: {{ $root.Values.curve.secretKey }}
  - name: curve-allowed-keys
    configMap:
      name: {{ index $root.Values.curve.allowedKeys $role }}
  {{- end }}
  {{- if $data }}
  - name: data
    {{- if $root.Values.data.existingClaim }}
    persistentVolumeClaim:
      claimName: {{ $root.Values.data.existingClaim }}
    {{- else }}
    {{- toYaml $root.Values.data.volume | nindent 4 }}
    {{- end }}
  {{- end }}
{{- end -}}

{{/* A fleet Deployment: (dict "root" $ "role" "reader" "spec" .Values.reader). */}}
{{- define "ex2d.deployment" -}}
{{- $root := .root -}}
{{- $role := .role -}}
{{- $spec := .spec -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "ex2d.fullname" $root }}-{{ $role }}
  labels:
    {{- include "ex2d.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ $role }}
spec:
  {{- if not (and (eq $role "worker") $root.Values.keda.enabled) }}
  replicas: {{ $spec.replicas }}
  {{- end }}
  revisionHistoryLimit: 3
  {{- with $spec.strategy }}
  strategy:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "ex2d.selectorLabels" (dict "root" $root "component" $role) | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "ex2d.labels" $root | nindent 8 }}
        app.kubernetes.io/component: {{ $role }}
        {{- include "ex2d.fleetLabel" $root | nindent 8 }}
      annotations:
        checksum/config: {{ include "ex2d.configYaml" $root | sha256sum }}
        {{- if $root.Values.monitoring.scrapeAnnotations }}
        prometheus.io/scrape: "true"
        prometheus.io/port: {{ $root.Values.ports.http | quote }}
        prometheus.io/path: /metrics
        {{- end }}
        {{- with $spec.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      {{- include "ex2d.podSpec" . | nindent 6 }}
{{- end -}}
