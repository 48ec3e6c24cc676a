"""The webhook's warning at conversion time when nodes of the pod's DeviceClasses are mixed (dra/mixed.py)."""

from __future__ import annotations

from gpuclaim.dra.config import Config
from gpuclaim.dra.mixed import Overlap
from gpuclaim.webhook import admit

OVERLAP = (Overlap("nvidia.com/gpu", "8", "gpu.nvidia.com", "gpu.nvidia.com"),)


class Tracker:
    def __init__(self, policy: str) -> None:
        self.avoid = policy == "avoid"

    def nodes(self) -> dict[str, tuple[Overlap, ...]]:
        return {"b": OVERLAP, "z": OVERLAP}


def test_the_webhook_warns_at_conversion_when_nodes_of_the_pods_classes_are_mixed() -> None:
    prepared = admit._Prepared.of(type("C", (), {"patch": [], "objects": [], "warnings": [], "templates": [
        {"spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}]}}}}]})())
    converted = admit.Outcome(converted=True)
    for policy, effect in (("avoid", "keeps this pod off them"), ("allow", "may get a GPU a device-plugin pod")):
        tracker = Tracker(policy)
        ctx = admit.Context(config=Config(), mixed=tracker)
        (notice,) = admit._with_mixed_warning(ctx, prepared, converted).warnings
        assert notice.reason == "mixed-nodes" and "2 nodes are mixed (b, z)" in notice.message
        assert effect in notice.message
    assert admit._with_mixed_warning(admit.Context(config=Config()), prepared, converted) is converted
