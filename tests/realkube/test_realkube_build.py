"""`python -m e2e.kube build`: current binaries are reused, a changed key means a rebuild, a key-less binary is
adopted only when its Go build info matches the module's go.sum (and its --version the pinned release)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from realkube_cluster import REPO, minors_under_test, require_binaries

from e2e.kube import build


@pytest.mark.parametrize("minor", minors_under_test())
def test_build_reuses_current_binaries(minor: str) -> None:
    require_binaries(minor)
    done = subprocess.run([sys.executable, "-m", "e2e.kube", "build", "--kubernetes-version", minor],
                          capture_output=True, text=True, cwd=REPO, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    dirs = build.bin_dirs(build.cache_dir(), minor)
    assert done.stdout.split() == [str(dirs[name] / name) for name in build.NAMES]
    for name in build.NAMES:
        assert f"{name}: reused" in done.stderr or f"{name}: adopted" in done.stderr, done.stderr


def test_keys_decide_reuse_and_adoption_checks_the_build_info(tmp_path: Path) -> None:
    minor = minors_under_test()[0]
    require_binaries(minor)
    source = build.bin_dirs(build.cache_dir(), minor)
    dirs = build.bin_dirs(tmp_path, minor)
    for path in set(dirs.values()):
        path.mkdir(parents=True)
    bin_dir = dirs["kube-scheduler"]
    shutil.copy2(source["kube-scheduler"] / "kube-scheduler", bin_dir / "kube-scheduler")
    shutil.copy2(source["etcd"] / "etcd", dirs["etcd"] / "etcd")
    version = build.go_version()
    key = {c.name: c.key(version) for c in build.components(minor)}
    (bin_dir / "kube-scheduler.key").write_text(key["kube-scheduler"] + "\n")
    states = build.status(tmp_path, minor, version)
    assert states["kube-scheduler"] == "ok"
    assert states["kube-apiserver"] == states["kube-controller-manager"] == states["kubectl"] == "missing"
    assert states["etcd"] == "adoptable"  # no key file, but built from e2e/kube/etcd's go.sum: adopted
    (bin_dir / "kube-scheduler.key").write_text("0" * 64 + "\n")
    assert build.status(tmp_path, minor, version)["kube-scheduler"] == "stale"
    # a binary of another package under a component's name is not adopted
    shutil.copy2(source["etcd"] / "etcd", bin_dir / "kube-scheduler")
    (bin_dir / "kube-scheduler.key").unlink()
    assert build.status(tmp_path, minor, version)["kube-scheduler"].startswith("unknown build: package is")
    shutil.copy2(shutil.which("ls") or "/bin/ls", dirs["etcd"] / "etcd")
    assert build.status(tmp_path, minor, version)["etcd"].startswith("unknown build")
