"""The webhook's Prometheus metrics, one registry per app (STYLE 9): names, closed label sets, zero-initialised."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from dra.fieldpath import ErrorType
from webhook import admit, review

ENDPOINTS: tuple[admit.Endpoint, ...] = ("mutate", "validate")
RESULTS: tuple[str, ...] = ("allowed", "denied", "error", "rejected")  # rejected: an HTTP 4xx, no review answer
OPERATIONS = (*review.OPERATIONS, "unknown")
# single milliseconds matter (the target is p99 <= 5 ms), and the tail up to the apiserver's 10 s time-out
BUCKETS = (0.0005, 0.001, 0.0015, 0.002, 0.003, 0.004, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5,
           1.0, 2.5, 5.0, 10.0)


class WebhookMetrics:
    def __init__(self, registry: CollectorRegistry, *, version: str = "unknown") -> None:
        self.registry = registry
        self.reviews = Counter("gpuclaim_webhook_admission_reviews_total", "Admission requests answered",
                               ["endpoint", "operation", "result"], registry=registry)
        self.duration = Histogram("gpuclaim_webhook_admission_duration_seconds",
                                  "Time from the request body read to the response written, per endpoint",
                                  ["endpoint"], buckets=BUCKETS, registry=registry)
        self.conversions = Counter("gpuclaim_webhook_conversions_total", "Pods whose legacy GPU resources were "
                                   "converted to DRA claims (dryRun included)", registry=registry)
        self.templates = Counter("gpuclaim_webhook_templates_created_total",
                                 "ResourceClaimTemplates created at admission", registry=registry)
        self.denials = Counter("gpuclaim_webhook_denials_total", "Denied admission requests by the first error type",
                               ["endpoint", "reason"], registry=registry)
        self.warnings = Counter("gpuclaim_webhook_warnings_total", "Warnings returned to users, by reason",
                                ["endpoint", "reason"], registry=registry)
        self.bad_requests = Counter("gpuclaim_webhook_bad_requests_total",
                                    "Requests answered with an HTTP 4xx (not an AdmissionReview, too large, ...)",
                                    ["endpoint", "code"], registry=registry)
        self.cert_expiry = Gauge("gpuclaim_certs_expiry_timestamp_seconds",
                                 "notAfter of the serving certificate, Unix seconds (0 before it is loaded)",
                                 registry=registry)
        Info("gpuclaim_build", "gpuclaim build", registry=registry).info({"version": version, "component": "webhook"})
        # the labelled children, resolved once: `.labels()` takes a lock and builds a key on every call
        self._reviews = {(e, o, r): self.reviews.labels(e, o, r)
                         for e in ENDPOINTS for o in OPERATIONS for r in RESULTS}
        self._duration = {e: self.duration.labels(e) for e in ENDPOINTS}
        self._denials: dict[tuple[str, str], Any] = {}
        self._warnings: dict[tuple[str, str], Any] = {}
        for endpoint in ENDPOINTS:
            for reason in ErrorType:
                self.denials.labels(endpoint, str(reason))
            self.warnings.labels(endpoint, "internal-error")
            for code in ("400", "413", "415"):
                self.bad_requests.labels(endpoint, code)

    @staticmethod
    def _child(metric: Counter, children: dict[tuple[str, str], Any], endpoint: str, reason: str) -> Any:
        # reasons are a closed set (admit.warning_reason, ErrorType), so this memo stays small
        child = children.get((endpoint, reason))
        if child is None:
            child = children[(endpoint, reason)] = metric.labels(endpoint, reason)
        return child

    def watch_cert_expiry(self, expiry: Callable[[], float]) -> None:
        self.cert_expiry.set_function(expiry)

    def observe(self, record: admit.Record, seconds: float) -> None:
        operation = record.operation if record.operation in OPERATIONS else "unknown"
        self._reviews[(record.endpoint, operation, record.result)].inc()
        self._duration[record.endpoint].observe(seconds)
        if record.denial_reason is not None:
            self._child(self.denials, self._denials, record.endpoint, record.denial_reason).inc()
        for reason in record.warning_reasons:
            self._child(self.warnings, self._warnings, record.endpoint, reason).inc()
        if record.converted:
            self.conversions.inc()
        if record.templates_created:
            self.templates.inc(record.templates_created)

    def rejected(self, endpoint: str, code: int, seconds: float) -> None:
        self.reviews.labels(endpoint, "unknown", "rejected").inc()
        self.bad_requests.labels(endpoint, str(code)).inc()
        self.duration.labels(endpoint).observe(seconds)
