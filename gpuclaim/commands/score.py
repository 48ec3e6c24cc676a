"""`gpuclaim score --cluster DIR --pod FILE [--config FILE] [-o text|json] [--kubernetes-version X.Y]`: the
extender's verdict for one pod on every node of an inventory, offline.

DIR holds ResourceSlice, ResourceClaim, ResourceClaimTemplate, DeviceClass and Node YAML; every node with a Node
object or a node-local slice is a candidate. Per node: the score (0..10, as /prioritize answers), the devices
the DRA allocator would pick there (``driver/pool/device``) and why, in words; for a node where the pod does
not fit, why not (including the CEL runtime error that would abort scheduling). ``-o json`` prints an array
sorted best first of ``{node, score, devices, reason}``, nodes where the pod does not fit last with
``score: null``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import yaml

from gpuclaim.exitstatus import ExitStatus, UsageError


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cluster", type=Path, required=True, metavar="DIR", help="inventory directory (YAML)")
    parser.add_argument("--pod", type=Path, required=True, metavar="FILE", help="the Pod (YAML or JSON)")
    parser.add_argument("--config", type=Path, metavar="FILE", help="the gpuclaim config file (extender section)")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    from gpuclaim.commands._config import add_kubernetes_version

    add_kubernetes_version(parser)


def _load_pod(path: Path) -> Mapping[str, Any]:
    try:
        documents = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
    except OSError as exc:
        raise UsageError(f"--pod {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise UsageError(f"--pod {path}: not YAML: {' '.join(str(exc).split())}") from None
    pods = [d for d in documents if isinstance(d, dict) and d.get("kind") == "Pod"]
    if len(pods) != 1:
        raise UsageError(f"--pod {path}: expected exactly one object of kind Pod, found {len(pods)}")
    pod = pods[0]
    for key in ("metadata", "spec", "status"):
        if pod.get(key) is not None and not isinstance(pod[key], dict):
            raise UsageError(f"--pod {path}: {key}: expected an object")
    why = _container_problem(pod.get("spec") or {})
    if why is not None:
        raise UsageError(f"--pod {path}: {why}")
    return pod


def _container_problem(spec: Mapping[str, Any]) -> str | None:
    """The first container field a Pod cannot have, as kube-apiserver would refuse it (a verdict on such a pod
    would be about a pod that cannot exist): the lists, their objects, and `resources.claims` entries."""
    for key in ("initContainers", "containers"):
        containers = spec.get(key)
        if containers is None:
            continue
        if not isinstance(containers, list):
            return f"spec.{key}: expected an array"
        for i, container in enumerate(containers):
            path = f"spec.{key}[{i}]"
            if not isinstance(container, dict):
                return f"{path}: expected an object"
            resources = container.get("resources")
            if resources is None:
                continue
            if not isinstance(resources, dict):
                return f"{path}.resources: expected an object"
            claims = resources.get("claims")
            if claims is None:
                continue
            if not isinstance(claims, list):
                return f"{path}.resources.claims: expected an array"
            for j, claim in enumerate(claims):
                if not isinstance(claim, dict) or not isinstance(claim.get("name"), str):
                    return f"{path}.resources.claims[{j}]: expected an object with a name"
    return None


def rows(pod: Mapping[str, Any], view: Any, config: Any, *, where: str = "pod") -> list[dict[str, Any]]:
    """The JSON rows, sorted: best score first, then node name; nodes where the pod does not fit last. `where` names
    the pod in a usage error (the CLI: `--pod FILE`)."""
    from gpuclaim.extender import predict

    names = view.candidates()
    if not predict.has_claims(pod):
        out = [{"node": n, "score": 0, "devices": [], "reason": "the pod has no DRA claims: every node scores 0"}
               for n in names]
        return out
    try:
        request = predict.resolve(pod, view, config)
    except predict.PodError as exc:
        raise UsageError(f"{where}: {exc}") from None
    note = "".join(f"; note: {n}" for n in request.notes)
    if request.empty:  # no pending claim and none pinned to some nodes
        reason = "no claim left to predict (all allocated or not visible): every node scores 0" + note
        return [{"node": n, "score": 0, "devices": [], "reason": reason} for n in names]
    out = [{"node": v.node, "score": v.score, "devices": list(v.devices), "reason": v.reason + note}
           for v in predict.predict(request, names, view, config)]
    out.sort(key=lambda r: (r["score"] is None, -(r["score"] or 0), r["node"]))
    return out


def run(args: argparse.Namespace) -> int:
    from gpuclaim.commands._config import kubernetes_model, load_config_file
    from gpuclaim.extender.offline import InventoryError, OfflineView

    full = load_config_file(args.config)
    model = kubernetes_model(args, full)  # the kube-scheduler predicted: its allocator and taint rules
    config = full.extender
    pod = _load_pod(args.pod)
    try:
        view = OfflineView.from_directory(args.cluster, config=config, model=model)
    except InventoryError as exc:
        raise UsageError(str(exc)) from None
    result = rows(pod, view, config, where=f"--pod {args.pod}")
    if args.output == "json":
        sys.stdout.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")
        return ExitStatus.OK
    if not result:
        print("no candidate nodes in the inventory (no Node objects and no node-local ResourceSlices)")
    for row in result:
        score = "-" if row["score"] is None else str(row["score"])
        print(f"{row['node']}  score {score}")
        for device in row["devices"]:
            print(f"    {device}")
        print(f"    {row['reason']}")
    return ExitStatus.OK
