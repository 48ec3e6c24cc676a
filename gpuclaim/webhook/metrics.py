"""The webhook's Prometheus metrics, one registry per app (STYLE 9): names, closed label sets, zero-initialised.

The per-admission series (reviews, duration, conversions, templates, denials, warnings) are plain counts on the
event loop's thread, turned into metric families only when /metrics is scraped (`_AdmissionCollector`):
prometheus_client's own Counter and Histogram take a lock and check their state on every increment, which cost
about 12 us per admission, a fifth of a cached mutation. The rarer series stay prometheus_client objects. The
scrape is formatted in the metrics thread (gpuclaim/serving/metrics.py); the counts are read into families on the
loop that writes them (`on_loop`), so a scrape never sees a histogram's buckets and sum from different moments.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from gpuclaim.dra.fieldpath import ErrorType
from gpuclaim.serving.metrics import on_loop
from gpuclaim.webhook import admit, review

ENDPOINTS: tuple[admit.Endpoint, ...] = ("mutate", "validate")
RESULTS: tuple[str, ...] = ("allowed", "denied", "error", "rejected")  # rejected: an HTTP 4xx, no review answer
OPERATIONS = (*review.OPERATIONS, "unknown")
# single milliseconds matter (the target is p99 <= 5 ms), and the tail up to the apiserver's 10 s time-out
BUCKETS = (0.0005, 0.001, 0.0015, 0.002, 0.003, 0.004, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5,
           1.0, 2.5, 5.0, 10.0)
_LE = (*(floatToGoString(b) for b in BUCKETS), "+Inf")


class _AdmissionCollector(Collector):
    """Counts kept as ints and floats, exported at scrape time. Written and read on the event loop only: `collect`,
    called in the metrics thread, has the loop read them."""

    def __init__(self) -> None:
        self.created = time.time()
        self.reviews = {(e, o, r): 0 for e in ENDPOINTS for o in OPERATIONS for r in RESULTS}
        self.buckets = {e: [0] * (len(BUCKETS) + 1) for e in ENDPOINTS}  # per bucket, not cumulative; last: +Inf
        self.sums = dict.fromkeys(ENDPOINTS, 0.0)
        self.conversions = 0
        self.templates = 0
        self.denials = {(e, str(reason)): 0 for e in ENDPOINTS for reason in ErrorType}
        self.warnings = {(e, "internal-error"): 0 for e in ENDPOINTS}

    def observe(self, endpoint: admit.Endpoint, seconds: float) -> None:
        # bisect_left: a duration equal to a bound belongs to that bucket (Prometheus `le` is inclusive)
        self.buckets[endpoint][bisect_left(BUCKETS, seconds)] += 1
        self.sums[endpoint] += seconds

    def collect(self) -> Iterator[Metric]:
        yield from on_loop(lambda: list(self._families()))

    def _families(self) -> Iterator[Metric]:
        reviews = CounterMetricFamily("gpuclaim_webhook_admission_reviews", "Admission requests answered",
                                      labels=["endpoint", "operation", "result"])
        for labels, value in self.reviews.items():
            reviews.add_metric(labels, value, created=self.created)
        yield reviews
        duration = HistogramMetricFamily("gpuclaim_webhook_admission_duration_seconds",
                                         "Time from the request body read to the response written, per endpoint",
                                         labels=["endpoint"])
        for endpoint, per_bucket in self.buckets.items():
            cumulative, total = [], 0
            for le, count in zip(_LE, per_bucket, strict=True):
                total += count
                cumulative.append((le, float(total)))
            duration.add_metric([endpoint], cumulative, self.sums[endpoint])
        yield duration
        yield _single("gpuclaim_webhook_conversions", "Pods whose legacy GPU resources were converted to DRA claims "
                      "(dryRun included)", self.conversions, self.created)
        yield _single("gpuclaim_webhook_templates_created", "ResourceClaimTemplates created at admission",
                      self.templates, self.created)
        for name, doc, counts in (
                ("gpuclaim_webhook_denials", "Denied admission requests by the first error type", self.denials),
                ("gpuclaim_webhook_warnings", "Warnings returned to users, by reason", self.warnings)):
            family = CounterMetricFamily(name, doc, labels=["endpoint", "reason"])
            for (endpoint, reason), value in list(counts.items()):
                family.add_metric([endpoint, reason], value, created=self.created)
            yield family

    def describe(self) -> Iterator[Metric]:
        return self._families()  # the names, for the registry's duplicate check (at registration, on the loop)


def _single(name: str, doc: str, value: int, created: float) -> Metric:
    family = CounterMetricFamily(name, doc, labels=[])
    family.add_metric([], value, created=created)
    return family


class WebhookMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._counts = _AdmissionCollector()
        registry.register(self._counts)
        self.bad_requests = Counter("gpuclaim_webhook_bad_requests_total",
                                    "Requests answered with an HTTP 4xx (not an AdmissionReview, too large, ...)",
                                    ["endpoint", "code"], registry=registry)
        for endpoint in ENDPOINTS:
            for code in ("400", "413", "415"):
                self.bad_requests.labels(endpoint, code)

    def observe(self, record: admit.Record, seconds: float) -> None:
        counts = self._counts
        operation = record.operation if record.operation in OPERATIONS else "unknown"
        counts.reviews[(record.endpoint, operation, record.result)] += 1
        counts.observe(record.endpoint, seconds)
        if record.denial_reason is not None:
            key = (record.endpoint, record.denial_reason)
            counts.denials[key] = counts.denials.get(key, 0) + 1
        for reason in record.warning_reasons:  # a closed set: admit.warning_reason
            key = (record.endpoint, reason)
            counts.warnings[key] = counts.warnings.get(key, 0) + 1
        if record.converted:
            counts.conversions += 1
        if record.templates_created:
            counts.templates += record.templates_created

    def rejected(self, endpoint: admit.Endpoint, code: int, seconds: float) -> None:
        self._counts.reviews[(endpoint, "unknown", "rejected")] += 1
        self.bad_requests.labels(endpoint, str(code)).inc()
        self._counts.observe(endpoint, seconds)
