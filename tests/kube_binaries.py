"""The Kubernetes binaries `python -m e2e.kube build` makes, for the tests that run them (tests/realkube, and
tests/e2e/test_kubectl.py, which points kubectl at the API double).

They must be built: CI (.ci/run) builds them before pytest, so a missing one is a failure there.
GPUCLAIM_REALKUBE=skip skips instead, for a machine without Go; nothing else does. Never kubectl from PATH: its
version is whatever the machine has (Debian's is 1.20), not the minor under test.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from e2e.kube import build


def require(minor: str, names: tuple[str, ...] = build.NAMES) -> dict[str, Path]:
    """The paths of `names` built for `minor`; skips (GPUCLAIM_REALKUBE=skip) or fails naming what is missing."""
    try:
        states = build.status(build.cache_dir(), minor)
    except build.BuildError as exc:
        states = {"go": str(exc)}
    missing = {name: state for name, state in states.items()
               if (name in names or name == "go") and state not in ("ok", "adoptable")}
    if missing:
        message = (f"Kubernetes {minor} binaries not built ({missing}): run "
                   f"`python -m e2e.kube build --kubernetes-version {minor}`")
        if os.environ.get("GPUCLAIM_REALKUBE") == "skip":
            pytest.skip(message)
        pytest.fail(message)
    dirs = build.bin_dirs(build.cache_dir(), minor)
    return {name: dirs[name] / name for name in names}


def kubectl(minor: str) -> Path:
    """kubectl of `minor`, built from Go modules beside that minor's control plane."""
    return require(minor, ("kubectl",))["kubectl"]
