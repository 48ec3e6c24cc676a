"""Which Kubernetes minors have an oracle, and where each one's Go module is.

Each oracle folder holds ``oracle/`` (the Go code every version shares, a module without requirements of its own)
and one module per supported minor, ``v0.<minor>/`` (go.mod pinning k8s.io/dynamic-resource-allocation v0.<minor>.x,
and a small main.go with what that version's Go API or default gates make different). The version names the
Kubernetes minor, as ``--kubernetes-version`` does: "1.37".
"""

from __future__ import annotations

from pathlib import Path

from e2e.oracle import gobuild

#: every Kubernetes minor with an oracle build, oldest first (the DRA library minor is the same number)
VERSIONS = ("1.34", "1.35", "1.36", "1.37")
NEWEST = VERSIONS[-1]


def module(folder: Path, version: str) -> Path:
    """The Go module of ``version`` inside an oracle ``folder`` (ValueError for a version without one)."""
    if version not in VERSIONS:
        raise ValueError(f"no oracle for Kubernetes {version!r}; versions: {', '.join(VERSIONS)}")
    return folder / f"v0.{version.split('.')[1]}"


def build(folder: Path, name: str, version: str) -> Path:
    """The binary of ``name`` for ``version`` (built on first use; cached by the hash of its and the shared code)."""
    return gobuild.build(module(folder, version), f"{name}-v0.{version.split('.')[1]}", shared=(folder / "oracle",))
