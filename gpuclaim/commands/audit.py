"""`gpuclaim audit [--kubeconfig FILE | --cluster DIR] [--config FILE] [--kubernetes-version X.Y] [-o text|json]`:
what turning gpuclaim on will change in a cluster, and the hazards (docs/audit.md).

Live (the default: `--kubeconfig`, else in-cluster, else ~/.kube/config) it needs only list permissions (the
chart's `<release>-audit` ClusterRole) and reads the version from `/version`; offline, `--cluster DIR` reads a dump
(`kubectl get -A -o yaml ...` output, as `score --cluster` reads one) at `--kubernetes-version` (default: newest
supported). Exit 0 without a hazard, 1 with one, 2 on a usage or input error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson

from gpuclaim.exitstatus import ExitStatus


def configure(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--kubeconfig", type=Path, metavar="FILE", help="read the cluster live (read-only)")
    source.add_argument("--cluster", type=Path, metavar="DIR", help="read a dump directory (YAML or JSON) instead")
    parser.add_argument("--config", type=Path, metavar="FILE", help="the gpuclaim config file (mappings, opt-out, "
                        "mixedNodes) the report judges with")
    parser.add_argument("--kubernetes-version", metavar="X.Y",
                        help="the version of an offline dump (default: the newest supported); refused live, where "
                        "the cluster's /version is used")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")


def run(args: argparse.Namespace) -> int:
    from gpuclaim.audit import report
    from gpuclaim.commands import _cluster
    from gpuclaim.commands._config import load_config_file

    config = load_config_file(args.config)
    cluster = _cluster.read(args)
    resolved = _cluster.resolve(args, cluster.version, command="audit")
    result = report.build(cluster.objects, model=resolved.model, config=config, version_text=cluster.version)
    if args.output == "json":
        sys.stdout.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(text(result))
    return ExitStatus.FINDINGS if result["hazards"] else ExitStatus.OK


def text(result: dict[str, Any]) -> str:
    k = result["kubernetes"]
    gates = ", ".join(f"{name}={'on' if on else 'off'}" for name, on in k["gates"].items())
    lines = [f"Kubernetes {k['version']} (model {k['model']}); DRA gates: {gates}", ""]
    lines.append(f"Workloads asking for legacy GPU resources: {len(result['workloads'])}")
    for w in result["workloads"]:
        where = f"{w['namespace']}/" if w.get("namespace") else ""
        asks = ", ".join(f"{r}={n}" for r, n in w["resources"].items())
        lines.append(f"  {w['kind']} {where}{w['name']} ({asks}): {w['outcome']}: {w['detail']}")
    lines.append("")
    lines.append("Namespaces opted out: " + (", ".join(f"{o['namespace']} ({o['why']})"
                                                      for o in result["optedOutNamespaces"]) or "none"))
    lines.append("")
    lines.append(f"GPU quotas: {len(result['quotas'])}")
    for q in result["quotas"]:
        kept = ", ".join(f"{e['legacy']}={e['limit']} -> {e['keptBy']}" for e in q["entries"]) or "-"
        lines.append(f"  ResourceQuota {q['namespace']}/{q['name']}: {q['state']} ({kept})")
    lines.append("")
    lines.append(f"Mixed nodes: {len(result['mixedNodes'])}")
    for m in result["mixedNodes"]:
        lines.append(f"  {m['node']}: " + "; ".join(f"{o['resource']}={o['allocatable']} and driver {o['driver']}"
                                                    for o in m["overlaps"]))
    lines.append("")
    lines.append(f"DeviceClasses with extendedResourceName: {len(result['deviceClasses'])}")
    for c in result["deviceClasses"]:
        lines.append(f"  {c['name']} ({c['extendedResourceName']}): {c['effect']}")
    lines.append("")
    use = result["devicesInUse"]
    lines.append("Devices in use: device plugin " + (", ".join(f"{r}={n}" for r, n in use["devicePlugin"].items())
                                                      or "none") + "; DRA " +
                 (", ".join(f"{d}={n}" for d, n in use["dra"].items()) or "none"))
    lines.append("")
    if result["hazards"]:
        lines.append(f"Hazards: {len(result['hazards'])}")
        lines.extend(f"  [{h['kind']}] {h['object']}: {h['message']}" for h in result["hazards"])
    else:
        lines.append("Hazards: none")
    return "\n".join(lines) + "\n"
