"""README's promise for a machine without Go: `GPUCLAIM_REALKUBE=skip python3 -m pytest -q` skips every `realkube`
test, each with the reason, and without that variable none of them skips silently: each fails, saying what to build.

Run as the README says, on `tests/realkube` only, with a PATH that holds no `go` and an empty binary cache.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _without_go(tmp_path: Path, **extra: str) -> dict[str, str]:
    path = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "go").exists()]
    env = {k: v for k, v in os.environ.items() if k not in ("GPUCLAIM_REALKUBE", "GOROOT")}
    return {**env, "PATH": os.pathsep.join(path), "GPUCLAIM_KUBE_CACHE": str(tmp_path / "no-binaries"), **extra}


def _pytest(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rsfE", "tests/realkube", *args],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300, check=False)


def _collected(env: dict[str, str]) -> int:
    done = _pytest(env, "--collect-only")
    m = re.search(r"^(\d+) tests? collected", done.stdout, re.MULTILINE)
    assert m is not None, done.stdout[-2000:] + done.stderr[-2000:]
    return int(m.group(1))


def test_without_go_every_realkube_test_skips_with_the_reason(tmp_path: Path) -> None:
    env = _without_go(tmp_path, GPUCLAIM_REALKUBE="skip")
    done = _pytest(env)
    tail = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 0, done.stdout[-4000:]
    assert re.fullmatch(rf"{_collected(env)} skipped in [\d.]+s(?: \(.*\))?", tail), done.stdout[-4000:]
    reasons = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    assert reasons and all("binaries not built" in r and "python -m e2e.kube build" in r for r in reasons), reasons


@pytest.mark.parametrize("test", ["test_down_stops_everything_and_leaves_nothing",
                                  "test_a_cluster_whose_owner_dies_is_stopped"])
def test_without_the_variable_a_realkube_test_fails_saying_what_to_build(tmp_path: Path, test: str) -> None:
    """The two story tests that start clusters of their own (not through the session fixture) follow the rule too."""
    done = _pytest(_without_go(tmp_path), "-k", test)
    assert done.returncode == 1, done.stdout[-4000:]
    assert re.search(r"\b\d+ failed\b", done.stdout) and " skipped" not in done.stdout, done.stdout[-4000:]
    assert "binaries not built" in done.stdout and "python -m e2e.kube build" in done.stdout
