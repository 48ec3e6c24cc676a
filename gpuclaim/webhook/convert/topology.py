"""Turn a planned request into its resource.k8s.io/v1 shape, keeping N > 1 devices close (DESIGN decision 2).

kube-scheduler's allocator is first-fit inside a node, so locality has to be written into the claim:
- `firstAvailable` (default): subrequests from the tightest configured topology attribute to the
  loosest, each with a `matchAttribute` constraint on `<request>/<subrequest>`, then an unconstrained
  `any` subrequest, so the pod still schedules where no tight set is free;
- `required`: one plain request constrained on the tightest attribute (the pod waits for a tight set);
- `off`: a plain request.
A device lacking the attribute simply cannot take part in that constrained subrequest (no CEL error).
"""

from __future__ import annotations

from typing import Any

from gpuclaim.dra.config import TopologyConfig

from .plan import MAX_NAME, PlannedRequest, label

MAX_SUBREQUESTS = 8  # FirstAvailableDeviceRequestMaxSize
FALLBACK = "any"


def _exact(request: PlannedRequest, selectors: tuple[str, ...]) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": request.target.device_class_name, "allocationMode": "ExactCount",
                            "count": request.count}
    if selectors:
        body["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return body


def subrequest_names(attributes: tuple[str, ...]) -> list[str]:
    names: list[str] = []
    for attribute in attributes:
        base = (label(attribute.rpartition("/")[2]) or "topology")[:MAX_NAME]
        name, n = base, 2
        while name in names or name == FALLBACK:
            name = f"{base[: MAX_NAME - 4]}-{n}"
            n += 1
        names.append(name)
    return names


def render(request: PlannedRequest, selectors: tuple[str, ...], topology: TopologyConfig
           ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The request and the constraints it needs."""
    attributes = topology.attributes[: MAX_SUBREQUESTS - 1]
    if request.count < 2 or topology.mode == "off" or not attributes:
        return {"name": request.name, "exactly": _exact(request, selectors)}, []
    if topology.mode == "required":
        constraint = {"requests": [request.name], "matchAttribute": attributes[0]}
        return {"name": request.name, "exactly": _exact(request, selectors)}, [constraint]
    subrequests: list[dict[str, Any]] = []
    constraints: list[dict[str, Any]] = []
    for name, attribute in zip(subrequest_names(attributes), attributes, strict=True):
        subrequests.append({"name": name, **_exact(request, selectors)})
        constraints.append({"requests": [f"{request.name}/{name}"], "matchAttribute": attribute})
    subrequests.append({"name": FALLBACK, **_exact(request, selectors)})
    return {"name": request.name, "firstAvailable": subrequests}, constraints
