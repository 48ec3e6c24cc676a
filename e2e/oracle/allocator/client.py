"""Client of the allocator oracle: one long-lived Go process, one JSON line per scenario each way."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from e2e.oracle import gobuild

FOLDER = Path(__file__).resolve().parent

# What the 1.34 kube-scheduler's DynamicResources plugin passes at default feature gates
# (dynamicresources.go:712): DRAAdminAccess, DRAPrioritizedList, DRAResourceClaimDeviceStatus.
SCHEDULER_FEATURES: Mapping[str, bool] = {"adminAccess": True, "prioritizedList": True, "deviceStatus": True}


class OracleError(RuntimeError):
    """The oracle process died, or answered something that is not a reply to the scenario sent."""


def binary() -> Path:
    """The oracle's binary (built on first use; cached by source hash)."""
    return gobuild.build(FOLDER, "allocator-oracle")


class AllocatorOracle:
    """``run(scenario)`` for one, ``run_many(scenarios)`` to stream a batch through the same process."""

    def __init__(self, path: Path | None = None) -> None:
        self._proc = subprocess.Popen([str(path or binary())], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, bufsize=1)  # fmt: skip
        self._next = 0

    def __enter__(self) -> AllocatorOracle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        proc = self._proc
        if proc.poll() is None:
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()

    def run(self, scenario: Mapping[str, Any]) -> dict[str, Any]:
        return self.run_many([scenario])[0]

    def run_many(self, scenarios: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Replies in scenario order. Lines are written from a thread so a long batch cannot deadlock on the
        pipes (the oracle answers while we still write)."""
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None
        first = self._next
        self._next += len(scenarios)
        lines = [json.dumps({**s, "id": first + i}) + "\n" for i, s in enumerate(scenarios)]
        writer = threading.Thread(target=_write, args=(proc.stdin, lines), daemon=True)
        writer.start()
        out = []
        for i in range(len(scenarios)):
            line = proc.stdout.readline()
            if not line:
                err = proc.stderr.read() if proc.stderr is not None else ""
                raise OracleError(f"allocator oracle exited ({proc.poll()}): {err[-2000:]}")
            reply = json.loads(line)
            if reply.get("id") != first + i:
                raise OracleError(f"reply {reply.get('id')} out of order, expected {first + i}")
            if reply.get("status") in ("bad-input", "panic"):
                raise OracleError(f"scenario {i}: {reply['status']}: {reply.get('error')}")
            out.append(reply)
        writer.join()
        return out

    def version(self) -> str:
        return str(self.run({"op": "version"})["version"])


def _write(stream: IO[str], lines: Iterable[str]) -> None:
    try:
        for line in lines:
            stream.write(line)
        stream.flush()
    except BrokenPipeError:  # the reader reports the exit
        pass
