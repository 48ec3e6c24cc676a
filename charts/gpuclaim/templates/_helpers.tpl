{{/* Names. Every object name derives from gpuclaim.fullname so two releases never collide. */}}
{{- define "gpuclaim.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gpuclaim.fullname" -}}
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

{{/* A component name: <fullname>-<component>, kept within the 63-character DNS label limit. */}}
{{- define "gpuclaim.component" -}}
{{- $full := include "gpuclaim.fullname" .root | trunc (int (sub 62 (len .component))) | trimSuffix "-" }}
{{- printf "%s-%s" $full .component }}
{{- end }}

{{- define "gpuclaim.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gpuclaim.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpuclaim.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gpuclaim.labels" -}}
helm.sh/chart: {{ include "gpuclaim.chart" . }}
{{ include "gpuclaim.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gpuclaim
{{- end }}

{{/* Labels of one component (webhook, extender, certs, scheduler). */}}
{{- define "gpuclaim.componentLabels" -}}
{{ include "gpuclaim.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "gpuclaim.componentSelector" -}}
{{ include "gpuclaim.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* Object names shared by several templates. */}}
{{- define "gpuclaim.webhookName" -}}{{ include "gpuclaim.component" (dict "root" . "component" "webhook") }}{{- end }}
{{- define "gpuclaim.extenderName" -}}{{ include "gpuclaim.component" (dict "root" . "component" "extender") }}{{- end }}
{{- define "gpuclaim.certsName" -}}{{ include "gpuclaim.component" (dict "root" . "component" "certs") }}{{- end }}
{{- define "gpuclaim.configName" -}}{{ include "gpuclaim.component" (dict "root" . "component" "config") }}{{- end }}
{{- define "gpuclaim.schedulerName" -}}{{ include "gpuclaim.component" (dict "root" . "component" "scheduler") }}{{- end }}

{{- /* Garbage collection (config.gc, on by default): the webhook replicas elect one collector on this Lease. */ -}}
{{- define "gpuclaim.gcEnabled" -}}
{{- $gc := get (.Values.config | default dict) "gc" | default dict -}}
{{- if hasKey $gc "enabled" }}{{ $gc.enabled }}{{ else }}true{{ end -}}
{{- end }}
{{- define "gpuclaim.gcLeaseName" -}}
{{- $gc := get (.Values.config | default dict) "gc" | default dict -}}
{{- $gc.leaseName | default (printf "%s-gc" (include "gpuclaim.webhookName" .)) -}}
{{- end }}
{{- define "gpuclaim.gcLeaseNamespace" -}}
{{- $gc := get (.Values.config | default dict) "gc" | default dict -}}
{{- $gc.leaseNamespace | default .Release.Namespace -}}
{{- end }}

{{- define "gpuclaim.quotaEnabled" -}}
{{- $quota := get (.Values.config | default dict) "quota" | default dict -}}
{{- if hasKey $quota "enabled" }}{{ $quota.enabled }}{{ else }}false{{ end -}}
{{- end }}
{{- define "gpuclaim.quotaLeaseName" -}}
{{- $quota := get (.Values.config | default dict) "quota" | default dict -}}
{{- $quota.leaseName | default (printf "%s-quota" (include "gpuclaim.webhookName" .)) -}}
{{- end }}

{{- define "gpuclaim.tlsSecretName" -}}
{{- if .Values.certs.secretName }}{{ .Values.certs.secretName }}{{ else }}{{ include "gpuclaim.component" (dict "root" . "component" "tls") }}{{ end }}
{{- end }}

{{/* The DNS name the serving certificate is issued for (the webhook Service). */}}
{{- define "gpuclaim.webhookHost" -}}
{{- printf "%s.%s.svc" (include "gpuclaim.webhookName" .) .Release.Namespace }}
{{- end }}

{{- define "gpuclaim.extenderHost" -}}
{{- printf "%s.%s.svc" (include "gpuclaim.extenderName" .) .Release.Namespace }}
{{- end }}

{{/* The selector gpuclaim certs uses to find the webhook configurations to inject the caBundle into. */}}
{{- define "gpuclaim.webhookConfigSelector" -}}
{{- printf "app.kubernetes.io/name=%s,app.kubernetes.io/instance=%s" (include "gpuclaim.name" .) .Release.Name }}
{{- end }}

{{- define "gpuclaim.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/* Hardened pod- and container-level security contexts (Pod Security Standard "restricted"). */}}
{{- define "gpuclaim.podSecurityContext" -}}
runAsNonRoot: true
{{- with .Values.securityContext.runAsUser }}
runAsUser: {{ . }}
{{- end }}
{{- with .Values.securityContext.runAsGroup }}
runAsGroup: {{ . }}
# Secret volumes are mode 0440: group ownership is what lets the non-root user read the key.
fsGroup: {{ . }}
{{- end }}
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "gpuclaim.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* The mapped-resource test over one resource map expression `.m` (limits or requests). */}}
{{- define "gpuclaim.resourceTest" -}}
{{- $m := .m }}
{{- $tests := list }}
{{- range .names }}
{{- $tests = append $tests (printf "'%s' in %s" . $m) }}
{{- end }}
{{- range .prefixes }}
{{- $tests = append $tests (printf "%s.exists(r, r.startsWith('%s'))" $m .) }}
{{- end }}
{{- join " || " $tests }}
{{- end }}

{{/*
CEL: true when any container or init container lists a mapped resource in limits or requests.
Exact names are map lookups (constant cost); only prefixes iterate the map's keys.
*/}}
{{- define "gpuclaim.gpuPodExpression" -}}
{{- $r := include "gpuclaim.matchResources" . | fromYaml }}
{{- $lim := include "gpuclaim.resourceTest" (dict "m" "c.resources.limits" "names" $r.names "prefixes" $r.prefixes) }}
{{- $req := include "gpuclaim.resourceTest" (dict "m" "c.resources.requests" "names" $r.names "prefixes" $r.prefixes) }}
{{- $c := printf "has(c.resources) && ((has(c.resources.limits) && (%s)) || (has(c.resources.requests) && (%s)))" $lim $req }}
{{- printf "object.spec.containers.exists(c, %s) || (has(object.spec.initContainers) && object.spec.initContainers.exists(c, %s))" $c $c }}
{{- end }}

{{/* Pod template of the certs Job and CronJob. */}}
{{- define "gpuclaim.certsPodTemplate" -}}
metadata:
  labels:
    {{- include "gpuclaim.componentSelector" (dict "root" . "component" "certs") | nindent 4 }}
spec:
  serviceAccountName: {{ include "gpuclaim.certsName" . }}
  restartPolicy: Never
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- include "gpuclaim.podSecurityContext" . | nindent 4 }}
  containers:
    - name: certs
      image: {{ include "gpuclaim.image" . }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      {{- $expected := ternary 2 1 .Values.webhook.validating.enabled }}
      {{- $certs := list "gpuclaim" "certs" (printf "--namespace=%s" .Release.Namespace) (printf "--service=%s" (include "gpuclaim.webhookName" .)) (printf "--secret=%s" (include "gpuclaim.tlsSecretName" .)) (printf "--webhook-selector=%s" (include "gpuclaim.webhookConfigSelector" .)) }}
      {{- range (include "gpuclaim.extenderDNSNames" . | fromYamlArray) }}
      {{- $certs = append $certs (printf "--dns=%s" .) }}
      {{- end }}
      {{- if include "gpuclaim.extenderClientAuth" . }}
      {{- $certs = append $certs (printf "--client-name=%s" .Values.extender.clientAuth.name) }}
      {{- end }}
      # `gpuclaim certs` succeeds when it finds no webhook configuration to inject into, and on a
      # first install this pod can start before Helm has created them (they are applied last):
      # repeat it until it has seen all {{ $expected }}, so the caBundle is never left for the CronJob.
      command: ["/bin/sh", "-c"]
      args:
        - |
          for attempt in $(seq 1 60); do
            found="$({{ join " " $certs }} -o json | python -c 'import json, sys; print(json.load(sys.stdin)["webhookConfigurations"])')" || exit 1
            if [ "$found" -ge {{ $expected }} ]; then exit 0; fi
            echo "gpuclaim certs: saw $found of {{ $expected }} webhook configurations (attempt $attempt), retrying in 5s" >&2
            sleep 5
          done
          exit 1
      securityContext:
        {{- include "gpuclaim.containerSecurityContext" . | nindent 8 }}
      resources:
        {{- toYaml .Values.certs.builtin.resources | nindent 8 }}
      volumeMounts:
        - name: tmp
          mountPath: /tmp
  volumes:
    - name: tmp
      emptyDir:
        sizeLimit: 16Mi
{{- end }}

{{/* Namespaces and objects both webhooks skip: kube-system, the release namespace, extras, opt-out label. */}}
{{/*
Selectors of the DRA validating webhook (ResourceClaims, -Templates, DeviceClasses): no opt-out. The
`optOutLabel` opt-out concerns Pod conversion only; an object's author must not be able to switch off the
checks of their own claim by labelling it (issue 14, finding 6). Only kube-system and the release namespace
(and webhook.excludeNamespaces, set by the admin) are left out, as fail-safe for the control plane.
*/}}
{{- define "gpuclaim.draWebhookSelectors" -}}
namespaceSelector:
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values:
        {{- toYaml (concat (list "kube-system" .Release.Namespace) .Values.webhook.excludeNamespaces | uniq) | nindent 8 }}
{{- end }}

{{- define "gpuclaim.webhookSelectors" -}}
namespaceSelector:
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values:
        {{- toYaml (concat (list "kube-system" .Release.Namespace) .Values.webhook.excludeNamespaces | uniq) | nindent 8 }}
    - key: {{ .Values.webhook.optOutLabel }}
      operator: NotIn
      values: ["disabled"]
objectSelector:
  matchExpressions:
    - key: {{ .Values.webhook.optOutLabel }}
      operator: NotIn
      values: ["disabled"]
{{- end }}

{{/* metadata.annotations of the webhook configurations (cert-manager's CA injection). */}}
{{- define "gpuclaim.webhookConfigAnnotations" -}}
{{- if eq .Values.certs.mode "cert-manager" }}
annotations:
  cert-manager.io/inject-ca-from: {{ printf "%s/%s" .Release.Namespace (include "gpuclaim.component" (dict "root" . "component" "serving")) }}
{{- end }}
{{- end }}

{{/* clientConfig for one webhook path. */}}
{{- define "gpuclaim.clientConfig" -}}
clientConfig:
  service:
    name: {{ include "gpuclaim.webhookName" .root }}
    namespace: {{ .root.Release.Namespace }}
    path: {{ .path }}
    port: 443
  {{- if eq .root.Values.certs.mode "secret" }}
  caBundle: {{ .root.Values.certs.caBundle }}
  {{- end }}
{{- end }}

{{/*
The KubeSchedulerConfiguration `extenders[]` entry. Prioritize only by default and ignorable, so
the extender can never block scheduling; nodeCacheCapable so kube-scheduler sends node names,
not whole Node objects. managedResources stays empty: kube-scheduler matches it against container
limits/requests only, and converted pods carry their GPUs in resourceClaims, so any managed name
would make the scheduler skip exactly the pods that need scoring; the extender answers pods
without claims in well under a millisecond instead.
One serving certificate carries the webhook's and the extender's Service names; tlsConfig.serverName
names the extender so verification works also when urlPrefix is a ClusterIP.
With extender.clientAuth, certFile/keyFile are the client certificate kube-scheduler presents.
Call with (dict "root" $ "caFile" PATH "certFile" PATH "keyFile" PATH).
*/}}
{{- define "gpuclaim.mixedNodes" -}}
{{- get (.Values.config | default dict) "mixedNodes" | default "avoid" -}}
{{- end }}

{{- define "gpuclaim.extenderEntry" -}}
{{- $e := .root.Values.scheduler.extender }}
- urlPrefix: {{ default (printf "https://%s:443" (include "gpuclaim.extenderHost" .root)) $e.urlPrefix | quote }}
  prioritizeVerb: prioritize
  {{- /* config.mixedNodes avoid (the default) needs the filter: it keeps converted pods off mixed nodes */}}
  {{- if or $e.filter (eq (include "gpuclaim.mixedNodes" .root) "avoid") }}
  filterVerb: filter
  {{- end }}
  weight: {{ $e.weight }}
  nodeCacheCapable: true
  enableHTTPS: true
  tlsConfig:
    insecure: false
    serverName: {{ include "gpuclaim.extenderHost" .root | quote }}
    caFile: {{ .caFile | quote }}
    {{- if include "gpuclaim.extenderClientAuth" .root }}
    certFile: {{ .certFile | quote }}
    keyFile: {{ .keyFile | quote }}
    {{- end }}
  httpTimeout: {{ $e.httpTimeout | quote }}
  ignorable: {{ $e.ignorable }}
  managedResources: []
{{- end }}

{{/* Extra names for the serving certificate: the extender presents it too. */}}
{{- define "gpuclaim.extenderDNSNames" -}}
{{- if .Values.extender.enabled }}
{{- $svc := include "gpuclaim.extenderName" . }}
- {{ $svc }}
- {{ printf "%s.%s" $svc .Release.Namespace }}
- {{ printf "%s.%s.svc" $svc .Release.Namespace }}
- {{ printf "%s.%s.svc.cluster.local" $svc .Release.Namespace }}
{{- else }}
[]
{{- end }}
{{- end }}

{{/*
The resources the matchConditions select, as YAML {names, prefixes}: derived from
config.conversion.mappings when the config sets them (`nvidia.com/mig-*` becomes the prefix
`nvidia.com/mig-`), otherwise webhook.matchResources, whose defaults mirror gpuclaim's default mappings.
*/}}
{{- define "gpuclaim.matchResources" -}}
{{- $conversion := (.Values.config | default dict).conversion | default dict }}
{{- if hasKey $conversion "mappings" }}
{{- $names := list }}
{{- $prefixes := list }}
{{- range $conversion.mappings }}
{{- if hasSuffix "*" .resource }}
{{- $prefixes = append $prefixes (trimSuffix "*" .resource) }}
{{- else }}
{{- $names = append $names .resource }}
{{- end }}
{{- end }}
{{- dict "names" ($names | uniq) "prefixes" ($prefixes | uniq) | toYaml }}
{{- else }}
{{- pick .Values.webhook.matchResources "names" "prefixes" | toYaml }}
{{- end }}
{{- end }}

{{/*
Mutual TLS between kube-scheduler and the extender (extender.clientAuth, issue 22): "true" when on.
*/}}
{{- define "gpuclaim.extenderClientAuth" -}}
{{- if and .Values.extender.enabled .Values.extender.clientAuth.enabled }}true{{ end }}
{{- end }}

{{/* Where the scheduler's client certificate is: a Secret and its two keys (client.crt, client.key). */}}
{{- define "gpuclaim.schedulerClientVolume" -}}
secret:
  {{- if eq .Values.certs.mode "cert-manager" }}
  secretName: {{ include "gpuclaim.component" (dict "root" . "component" "scheduler-client") }}
  items:
    - key: tls.crt
      path: client.crt
    - key: tls.key
      path: client.key
  {{- else }}
  secretName: {{ include "gpuclaim.tlsSecretName" . }}
  items:
    - key: client.crt
      path: client.crt
    - key: client.key
      path: client.key
  {{- end }}
  defaultMode: 0440
{{- end }}

{{/*
The extender's fleet port in its pod: fleet.port when the chart passes --fleet-listen (fleet.enabled), else the port
of config fleet.listen (HOST:PORT), which the extender serves when no flag overrides it; empty when there is none.
*/}}
{{- define "gpuclaim.fleetPort" -}}
{{- $config := get (.Values.config | default dict) "fleet" | default dict }}
{{- if and .Values.fleet.enabled .Values.extender.enabled }}
{{- .Values.fleet.port }}
{{- else if get $config "listen" }}
{{- regexFind "[0-9]+$" (get $config "listen") }}
{{- end }}
{{- end }}
