"""`gpuclaim demo`: the whole path on loopback, real processes, an embedded sample fleet (see docs/demo.md).

    report = run_demo(workdir, keep=False)   # the report dict (`gpuclaim demo -o json` prints it)
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

Obj = dict[str, Any]


def run_demo(workdir: Path, *, keep: bool = False) -> tuple[Obj, Any]:
    """Start the stack, play the scenario, build the report. Returns (report, stack); the stack is stopped unless
    `keep` (then the caller owns it). Raises `stack.StackError` when the API double or the certificates fail."""
    import asyncio

    from gpuclaim.demo import inventory, report, scenario, stack

    started = time.monotonic()
    fleet = inventory.build()
    running = stack.Stack(workdir)
    try:
        running.start(fleet.objects + inventory.registrations())
        start_seconds = time.monotonic() - started
        played = asyncio.run(scenario.Scenario(running).run())
        out: Obj = {
            "version": "1",
            "note": "an API double and a kube-scheduler double on loopback, not a real cluster",
            "fleet": {"summary": _summary(played["nodes"]), "provenance": fleet.provenance},
            "stack": _stack_info(running, start_seconds),
            "workloads": played["workloads"],
            "nodes": played["nodes"],
            "controllerEvents": played["controllerEvents"],
        }
        out["checks"] = report.checks(out)
        out["seconds"] = round(time.monotonic() - started, 2)
        return out, running
    finally:
        if not keep:
            running.stop()


def _summary(nodes: list[Obj]) -> str:
    products: dict[str, int] = {}
    for node in nodes:
        products[node["product"]] = products.get(node["product"], 0) + 1
    devices = sum(n["total"] for n in nodes)
    mig = sum(1 for n in nodes for d in n["devices"] if d["type"] == "mig")
    used = sum(n["used"] for n in nodes)
    kinds = ", ".join(f"{count}x {product}" for product, count in products.items())
    return f"{len(nodes)} nodes ({kinds}); {devices} devices ({mig} MIG); {used} held after the demo"


def _stack_info(running: Any, start_seconds: float) -> Obj:
    pids = running.pids()
    info: Obj = {
        "apiserver": {"url": running.api_url, "pid": pids.get("apiserver"), "kubeconfig": str(running.kubeconfig)},
        "skipped": dict(running.skipped),
        "timings": dict(running.timings),
        "startSeconds": round(start_seconds, 2),
        "workdir": str(running.workdir),
        "certs": {"actions": running.certs_report.get("actions", []),
                  "injected": running.certs_report.get("injected", []),
                  "names": [*running.certs_report.get("servingCert", {}).get("dnsNames", []),
                            *running.certs_report.get("servingCert", {}).get("ipAddresses", [])],
                  "tlsDir": str(running.tls_dir)},
    }
    if "webhook" in pids:
        info["webhook"] = {"url": f"https://127.0.0.1:{running.webhook_port}", "pid": pids["webhook"],
                           "metrics": f"http://127.0.0.1:{running.webhook_metrics_port}/metrics"}
    if "extender" in pids:
        info["extender"] = {"url": f"https://127.0.0.1:{running.extender_port}", "pid": pids["extender"],
                            "metrics": f"http://127.0.0.1:{running.extender_metrics_port}/metrics"}
        # the fleet page (docs/fleet.md): served by the extender; reachable after the demo with --keep
        info["fleet"] = {"url": running.fleet_url, "api": running.fleet_url.replace("/fleet", "/api/v1/fleet"),
                         "tokens": str(running.fleet_tokens), "ca": str(running.tls_dir / "ca.crt")}
    return info
