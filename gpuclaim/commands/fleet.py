"""`gpuclaim fleet nodes|pods [-n NS | -A] [--kubeconfig FILE | --cluster DIR] [--kubernetes-version X.Y]
[--config FILE] [-o text|json]`: where the devices sit free, used or stranded, and which devices each pod got
(docs/fleet.md). Also installed as `kubectl-gpuclaim`, so `kubectl gpuclaim fleet ...` runs it.

It reads a cluster as `gpuclaim audit` does (gpuclaim/commands/_cluster.py: live, read-only, or a dump directory) and
builds the same snapshot the fleet page serves (gpuclaim/fleet/model.py `build_fleet`). `nodes -o json` prints that
snapshot (the `Fleet` document of docs/fleet.md); `pods -o json` prints a `FleetPods` document. Exit 0, or 2 with a
one-line message naming the bad input.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from gpuclaim.exitstatus import ExitStatus, UsageError

Obj = dict[str, Any]
API_VERSION = "gpuclaim.io/v1alpha1"
#: (kind, apiVersion, plural): what the fleet is built from, read live
LISTED = (
    ("Node", "v1", "nodes"), ("Pod", "v1", "pods"), ("DeviceClass", "resource.k8s.io/v1", "deviceclasses"),
    ("ResourceSlice", "resource.k8s.io/v1", "resourceslices"),
    ("ResourceClaim", "resource.k8s.io/v1", "resourceclaims"),
)
#: where a cluster serves DeviceTaintRules, newest first (gpuclaim/kube/cache.py watches the same)
TAINT_RULE_VERSIONS = ("resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1alpha3")
#: read in the namespace only with `pods -n NS`: what a namespace viewer may list (the chart's fleet Role)
NAMESPACED = frozenset({"Pod", "ResourceClaim"})
WHOLE_FLEET_RIGHTS = ("the fleet needs list permission on pods, nodes, resourceclaims, resourceslices and "
                      "deviceclasses cluster-wide (the chart's fleet-viewer ClusterRole)")
NAMESPACE_RIGHTS = ("`fleet pods -n {ns}` needs list permission on pods and resourceclaims in {ns} and on "
                    "resourceslices and deviceclasses (the chart's fleet namespaceViewers roles)")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
STATES = ("free", "allocated", "reserved", "tainted", "unhealthy")


def configure(parser: argparse.ArgumentParser) -> None:
    views = parser.add_subparsers(dest="view", metavar="VIEW", required=True, parser_class=type(parser))
    nodes = views.add_parser("nodes", help="free, used and stranded devices per node and topology group",
                             description="free, used and stranded devices per node and topology group")
    pods = views.add_parser("pods", help="pod -> claim -> devices -> topology group: which GPU did my pod get",
                            description="pod -> claim -> devices -> topology group: which GPU did my pod get")
    where = pods.add_mutually_exclusive_group()
    where.add_argument("-n", "--namespace", metavar="NS",
                       help="the pods of this namespace (default: the kubeconfig context's, else default)")
    where.add_argument("-A", "--all-namespaces", action="store_true", help="the pods of every namespace")
    for sub in (nodes, pods):
        source = sub.add_mutually_exclusive_group()
        source.add_argument("--kubeconfig", type=Path, metavar="FILE", help="read the cluster live (read-only)")
        source.add_argument("--cluster", type=Path, metavar="DIR",
                            help="read a dump directory (YAML or JSON, `kubectl get -o yaml` output) instead")
        sub.add_argument("--config", type=Path, metavar="FILE",
                         help="the gpuclaim config file (mappings, topology attributes) the view is built with")
        sub.add_argument("--kubernetes-version", metavar="X.Y",
                         help="the version of an offline dump (default: the newest supported); live: /version")
        sub.add_argument("-o", "--output", choices=("text", "json"), default="text")


# ---- reading ------------------------------------------------------------------------------------------------------
def _namespace(args: argparse.Namespace) -> str | None:
    """The namespace `fleet pods` shows (None: all); `nodes` always needs the whole fleet."""
    if args.view != "pods" or args.all_namespaces:
        return None
    if args.namespace is not None:
        if not _DNS_LABEL.fullmatch(args.namespace):
            raise UsageError(f"-n: {args.namespace!r} is not a namespace name (a DNS label: lower-case letters, "
                             "digits and '-', at most 63)")
        return str(args.namespace)
    if args.cluster is None:
        return _context_namespace(args.kubeconfig)
    return "default"


def _context_namespace(path: Path | None) -> str:
    """The current context's namespace, as kubectl defaults to it ("default" when none is set or readable)."""
    import yaml

    if path is None:
        env = os.environ.get("KUBECONFIG", "")
        path = Path(env.split(os.pathsep)[0]) if env else Path.home() / ".kube" / "config"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        current = data.get("current-context")
        for entry in data.get("contexts") or ():
            if entry.get("name") == current:
                return str((entry.get("context") or {}).get("namespace") or "default")
    except (OSError, UnicodeDecodeError, yaml.YAMLError, AttributeError, TypeError):
        pass  # kube_config.load reports an unreadable kubeconfig when it matters
    return "default"


def _read(args: argparse.Namespace, namespace: str | None) -> tuple[Any, str]:
    """The cluster's objects and the version to build with, read as `gpuclaim audit` reads them, narrowed to what
    the fleet reads (and to `namespace` for the namespaced kinds, so a namespace viewer's rights suffice)."""
    from gpuclaim.commands import _cluster

    listed = LISTED if namespace is None else tuple(k for k in LISTED if k[0] != "Node")
    needs = WHOLE_FLEET_RIGHTS if namespace is None else NAMESPACE_RIGHTS.format(ns=namespace)
    cluster = _cluster.read(args, listed=listed, namespace=namespace, namespaced=NAMESPACED, needs=needs)
    if cluster.api is not None:
        for rule in _taint_rules(cluster.api):
            cluster.objects.add(rule)
    return cluster.objects, cluster.version


def _taint_rules(api: Any) -> list[Obj]:
    """The DeviceTaintRules, at the first API version the cluster serves (v1 from 1.37, v1beta2/v1alpha3 behind
    gates before, as the extender's cache watches them); none where it serves none. Not readable for lack of
    rights: a warning, since the devices they taint then show as free."""
    from gpuclaim.audit import sources

    for api_version in TAINT_RULE_VERSIONS:
        try:
            listed = (("DeviceTaintRule", api_version, "devicetaintrules"),)
            objects, _ = asyncio.run(sources.from_api(api, listed=listed, needs="list devicetaintrules"))
        except sources.SourceError as exc:
            if "(404 " in str(exc):  # not served at this version
                continue
            print(f"gpuclaim fleet: warning: DeviceTaintRules not read ({exc}); devices they taint show as "
                  "free", file=sys.stderr)
            return []
        return [dict(rule) for rule in objects.of("DeviceTaintRule")]
    return []


def snapshot(args: argparse.Namespace) -> tuple[Obj, Any]:
    """The fleet snapshot (the contract's `Fleet` document) and the objects it was built from."""
    from gpuclaim.commands import _cluster
    from gpuclaim.commands._config import load_config_file

    config = load_config_file(args.config)
    namespace = _namespace(args)
    objects, version = _read(args, namespace)
    resolved = _cluster.resolve(args, version, command="fleet")
    from gpuclaim.fleet import model

    fleet = model.build_fleet(
        slices=objects.of("ResourceSlice"), claims=objects.of("ResourceClaim"), nodes=objects.of("Node"),
        taint_rules=objects.of("DeviceTaintRule"), classes=objects.of("DeviceClass"), config=config,
        model=resolved.model, kubernetes_version=_v(version or str(resolved.read)),
        generated_at=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    return fleet, objects


def _v(version: str) -> str:
    """`v1.35` for a dump's `1.35`, as /version's gitVersion reads."""
    return version if version.startswith("v") else f"v{version}"


def run(args: argparse.Namespace) -> int:
    fleet, objects = snapshot(args)
    if args.view == "nodes":
        out = fleet if args.output == "json" else None
        text = None if out is not None else nodes_text(fleet)
    else:
        out = pods_view(fleet, objects.of("Pod"), _namespace(args))
        text = None if args.output == "json" else pods_text(out)
    if out is not None and args.output == "json":
        sys.stdout.write(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(text or "")
    return ExitStatus.OK


# ---- the pods view ------------------------------------------------------------------------------------------------
def pods_view(fleet: Mapping[str, Any], pods: list[Obj], namespace: str | None) -> Obj:
    """pod -> claims -> devices (with their topology group), from the snapshot's devices; pods that ask for claims
    but hold no device yet (pending, or allocation not done) are listed with no devices."""
    found: dict[tuple[str, str], Obj] = {}
    for node in fleet.get("nodes") or ():
        for group in node.get("groups") or ():
            for device in group.get("devices") or ():
                for pod in device.get("pods") or ():
                    if namespace is not None and pod.get("namespace") != namespace:
                        continue
                    entry = found.setdefault((pod["namespace"], pod["name"]), {
                        "namespace": pod["namespace"], "name": pod["name"], "node": node["name"], "claims": {}})
                    for claim in device.get("claims") or ():
                        if claim.get("namespace") != pod["namespace"]:
                            continue
                        held = entry["claims"].setdefault(claim["name"], {"name": claim["name"], "devices": []})
                        held["devices"].append({
                            "driver": device["driver"], "pool": device["pool"], "name": device["name"],
                            "model": device.get("model"), "state": device.get("state"),
                            "migParent": device.get("migParent"),
                            "group": {"kind": group["kind"], "name": group["name"]}})
    for pod in pods:
        meta = pod.get("metadata") or {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        spec = pod.get("spec") or {}
        if not spec.get("resourceClaims") or (namespace is not None and ns != namespace) or (ns, name) in found:
            continue
        statuses = {s.get("name"): s.get("resourceClaimName") for s in
                    (pod.get("status") or {}).get("resourceClaimStatuses") or () if isinstance(s, Mapping)}
        claims: dict[str, Obj] = {}
        for ref in spec["resourceClaims"]:
            claim = ref.get("resourceClaimName") or statuses.get(ref.get("name"))
            if claim:
                claims[str(claim)] = {"name": str(claim), "devices": []}
        found[(ns, name)] = {"namespace": ns, "name": name, "node": spec.get("nodeName"), "claims": claims}
    listed = []
    for key in sorted(found):
        entry = found[key]
        ordered: list[Obj] = [entry["claims"][c] for c in sorted(entry["claims"])]
        for claim in ordered:
            claim["devices"].sort(key=lambda d: (d["driver"], d["pool"], d["name"]))
        listed.append({**entry, "claims": ordered})
    return {"apiVersion": API_VERSION, "kind": "FleetPods", "revision": fleet.get("revision"),
            "kubernetesVersion": fleet.get("kubernetesVersion"), "namespace": namespace, "pods": listed}


# ---- text ---------------------------------------------------------------------------------------------------------
def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def _fits(summary: Mapping[str, Any]) -> str:
    fits = summary.get("tightFits") or {}
    return "/".join(str(fits.get(n, 0)) for n in ("1", "2", "4", "8"))


def nodes_text(fleet: Mapping[str, Any]) -> str:
    header = ["NODE / GROUP", "DEVICES", *(s.upper() for s in STATES), "STRANDED", "LARGEST-TIGHT",
              "FITS 1/2/4/8"]
    rows = [header]
    for node in fleet.get("nodes") or ():
        s = node.get("summary") or {}
        devices = s.get("devices") or {}
        rows.append([node["name"], str(devices.get("total", 0)), *(str(devices.get(k, 0)) for k in STATES),
                     str(s.get("stranded", 0)), str(s.get("largestFreeTightGroup", 0)), _fits(s)])
        for group in node.get("groups") or ():
            counts = {k: 0 for k in STATES}
            for device in group.get("devices") or ():
                counts[device.get("state", "free")] = counts.get(device.get("state", "free"), 0) + 1
            rows.append([f"  {group['kind']} {group['name']}", str(len(group.get("devices") or ())),
                         *(str(counts[k]) for k in STATES), "", "", ""])
    s = fleet.get("summary") or {}
    devices = s.get("devices") or {}
    lines = [f"Kubernetes {fleet.get('kubernetesVersion') or '?'}, revision {fleet.get('revision')}: "
             f"{devices.get('total', 0)} devices, " + ", ".join(f"{devices.get(k, 0)} {k}" for k in STATES) +
             f"; stranded {s.get('stranded', 0)}; tight jobs that fit (1/2/4/8): {_fits(s)}; "
             f"free MIG slices {s.get('freeMigSlices', 0)}", ""]
    if len(rows) == 1:
        return "\n".join([*lines, "No nodes with devices."]) + "\n"
    return "\n".join([*lines, *_table(rows)]) + "\n"


def pods_text(view: Mapping[str, Any]) -> str:
    rows = [["NAMESPACE", "POD", "NODE", "CLAIM", "DEVICE", "MODEL", "STATE", "GROUP"]]
    for pod in view["pods"]:
        first = [pod["namespace"], pod["name"], pod.get("node") or "-"]
        if not pod["claims"]:
            rows.append([*first, "-", "-", "-", "-", "-"])
        for claim in pod["claims"]:
            if not claim["devices"]:
                rows.append([*first, claim["name"], "-", "-", "not allocated", "-"])
            for d in claim["devices"]:
                name = f"{d['driver']}/{d['pool']}/{d['name']}"
                if d.get("migParent"):
                    name += f" (MIG of {d['migParent']})"
                rows.append([*first, claim["name"], name, d.get("model") or "-", d.get("state") or "-",
                             f"{d['group']['kind']} {d['group']['name']}"])
    if len(rows) == 1:
        where = f"namespace {view['namespace']}" if view.get("namespace") else "any namespace"
        return f"No pods with resource claims in {where}.\n"
    return "\n".join(_table(rows)) + "\n"
