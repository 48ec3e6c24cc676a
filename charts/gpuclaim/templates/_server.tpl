{{/*
Deployment, Service and PodDisruptionBudget of one gpuclaim server (webhook or extender): the same
image, flags and hardening; only the subcommand and the values block differ.
Call with (dict "root" $ "component" "webhook" "v" .Values.webhook).
*/}}
{{- define "gpuclaim.server" -}}
{{- $root := .root }}
{{- $v := .v }}
{{- $name := include "gpuclaim.component" (dict "root" $root "component" .component) }}
{{- $selector := include "gpuclaim.componentSelector" (dict "root" $root "component" .component) }}
{{- /* the extender under mutual TLS: its TLS port answers kube-scheduler only, so kubelet probes the metrics port */}}
{{- $mtls := and (eq .component "extender") (include "gpuclaim.extenderClientAuth" $root) }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "gpuclaim.componentLabels" (dict "root" $root "component" .component) | nindent 4 }}
spec:
  replicas: {{ $v.replicas }}
  revisionHistoryLimit: 5
  strategy:
    type: RollingUpdate
    rollingUpdate:
      # Never go below the desired count: admission keeps its full capacity during upgrades.
      maxUnavailable: 0
      maxSurge: 1
  selector:
    matchLabels:
      {{- $selector | nindent 6 }}
  template:
    metadata:
      labels:
        {{- $selector | nindent 8 }}
        {{- with $v.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        # Roll the pods when the config changes; certificates are reloaded in place instead.
        checksum/config: {{ include (print $root.Template.BasePath "/configmap.yaml") $root | sha256sum }}
        {{- with $v.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ $name }}
      {{- with $v.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      terminationGracePeriodSeconds: {{ $v.terminationGracePeriodSeconds }}
      securityContext:
        {{- include "gpuclaim.podSecurityContext" $root | nindent 8 }}
      {{- $anti := dict }}
      {{- $term := dict "topologyKey" "kubernetes.io/hostname" "labelSelector" (dict "matchLabels" ($selector | fromYaml)) }}
      {{- if eq $v.antiAffinity "hard" }}
      {{- $anti = dict "podAntiAffinity" (dict "requiredDuringSchedulingIgnoredDuringExecution" (list $term)) }}
      {{- else if eq $v.antiAffinity "soft" }}
      {{- $anti = dict "podAntiAffinity" (dict "preferredDuringSchedulingIgnoredDuringExecution" (list (dict "weight" 100 "podAffinityTerm" $term))) }}
      {{- end }}
      {{- $affinity := merge (deepCopy ($v.affinity | default dict)) $anti }}
      {{- with $affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: {{ .component }}
          image: {{ include "gpuclaim.image" $root }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          args:
            - {{ .component }}
            - --config=/etc/gpuclaim/config/config.yaml
            - --listen=0.0.0.0:{{ $v.port }}
            - --tls-cert=/etc/gpuclaim/tls/tls.crt
            - --tls-key=/etc/gpuclaim/tls/tls.key
            - --metrics-listen=0.0.0.0:{{ $v.metricsPort }}
            {{- if and (eq .component "extender") $root.Values.fleet.enabled }}
            - --fleet-listen=0.0.0.0:{{ $root.Values.fleet.port }}
            {{- end }}
            {{- range $v.extraArgs }}
            - {{ . | quote }}
            {{- end }}
          env:
            - name: POD_NAMESPACE
              valueFrom:
                fieldRef:
                  fieldPath: metadata.namespace
            - name: PYTHONDONTWRITEBYTECODE
              value: "1"
          ports:
            - name: https
              containerPort: {{ $v.port }}
              protocol: TCP
            - name: metrics
              containerPort: {{ $v.metricsPort }}
              protocol: TCP
            {{- if and (eq .component "extender") $root.Values.fleet.enabled }}
            # The fleet page and /api/v1/fleet (docs/fleet.md): TLS, bearer token, never the scheduler's port.
            - name: fleet
              containerPort: {{ $root.Values.fleet.port }}
              protocol: TCP
            {{- end }}
          # kubelet probes HTTPS without verifying the certificate, so they work before the
          # caBundle is injected and across rotations.
          startupProbe:
            httpGet:
              path: /healthz
              {{- if $mtls }}
              port: metrics
              scheme: HTTP
              {{- else }}
              port: https
              scheme: HTTPS
              {{- end }}
            periodSeconds: 2
            failureThreshold: 30
          # Liveness asks the metrics port, which counts its own connections: a flood of the TLS port does
          # not touch it. On either port one source holds at most maxConnectionsPerSource places, and a source
          # holding none (kubelet, one connection per probe) gets a reserved place when the port is full, so a
          # flood fails no probe and never turns into a restart loop. Under the optional NetworkPolicy the
          # metrics port admits only its listed peers, and whether kubelet's probes pass depends on the CNI, so
          # there liveness asks the TLS port, which has the same protection (docs/hardening.md). The extender
          # under mutual TLS (extender.clientAuth) has no TLS port for kubelet: every probe asks the metrics port,
          # whose traffic from the pod's own node NetworkPolicy does not block.
          livenessProbe:
            httpGet:
              path: /healthz
              {{- if and $root.Values.metrics.networkPolicy.enabled (not $mtls) }}
              port: https
              scheme: HTTPS
              {{- else }}
              port: metrics
              scheme: HTTP
              {{- end }}
            periodSeconds: 10
            timeoutSeconds: 3
            failureThreshold: 3
          readinessProbe:
            # /readyz: certificates loaded and the cluster view synced and fresh.
            httpGet:
              path: /readyz
              {{- if $mtls }}
              port: metrics
              scheme: HTTP
              {{- else }}
              port: https
              scheme: HTTPS
              {{- end }}
            periodSeconds: 5
            timeoutSeconds: 3
            failureThreshold: 3
          securityContext:
            {{- include "gpuclaim.containerSecurityContext" $root | nindent 12 }}
          resources:
            {{- toYaml $v.resources | nindent 12 }}
          volumeMounts:
            - name: config
              mountPath: /etc/gpuclaim/config
              readOnly: true
            # A whole-Secret mount (no subPath) so kubelet updates the files on rotation; the
            # server watches their digest and reloads.
            - name: tls
              mountPath: /etc/gpuclaim/tls
              readOnly: true
            {{- if and (eq .component "webhook") $v.clientAuth.enabled }}
            - name: client-ca
              mountPath: /etc/gpuclaim/client-ca
              readOnly: true
            {{- end }}
            - name: tmp
              mountPath: /tmp
      volumes:
        - name: config
          configMap:
            name: {{ include "gpuclaim.configName" $root }}
        - name: tls
          secret:
            secretName: {{ include "gpuclaim.tlsSecretName" $root }}
            defaultMode: 0440
            items:
              - key: tls.crt
                path: tls.crt
              - key: tls.key
                path: tls.key
              {{- if $mtls }}
              # the CA that signs kube-scheduler's client certificate (extender.clientAuth.caFile)
              - key: ca.crt
                path: ca.crt
              {{- end }}
        {{- if and (eq .component "webhook") $v.clientAuth.enabled }}
        - name: client-ca
          configMap:
            name: {{ $v.clientAuth.caConfigMap }}
            items:
              - key: ca.crt
                path: ca.crt
        {{- end }}
        - name: tmp
          emptyDir:
            sizeLimit: 64Mi
---
apiVersion: v1
kind: Service
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "gpuclaim.componentLabels" (dict "root" $root "component" .component) | nindent 4 }}
spec:
  type: ClusterIP
  selector:
    {{- $selector | nindent 4 }}
  ports:
    - name: https
      port: 443
      targetPort: https
      protocol: TCP
    - name: metrics
      port: {{ $v.metricsPort }}
      targetPort: metrics
      protocol: TCP
    {{- if and (eq .component "extender") $root.Values.fleet.enabled }}
    - name: fleet
      port: {{ $root.Values.fleet.servicePort }}
      targetPort: fleet
      protocol: TCP
    {{- end }}
{{- if and $v.pdb.enabled (gt (int $v.replicas) 1) }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "gpuclaim.componentLabels" (dict "root" $root "component" .component) | nindent 4 }}
spec:
  maxUnavailable: {{ $v.pdb.maxUnavailable }}
  # Evict a pod that is not ready even if the budget is spent: it serves nothing anyway.
  unhealthyPodEvictionPolicy: AlwaysAllow
  selector:
    matchLabels:
      {{- $selector | nindent 6 }}
{{- end }}
{{- end }}
