"""The chaos steps, each run while admission traffic flows, each followed by convergence probes.

A step returns its figures; `Chaos.run_step` times it, counts the transient failures the traffic met during it,
and probes the webhook's and the extender's caches afterwards.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from e2e.reliability import converge
from e2e.reliability.traffic import Traffic
from gpuclaim.demo.scenario import Api
from gpuclaim.demo.stack import Stack
from gpuclaim.double.controllers import ResourceClaimController
from gpuclaim.double.scheduler import Scheduler
from gpuclaim.kube import KubeClient

Obj = dict[str, Any]


@dataclass
class Chaos:
    stack: Stack
    api: Api
    client: KubeClient
    traffic: Traffic
    namespace: str
    generation: int = 0

    async def _double(self, method: str, path: str, body: Obj | None = None) -> Obj:
        status, answer, _ = await self.api.request(method, path, body)
        if status != 200:
            raise RuntimeError(f"double {method} {path}: {status} {answer}")
        return answer

    async def run_step(self, name: str, action: Callable[[], Awaitable[Obj]]) -> Obj:
        before = {r.name for r in self.traffic.records}
        started = time.monotonic()
        try:
            figures = await action()
            error = None
        except Exception as exc:  # a step that cannot run is a finding, not a crash of the suite
            figures, error = {}, f"{type(exc).__name__}: {exc}"
        self.generation += 1
        webhook_s = await converge.webhook(self.api, self.namespace, self.generation)
        extender_s = await converge.extender(self.stack, self.api, self.client, self.namespace, self.generation)
        during = [r for r in self.traffic.records if r.name not in before]
        transient: dict[str, int] = {}
        for record in during:
            for kind, count in record.transient.items():
                transient[kind] = transient.get(kind, 0) + count
        ok = error is None and webhook_s is not None and extender_s is not None and figures.get("ok", True)
        return {"step": name, "seconds": round(time.monotonic() - started, 2), "admissionsDuring": len(during),
                "transientFailures": transient, "webhookConverged_s": webhook_s, "extenderConverged_s": extender_s,
                **figures, "error": error, "ok": ok}

    # ---- the steps -----------------------------------------------------------------------------------------
    async def restart_webhook(self) -> Obj:
        started = time.monotonic()
        code = await asyncio.to_thread(self.stack.stop_part, "webhook")
        await asyncio.to_thread(self.stack.start_webhook)
        return {"exitCode": code, "downtime_s": round(time.monotonic() - started, 2), "ok": code == 0}

    async def kill_extender(self) -> Obj:
        await asyncio.to_thread(self.stack.stop_part, "extender", sig=signal.SIGKILL)
        # with the extender gone, scheduling must go on: prioritize errors are ignored (the entry is ignorable)
        decision = await self._schedule_one()
        await asyncio.to_thread(self.stack.start_extender)
        ignored = any("prioritize ignored" in w for w in decision.get("warnings", []))
        return {"scheduledWithoutExtender": decision.get("outcome"), "extenderErrorIgnored": ignored,
                "ok": decision.get("outcome") == "scheduled" and (ignored or decision.get("single", False))}

    async def _schedule_one(self) -> Obj:
        controller = ResourceClaimController(self.client)
        scheduler = Scheduler(self.client, extenders=self.stack.extender_entries())
        try:
            await controller.sync_once()
            pods, snapshot = await scheduler.snapshot()
            pending = [p for p in scheduler.pending(pods) if p["metadata"]["namespace"] == self.namespace
                       and (p["metadata"].get("labels") or {}).get("shape") == "gpu-1"]
            if not pending:
                return {"outcome": "no pending gpu-1 pod"}
            async with aiohttp.ClientSession() as session:
                from gpuclaim.double.scheduler import HTTPExtender

                extenders = [HTTPExtender(c, session) for c in scheduler.configs]
                decision = await scheduler.schedule_one(pending[0], snapshot, extenders)
            out = decision.to_dict()
            out["single"] = len(decision.scores) == 1  # one feasible node: upstream does not call prioritize
            return out
        finally:
            await scheduler.close()

    async def drop_watches(self) -> Obj:
        answer = await self._double("POST", "/_double/drop-watches")
        return {"watchesClosed": answer.get("closed")}

    async def faults(self, rules: list[Obj], *, drop: bool = True, hold: float = 1.0) -> Obj:
        for rule in rules:
            await self._double("POST", "/_double/faults", rule)
        if drop:
            await self._double("POST", "/_double/drop-watches")
        await asyncio.sleep(hold)
        state = await self._double("GET", "/_double/faults")
        await self._double("DELETE", "/_double/faults")
        return {"faultsFired": state.get("fired", {})}

    async def rotate_certificates(self) -> Obj:
        report = await asyncio.to_thread(self.stack.rotate_certs, self.generation + 1)
        wanted = report["servingCert"]["sha256"]
        started = time.monotonic()
        served: dict[str, float | None] = {"webhook": None, "extender": None}
        ports = {"webhook": self.stack.webhook_port, "extender": self.stack.extender_port}
        while time.monotonic() - started < 20 and None in served.values():
            for part, port in ports.items():
                if served[part] is None and await asyncio.to_thread(converge.served_fingerprint, port) == wanted:
                    served[part] = round(time.monotonic() - started, 2)
            await asyncio.sleep(0.1)
        return {"actions": report["actions"], "webhookServesNew_s": served["webhook"],
                "extenderServesNew_s": served["extender"], "ok": None not in served.values()}
