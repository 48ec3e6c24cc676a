"""The per-admission metrics kept as plain counts and exported at scrape time: the exposition is what
prometheus_client's own Counter/Histogram would give (cumulative buckets, inclusive `le`, zero-initialised sets)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gpuclaim.webhook import admit
from gpuclaim.webhook.metrics import BUCKETS, ENDPOINTS, OPERATIONS, RESULTS, WebhookMetrics

DURATIONS = [0.0004, 0.0005, 0.001, 0.00100001, 0.0042, 0.0042, 0.5, 12.0]


def test_the_histogram_matches_prometheus_clients_own() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    metrics = WebhookMetrics(ours)
    reference = Histogram("gpuclaim_webhook_admission_duration_seconds", "x", ["endpoint"], buckets=BUCKETS,
                          registry=theirs)
    for seconds in DURATIONS:
        metrics.observe(admit.Record("mutate", "CREATE", "allowed"), seconds)
        reference.labels("mutate").observe(seconds)
    reference.labels("validate")
    for suffix in ("_bucket", "_count", "_sum"):
        for endpoint in ENDPOINTS:
            for le in [*(str(b) for b in BUCKETS), "+Inf"] if suffix == "_bucket" else [None]:
                labels = {"endpoint": endpoint, **({"le": le} if le else {})}
                name = "gpuclaim_webhook_admission_duration_seconds" + suffix
                assert ours.get_sample_value(name, labels) == theirs.get_sample_value(name, labels), (name, labels)


def test_counts_by_label_and_every_label_set_at_zero() -> None:
    registry = CollectorRegistry()
    metrics = WebhookMetrics(registry)
    metrics.observe(admit.Record("mutate", "CREATE", "allowed", warning_reasons=("conversion", "conversion"),
                                 converted=True, templates_created=2), 0.001)
    metrics.observe(admit.Record("validate", "UPDATE", "denied", denial_reason="FieldValueForbidden"), 0.002)
    metrics.observe(admit.Record("validate", "bogus", "error", warning_reasons=("internal-error",)), 0.002)
    metrics.rejected("mutate", 413, 0.0001)
    sample = registry.get_sample_value
    for endpoint in ENDPOINTS:
        for operation in OPERATIONS:
            for result in RESULTS:
                assert sample("gpuclaim_webhook_admission_reviews_total",
                              {"endpoint": endpoint, "operation": operation, "result": result}) is not None
    assert sample("gpuclaim_webhook_admission_reviews_total",
                  {"endpoint": "validate", "operation": "unknown", "result": "error"}) == 1
    assert sample("gpuclaim_webhook_admission_reviews_total",
                  {"endpoint": "mutate", "operation": "unknown", "result": "rejected"}) == 1
    assert sample("gpuclaim_webhook_warnings_total", {"endpoint": "mutate", "reason": "conversion"}) == 2
    assert sample("gpuclaim_webhook_warnings_total", {"endpoint": "validate", "reason": "internal-error"}) == 1
    assert sample("gpuclaim_webhook_denials_total", {"endpoint": "validate", "reason": "FieldValueForbidden"}) == 1
    assert sample("gpuclaim_webhook_denials_total", {"endpoint": "mutate", "reason": "FieldValueInvalid"}) == 0
    assert sample("gpuclaim_webhook_conversions_total") == 1
    assert sample("gpuclaim_webhook_templates_created_total") == 2
    assert sample("gpuclaim_webhook_bad_requests_total", {"endpoint": "mutate", "code": "413"}) == 1
    assert sample("gpuclaim_webhook_admission_duration_seconds_count", {"endpoint": "mutate"}) == 2
    # the text exposition parses, with the types the names promise
    types = {f.name: f.type for f in text_string_to_metric_families(generate_latest(registry).decode())}
    assert types["gpuclaim_webhook_admission_reviews"] == "counter"
    assert types["gpuclaim_webhook_admission_duration_seconds"] == "histogram"
