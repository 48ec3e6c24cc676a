"""The wheel as a user installs it: one top-level import package, and `gpuclaim demo` without its extra.

The wheel is built from the repository without build isolation, and installed into a fresh virtualenv
(no system site-packages) with `pip install --no-index --find-links`: the dependencies it resolves are
wheels repacked from the distributions installed in this test's own environment, so nothing comes from
the network and pip resolves exactly what the wheel's metadata asks for without extras.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata as md
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.tags import sys_tags

REPO = Path(__file__).resolve().parents[1]
INSTALL_HINT = "pip install -e '.[demo]'"


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _wanted(req: Requirement, extras: tuple[str, ...]) -> bool:
    if req.marker is None:
        return True
    return any(req.marker.evaluate({**default_environment(), "extra": e}) for e in ("", *extras))


def _repack(dist: md.Distribution, out: Path) -> None:
    """Write ``dist`` (installed) back as a wheel, with the tag its WHEEL file records."""
    wheel_meta = dist.read_text("WHEEL") or ""
    recorded = [line.split(":", 1)[1].strip() for line in wheel_meta.splitlines() if line.startswith("Tag:")]
    supported = {str(t) for t in sys_tags()}
    tag = next((t for t in recorded if t in supported), "py3-none-any")  # e.g. py3 of py2.py3
    name, version = _normalize(dist.metadata["Name"]), dist.version
    record_lines = []
    target = out / f"{name}-{version}-{tag}.whl"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as whl:
        record_name = None
        for f in dist.files or ():
            rel = f.as_posix()
            if rel.startswith("..") or "__pycache__" in rel:
                continue  # console scripts are made again by pip; bytecode too
            if rel.endswith(".dist-info/RECORD"):
                record_name = rel
                continue
            data = Path(dist.locate_file(f)).read_bytes()
            whl.writestr(rel, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record_lines.append(f"{rel},sha256={digest},{len(data)}")
        assert record_name is not None, f"{name}: no RECORD"
        record_lines.append(f"{record_name},,")
        whl.writestr(record_name, "\n".join(record_lines) + "\n")


def _repack_closure(requirements: list[Requirement], out: Path) -> list[str]:
    """Repack every installed distribution ``requirements`` need, transitively (what pip would resolve)."""
    seen: set[str] = set()
    todo = [(r, ()) for r in requirements]
    while todo:
        req, extras = todo.pop()
        if not _wanted(req, extras) or _normalize(req.name) in seen:
            continue
        seen.add(_normalize(req.name))
        dist = md.distribution(req.name)
        _repack(dist, out)
        for sub in dist.requires or ():
            todo.append((Requirement(sub), tuple(req.extras)))
    return sorted(seen)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                    "-w", str(out), str(REPO)], check=True, timeout=300, cwd=out)
    (built,) = out.glob("gpuclaim-*.whl")
    return built


def test_the_wheel_installs_only_the_gpuclaim_import_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert top == {"gpuclaim", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}
    assert not any(n.startswith(("e2e/", "tests/")) or "/e2e/" in n for n in names)
    assert "gpuclaim/double/apiserver/app.py" in names  # the demo's cluster double is product code
    # the fleet page's script, stylesheet and icon are package data the fleet port serves
    assert {f"gpuclaim/fleet/static/{f}" for f in ("fleet.js", "fleet.css", "favicon.svg")} <= set(names)


def test_demo_without_its_extra_exits_2_with_the_install_hint(wheel: Path, tmp_path: Path) -> None:
    metadata = zipfile.ZipFile(wheel).read(f"{'-'.join(wheel.name.split('-')[:2])}.dist-info/METADATA").decode()
    requires = [Requirement(line.split(":", 1)[1].strip()) for line in metadata.splitlines()
                if line.startswith("Requires-Dist:")]
    links = tmp_path / "links"
    links.mkdir()
    resolved = _repack_closure(requires, links)
    assert "jsonpatch" not in resolved and "kubernetes_validate" not in resolved  # base install only

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_", "VIRTUAL_ENV"))}
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-index",
                    "--find-links", str(links), str(wheel)], check=True, timeout=300, env=env, cwd=tmp_path)
    done = subprocess.run([str(venv / "bin" / "gpuclaim"), "demo"], capture_output=True, text=True, timeout=60,
                          env=env, cwd=tmp_path, check=False)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith(INSTALL_HINT), done.stderr
    assert lines[0].startswith("gpuclaim demo: needs the demo extra (jsonpatch, kubernetes-validate")
