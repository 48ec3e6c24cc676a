"""`gpuclaim demo --keep -o json` as a test fixture's body: the stack stays up while the block runs, then its
processes (the pids the report lists) are stopped. Shared by every test that works on the kept demo stack."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def kept_demo(workdir: Path, *, timeout: float = 180) -> Iterator[dict[str, Any]]:
    """Run the demo with --keep in `workdir` and yield its JSON report; a failed demo fails with its stderr."""
    done = subprocess.run([sys.executable, "-m", "gpuclaim", "demo", "--keep", "-o", "json", "--workdir",
                           str(workdir)], capture_output=True, timeout=timeout, cwd=REPO, check=False)
    report = orjson.loads(done.stdout) if done.stdout.strip() else {}
    pids = list((report.get("keep") or {}).get("pids", {}).values())
    try:
        assert done.returncode == 0, done.stderr.decode()[-3000:]
        yield report
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while any(Path(f"/proc/{p}").exists() for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
