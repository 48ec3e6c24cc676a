"""Build a Go oracle once and cache the binary by a hash of its sources.

The binary goes to ``$XDG_CACHE_HOME/gpuclaim/oracle/<name>-<hash>`` (``~/.cache`` by default); the hash covers
every ``*.go``, ``go.mod`` and ``go.sum`` of the folder and the Go version, so an edit or a new toolchain
rebuilds and nothing stale runs. Builds run under ``nice`` (the test machines are shared), are serialised by a
lock file (parallel test processes build once) and land atomically (a killed build leaves no half binary).

Where Go is missing, :func:`require_go` skips the calling test with a clear message, unless ``CI`` is set:
CI has Go, so there a missing toolchain fails the run instead of skipping the oracle suites silently.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

BUILD_TIMEOUT_S = 1800  # a cold build of the allocator oracle takes minutes on two loaded cores


class GoMissing(RuntimeError):
    """No usable Go toolchain on PATH."""


class BuildFailed(RuntimeError):
    """``go build`` failed; the message carries its output."""


def go_tool() -> str | None:
    return shutil.which("go")


def require_go() -> str:
    """The ``go`` executable; without one: pytest skip, or failure when the ``CI`` variable is set."""
    import pytest

    go = go_tool()
    if go is None:
        message = ("Go toolchain not found on PATH: the upstream-oracle differential tests need Go >= 1.26 "
                   "(the go.mod files' `go` line)")
        if os.environ.get("CI"):
            pytest.fail(message + " (CI is set: CI must run the oracles)", pytrace=False)
        pytest.skip(message)
    return go


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpuclaim" / "oracle"


def source_hash(folder: Path, go: str, shared: Sequence[Path] = ()) -> str:
    digest = hashlib.sha256()
    version = subprocess.run([go, "version"], capture_output=True, text=True, check=False).stdout.strip()
    digest.update(version.encode())
    for root in (folder, *shared):
        for path in sorted(root.rglob("*")):
            if path.is_file() and (path.suffix == ".go" or path.name in ("go.mod", "go.sum")):
                digest.update(str(path.relative_to(root.parent)).encode() + b"\0")
                digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def build(folder: Path, name: str, *, shared: Sequence[Path] = (), go: str | None = None) -> Path:
    """The binary of the Go main package in ``folder``, built if the cache lacks this exact source.

    ``shared``: folders of local modules the main module replaces itself with (``replace ... => ../x``),
    hashed with it, so an edit there rebuilds every version that uses them.
    """
    go = go or go_tool()
    if go is None:
        raise GoMissing("Go toolchain not found on PATH")
    target = cache_dir() / f"{name}-{source_hash(folder, go, shared)}"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():  # another process built it while we waited
            return target
        partial = target.with_name(target.name + f".part{os.getpid()}")
        command = [go, "build", "-trimpath", "-o", str(partial), "."]
        nice = shutil.which("nice")
        if nice:
            command = [nice, "-n", "10", *command]
        # GOTOOLCHAIN=local: a newer go directive fails here rather than downloading a toolchain.
        env = {**os.environ, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local"}
        proc = subprocess.run(command, cwd=folder, capture_output=True, text=True, env=env,
                              timeout=BUILD_TIMEOUT_S, check=False)  # fmt: skip
        if proc.returncode != 0:
            partial.unlink(missing_ok=True)
            raise BuildFailed(f"go build in {folder} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
        partial.replace(target)
    return target
