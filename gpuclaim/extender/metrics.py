"""The extender's Prometheus metrics, on a registry the app owns (never the process-wide default).

Names follow STYLE.md section 9: namespace ``gpuclaim``, subsystem ``extender``, base units, closed label sets
zero-initialised at start, no node/pod/claim names as labels.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram

from .wire import MAX_SCORE, MIN_SCORE

VERBS = ("prioritize", "filter")
RESULTS = ("ok", "error")
SCORE_LABELS = (*(str(s) for s in range(MIN_SCORE, MAX_SCORE + 1)), "unfit")
_LATENCY = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0)
_NODES = (1, 10, 50, 100, 250, 500, 1000, 2500, 5000, 10000)


class ExtenderMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        ns, sub = "gpuclaim", "extender"
        self.requests = Counter("requests", "Extender calls by verb and result", ["verb", "result"],
                                namespace=ns, subsystem=sub, registry=registry)
        self.duration = Histogram("request_duration_seconds", "Time to answer one extender call", ["verb"],
                                  namespace=ns, subsystem=sub, buckets=_LATENCY, registry=registry)
        self.nodes = Histogram("request_nodes", "Candidate nodes per extender call", ["verb"],
                               namespace=ns, subsystem=sub, buckets=_NODES, registry=registry)
        self.pods = Counter("pods", "Pods seen, with and without DRA claims to predict", ["claims"],
                            namespace=ns, subsystem=sub, registry=registry)
        self.scores = Counter("node_scores", "Scores given to nodes (unfit: the pod does not fit by prediction)",
                              ["score"], namespace=ns, subsystem=sub, registry=registry)
        self.filtered = Counter("filtered_nodes", "Nodes /filter failed for pods asking for hard topology",
                                namespace=ns, subsystem=sub, registry=registry)
        for verb in VERBS:
            self.duration.labels(verb)
            self.nodes.labels(verb)
            for result in RESULTS:
                self.requests.labels(verb, result)
        for claims in ("with", "without"):
            self.pods.labels(claims)
        for label in SCORE_LABELS:
            self.scores.labels(label)

    def observe_scores(self, scores: Iterable[int | None]) -> None:
        # one inc per distinct value, not one observe per node: 5,000 nodes cost 11 calls
        for value, count in Tally(scores).items():
            self.scores.labels("unfit" if value is None else str(value)).inc(count)
