"""The whole loopback cluster `up` starts: the control plane, the fleet, gpuclaim from its chart, the scheduler
with gpuclaim's extender. One object owns every process it started.

    stack = Stack.start(run_dir, binaries, nodes=None)    # raises PlaneError naming what did not come up
    stack.save()                                          # state.json: pids, ports, paths (`down` reads it)
    stack.stop()
    Stack.down(run_dir)                                   # stop a detached stack from its state.json
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from e2e.kube import install
from e2e.kube.cluster import ControlPlane, PlaneError, Proc, stop_procs

Obj = dict[str, Any]


def default_run_dir() -> Path:
    if os.environ.get("GPUCLAIM_KUBE_RUN"):
        return Path(os.environ["GPUCLAIM_KUBE_RUN"])
    return Path(tempfile.gettempdir()) / f"gpuclaim-kube-{os.getuid()}"


def running_state(run: Path) -> Obj | None:
    """The state of a detached cluster in `run` whose apiserver still runs; None otherwise."""
    try:
        state: Obj = orjson.loads((run / "state.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    api = state["procs"].get("kube-apiserver")
    if api is None or not Proc("kube-apiserver", int(api["pid"]), Path(api["log"])).alive():
        return None
    return state


@dataclass
class Stack:
    plane: ControlPlane
    gpuclaim: install.Gpuclaim
    fleet: install.FleetPlan
    timings: dict[str, float] = field(default_factory=dict)

    @classmethod
    def start(cls, run: Path, binaries: dict[str, Path], *, nodes: int | None = None,
              values: Obj | None = None, servers: bool = True, whole_gpus: int | None = None,
              extenders: bool = True, fleet: install.FleetPlan | None = None) -> Stack:
        if (run / "state.json").exists():
            raise PlaneError(f"{run} holds a running cluster's state: `python -m e2e.kube down` first")
        if run.exists():
            shutil.rmtree(run)
        run.mkdir(parents=True)
        started = time.monotonic()
        plane = ControlPlane(run, binaries)
        fleet = fleet or install.demo_fleet(nodes, whole_gpus=whole_gpus)
        stack = cls(plane, install.Gpuclaim(plane, values=values or {}), fleet)
        try:
            plane.start_core()
            api = plane.api()
            try:
                t = time.monotonic()
                install.load_fleet(api, stack.fleet)
                stack.timings["fleet"] = round(time.monotonic() - t, 2)
                t = time.monotonic()
                stack.gpuclaim.install(api)
                stack.timings["gpuclaim install"] = round(time.monotonic() - t, 2)
                if servers:
                    t = time.monotonic()
                    stack.gpuclaim.start_servers()
                    stack.timings["webhook+extender"] = round(time.monotonic() - t, 2)
                plane.start_scheduler(stack.gpuclaim.extenders() if extenders else [])
                for ns in ("default", install.inventory.WORKLOAD_NAMESPACE, install.inventory.UNLABELED_NAMESPACE):
                    install.wait_default_sa(api, ns)
            finally:
                api.close()
        except BaseException:
            stack.stop()
            raise
        stack.timings.update(plane.timings)
        stack.timings["total"] = round(time.monotonic() - started, 2)
        return stack

    def procs(self) -> dict[str, Proc]:
        return {**self.plane.procs, **self.gpuclaim.procs}

    def stop(self) -> None:
        self.gpuclaim.stop()
        self.plane.stop()

    def save(self) -> None:
        state = {**self.plane.state(), "kubeconfig": str(self.plane.kubeconfig_path()),
                 "procs": {n: {"pid": p.pid, "log": str(p.log), "argv": p.argv} for n, p in self.procs().items()},
                 "gpuclaimPorts": self.gpuclaim.ports, "timings": self.timings, "nodes": self.fleet.nodes,
                 "extenders": self.gpuclaim.extenders(), "skippedChartKinds": self.gpuclaim.skipped_kinds}
        (self.plane.run / "state.json").write_bytes(orjson.dumps(state, option=orjson.OPT_INDENT_2))

    @staticmethod
    def down(run: Path) -> list[str]:
        """Stop every process a detached `up` recorded, then remove its directory. Returns what was stopped."""
        state_file = run / "state.json"
        if not state_file.exists():
            return []
        state = orjson.loads(state_file.read_bytes())
        procs = [Proc(name, int(p["pid"]), Path(p["log"])) for name, p in state["procs"].items()]
        # clients first, the store last
        rank = {"kube-scheduler": 1, "kube-controller-manager": 2, "kube-apiserver": 3, "etcd": 4}
        procs.sort(key=lambda p: rank.get(p.name, 0))
        stopped = [p.name for p in procs if p.alive()]
        for group in (p for p in procs if p.name not in rank), *([p] for p in procs if p.name in rank):
            stop_procs(list(group))
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(run)
        return stopped
