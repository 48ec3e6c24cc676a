"""The fleet page: ``GET /fleet`` as HTML, rendered on the server from one fleet snapshot (docs/fleet.md).

The summary and the node table (per node: device counts, tight fits, stranded devices, free MIG slices, and each
topology group's devices in words) are plain HTML, readable without JavaScript. ``static/fleet.js`` then draws
every device as a cell, grouped by topology group, and polls ``/api/v1/fleet?since=<revision>`` every 2 s.

The page is self-contained: one stylesheet and one script from ``<base_path>/fleet/static/``, no inline script or
style (the server sends ``Content-Security-Policy: default-src 'self'``), no fonts, no external address. Everything
from the snapshot is escaped: pod, claim, node and label names come from the cluster, so from its users.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["FILTERS", "STATES", "render_page"]

# the order the summary and the legend list states in; one state per device (docs/fleet.md)
STATES = ("free", "allocated", "reserved", "tainted", "unhealthy")
# what each state means, for the legend and the cells' text labels
_STATE_HELP = {
    "free": "no claim holds it and no taint keeps pods off it",
    "allocated": "allocated to a claim that a pod uses",
    "reserved": "allocated to a claim no pod uses yet",
    "tainted": "no claim holds it, but a NoSchedule taint keeps new claims off it",
    # the model's rule (model.is_unhealthy): what the legend says must match what puts a device in the state
    "unhealthy": "a NoExecute taint, or a taint whose key names its health (the driver's or a DeviceTaintRule's)",
}
# the query parameters of /api/v1/fleet the page's filter form sets, with their labels
FILTERS = (("driver", "Driver"), ("model", "Model"), ("nodeSelector", "Node labels"), ("namespace", "Namespace"))
TIGHT_SIZES = ("1", "2", "4", "8")
EMPTY = "No nodes match (or none you may see)."


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _count(summary: Mapping[str, Any], *keys: str) -> int:
    value: Any = summary
    for key in keys:
        value = value.get(key, 0) if isinstance(value, Mapping) else 0
    return value if isinstance(value, int) else 0


def _devices_line(summary: Mapping[str, Any], *, zeros: bool = True) -> str:
    """``N devices: a free, b allocated, ...``; a node's row leaves out the states it has none of."""
    parts = [f'<span class="n s-{state}">{_count(summary, "devices", state)} {state}</span>' for state in STATES
             if zeros or _count(summary, "devices", state)]
    return f'{_count(summary, "devices", "total")} devices: ' + ", ".join(parts)


def _tight_fits(summary: Mapping[str, Any]) -> str:
    return " ".join(f'<span class="fit">{size}×: <b>{_count(summary, "tightFits", size)}</b></span>'
                    for size in TIGHT_SIZES)


def _summary(snapshot: Mapping[str, Any]) -> str:
    summary = snapshot.get("summary") or {}
    return (
        '<section id="fleet-summary" aria-labelledby="fleet-summary-h">'
        '<h2 id="fleet-summary-h">Fleet summary</h2><dl class="summary">'
        f'<dt>Devices</dt><dd data-field="devices">{_devices_line(summary)}</dd>'
        '<dt>Tight jobs that still fit</dt>'
        f'<dd data-field="tightFits">{_tight_fits(summary)}</dd>'
        f'<dt>Stranded devices</dt><dd data-field="stranded">{_count(summary, "stranded")}</dd>'
        f'<dt>Free MIG slices</dt><dd data-field="freeMigSlices">{_count(summary, "freeMigSlices")}</dd>'
        "</dl></section>"
    )


def _legend() -> str:
    items = "".join(f'<li><span class="swatch s-{state}" aria-hidden="true"></span><b>{state}</b>: '
                    f"{_e(_STATE_HELP[state])}</li>" for state in STATES)
    return f'<section id="fleet-legend" aria-label="Legend"><ul class="legend">{items}</ul></section>'


def _filters(snapshot: Mapping[str, Any], base_path: str) -> str:
    applied = snapshot.get("filters") or {}
    nodes = snapshot.get("nodes") or []
    choices = {
        "driver": sorted({d for n in nodes for d in n.get("drivers") or []}),
        "model": sorted({d.get("model") for n in nodes for g in n.get("groups") or []
                         for d in g.get("devices") or [] if d.get("model")}),
        "namespace": sorted(set((snapshot.get("scope") or {}).get("namespaces") or [])),
    }
    fields = []
    for name, label in FILTERS:
        value = applied.get(name)
        datalist = ""
        if choices.get(name):
            options = "".join(f'<option value="{_e(c)}"></option>' for c in choices[name])
            datalist = f'<datalist id="fleet-f-{name}-list">{options}</datalist>'
        list_attr = f' list="fleet-f-{name}-list"' if datalist else ""
        hint = ' placeholder="k=v,k in (a,b)"' if name == "nodeSelector" else ""
        fields.append(f'<label for="fleet-f-{name}">{label}</label>'
                      f'<input id="fleet-f-{name}" name="{name}" value="{_e(value or "")}"{list_attr}{hint}>'
                      f"{datalist}")
    return (f'<form id="fleet-filters" method="get" action="{_e(base_path)}/fleet" role="search"'
            f' aria-label="Filters">{"".join(fields)}<button type="submit">Apply</button>'
            f' <a href="{_e(base_path)}/fleet">Clear</a></form>')


def _mig(parents: Iterable[Mapping[str, Any]]) -> str:
    lines = []
    for parent in parents:
        free = sorted((parent.get("freeSlices") or {}).items())
        slices = ", ".join(f"{_e(profile)}×{_e(count)}" for profile, count in free)
        lines.append(f'{_e(parent.get("device", "?"))}: {slices or "none"}')
    return "<br>".join(lines) or "—"


def _groups_text(groups: Sequence[Mapping[str, Any]]) -> str:
    """What the cells show, in words: the node table without JavaScript."""
    items = []
    for group in groups:
        devices = group.get("devices") or []
        counts: dict[str, int] = {}
        for device in devices:
            counts[device.get("state", "free")] = counts.get(device.get("state", "free"), 0) + 1
        states = ", ".join(f"{counts[s]} {s}" for s in STATES if counts.get(s))
        items.append(f'<li>{_e(group.get("kind", "node"))} {_e(group.get("name", ""))}: '
                     f"{len(devices)} devices ({states or 'none'})</li>")
    return f'<ul class="groups-text">{"".join(items)}</ul>'


def _node_row(node: Mapping[str, Any]) -> str:
    summary = node.get("summary") or {}
    name = _e(node.get("name", ""))
    labels = " ".join(f'<span class="label">{_e(k)}={_e(v)}</span>'
                      for k, v in sorted((node.get("labels") or {}).items()))
    drivers = ", ".join(_e(d) for d in node.get("drivers") or [])
    return (
        f'<div role="row" class="row" data-node="{name}"><div role="rowheader" class="c node">'
        f'<span class="node-name">{name}</span><span class="drivers">{drivers}</span>{labels}</div>'
        f'<div role="cell" class="c devices">{_devices_line(summary, zeros=False)}</div>'
        f'<div role="cell" class="c fits">{_tight_fits(summary)}</div>'
        f'<div role="cell" class="c num">{_count(summary, "largestFreeTightGroup")}</div>'
        f'<div role="cell" class="c num">{_count(summary, "stranded")}</div>'
        f'<div role="cell" class="c mig">{_mig(node.get("migParents") or [])}</div>'
        f'<div role="cell" class="c cells">{_groups_text(node.get("groups") or [])}</div></div>'
    )


def _scope(snapshot: Mapping[str, Any]) -> str:
    scope = snapshot.get("scope") or {}
    if scope.get("clusterWide"):
        return "the whole cluster"
    names = ", ".join(_e(n) for n in scope.get("namespaces") or [])
    return f"namespaces {names}" if names else "no namespace"


def render_page(snapshot: Mapping[str, Any], *, base_path: str) -> str:
    """The whole page for one snapshot (the JSON of /api/v1/fleet, as a dict); ``base_path`` is the prefix the
    fleet port's routes sit under ("" when served at the root, "/proxy/x" behind a proxy), without a trailing /."""
    base = base_path.rstrip("/")
    nodes = snapshot.get("nodes") or []
    revision = snapshot.get("revision", 0)
    rows = "".join(_node_row(node) for node in nodes)
    if not rows:
        rows = f'<div role="row" class="row empty"><div role="cell">{EMPTY}</div></div>'
    return (
        f'<!doctype html>\n<html lang="en" data-api="{_e(base)}/api/v1/fleet" data-revision="{_e(revision)}">'
        '<head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<title>GPU fleet · gpuclaim</title>"
        f'<link rel="icon" href="{_e(base)}/fleet/static/favicon.svg" type="image/svg+xml">'
        f'<link rel="stylesheet" href="{_e(base)}/fleet/static/fleet.css">'
        # not deferred: it asks /api/v1/fleet at once, while the rest of the page is still being parsed
        f'<script src="{_e(base)}/fleet/static/fleet.js"></script></head><body>'
        '<header><h1>GPU fleet</h1>'
        f'<p id="fleet-meta">Revision <span id="fleet-revision">{_e(revision)}</span>'
        f' · generated <span id="fleet-generated">{_e(snapshot.get("generatedAt") or "now")}</span>'
        f' · Kubernetes {_e(snapshot.get("kubernetesVersion") or "version unknown")} · showing {_scope(snapshot)}'
        "</p>"
        '<p id="fleet-status" role="status" aria-live="polite"></p></header><main>'
        f"{_filters(snapshot, base)}{_summary(snapshot)}{_legend()}"
        '<section id="fleet-nodes" aria-labelledby="fleet-nodes-h"><h2 id="fleet-nodes-h">Nodes'
        f' <span id="fleet-node-count">({len(nodes)})</span></h2>'
        '<p class="hint" id="fleet-hint">Each cell is one device, grouped by topology group. Tab reaches a node\'s'
        " cells, the arrow keys move between them; hovering or focusing a cell shows its pods, claims and"
        " namespace.</p>"
        # an ARIA table of divs, not a <table>: each row can then skip layout while out of view
        # (content-visibility), which a table row cannot; 5,000 rows of table layout cost seconds
        '<div id="fleet-table" role="table" aria-labelledby="fleet-nodes-h"><div role="rowgroup">'
        '<div role="row" class="row head"><div role="columnheader" class="c">Node</div>'
        '<div role="columnheader" class="c">Devices</div><div role="columnheader" class="c">Tight jobs that fit</div>'
        '<div role="columnheader" class="c">Largest free tight group</div>'
        '<div role="columnheader" class="c">Stranded</div><div role="columnheader" class="c">Free MIG slices</div>'
        '<div role="columnheader" class="c">Devices by topology group</div></div></div>'
        f'<div role="rowgroup" id="fleet-rows">{rows}</div></div></section></main>'
        '<div id="fleet-tip" role="tooltip" hidden></div></body></html>\n'
    )
