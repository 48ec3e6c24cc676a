"""Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl of one Kubernetes minor from the
Go module proxy, once per minor.

Wrapper modules pin the versions; nothing is vendored: `e2e/kube/etcd` (one etcd for every minor) and
`e2e/kube/components/<minor>` (k8s.io/kubernetes of that minor, its staging modules replaced by their published
releases). The binaries go to `<cache>/<minor>/bin` (etcd to `<cache>/etcd/bin`); `<cache>` is
`~/.cache/gpuclaim/kube` by default, `$XDG_CACHE_HOME` honoured, `$GPUCLAIM_KUBE_CACHE` or `--cache-dir` override
it. A binary is reused when its key — the hash of its module's go.mod and go.sum, the package, the ldflags and the
Go version — equals the one recorded beside it in `<name>.key`. A binary with no key file (built by hand with the
same command) is adopted when `go version -m` shows it was built from this module, with these ldflags and only
with module versions this go.sum pins.

    binaries = ensure(cache_dir(), "1.37", log=print)   # {"etcd": Path, ...}; builds what is missing or stale
"""

from __future__ import annotations

import hashlib
import os
import re
import resource
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
VERSION_PKG = "k8s.io/component-base/version"
CLIENT_VERSION_PKG = "k8s.io/client-go/pkg/version"


class BuildError(Exception):
    """A build could not run or failed; the message names the binary and carries go's last lines."""


@dataclass(frozen=True)
class Component:
    name: str
    module_dir: Path
    package: str
    version_from: str  # the module whose required version the binary reports (ldflags)

    def required_version(self) -> str:
        match = re.search(rf"^\s*(?:require\s+)?{re.escape(self.version_from)}\s+(v\S+)",
                          (self.module_dir / "go.mod").read_text(), re.MULTILINE)
        if match is None:
            raise BuildError(f"{self.module_dir / 'go.mod'}: no `require {self.version_from}` line")
        return match.group(1)

    def ldflags(self) -> str:
        flags = ["-s", "-w"]  # no symbol table or DWARF: a third of the size, and nothing here needs them
        if self.version_from == "k8s.io/kubernetes":
            # without these /version says v0.0.0-master+$Format:%H$ (feature gates are 1.34 either way)
            version = self.required_version()
            major, minor = version.lstrip("v").split(".")[:2]
            for pkg in (VERSION_PKG, CLIENT_VERSION_PKG):
                flags += [f"-X {pkg}.gitVersion={version}", f"-X {pkg}.gitMajor={major}",
                          f"-X {pkg}.gitMinor={minor}"]
        return " ".join(flags)

    def key(self, go_version: str) -> str:
        digest = hashlib.sha256()
        for part in ((self.module_dir / "go.mod").read_bytes(), (self.module_dir / "go.sum").read_bytes(),
                     self.package.encode(), self.ldflags().encode(), go_version.encode()):
            digest.update(len(part).to_bytes(8, "big") + part)
        return digest.hexdigest()


KUBERNETES = "k8s.io/kubernetes"
# The minors e2e.kube builds: a folder under components/ each. 1.34 (end of life 2026-10-27) stays buildable for
# comparisons; the newest is the default.
MINORS = tuple(sorted((d.name for d in (HERE / "components").iterdir() if (d / "go.mod").is_file()),
                      key=lambda m: tuple(int(p) for p in m.split("."))))
DEFAULT_MINOR = MINORS[-1]
ETCD = Component("etcd", HERE / "etcd", "go.etcd.io/etcd/server/v3", "go.etcd.io/etcd/server/v3")
NAMES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")


def minor_of(version: str | None) -> str:
    """"1.37", "v1.37", "1.37.2" -> "1.37"; None -> the default. A minor with no wrapper module: BuildError."""
    if version is None:
        return DEFAULT_MINOR
    match = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?", version.strip())
    minor = f"{match.group(1)}.{match.group(2)}" if match else version
    if minor not in MINORS:
        raise BuildError(f"Kubernetes {version!r}: e2e.kube builds {', '.join(MINORS)} "
                         f"(a folder under {HERE / 'components'} each)")
    return minor


def components(minor: str | None = None) -> tuple[Component, ...]:
    module_dir = HERE / "components" / minor_of(minor)
    return (ETCD, *(Component(name, module_dir, f"{KUBERNETES}/cmd/{name}", KUBERNETES) for name in NAMES[1:]))


def release(minor: str | None = None) -> str:
    """The k8s.io/kubernetes release a minor's module pins, e.g. "v1.37.2"."""
    return components(minor)[1].required_version()


def cache_dir(override: str | os.PathLike[str] | None = None) -> Path:
    if override:
        return Path(override).expanduser()
    if os.environ.get("GPUCLAIM_KUBE_CACHE"):
        return Path(os.environ["GPUCLAIM_KUBE_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "gpuclaim" / "kube"


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError("`go` is not on PATH: the control plane is built from Go modules with Go >= 1.26 (the "
                         "go.mod files' `go` line; GOTOOLCHAIN=local, so an older Go is not replaced by a download)")
    return go


def go_env() -> dict[str, str]:
    # the toolchain that is installed, never one downloaded; static binaries
    return {**os.environ, "GOTOOLCHAIN": "local", "CGO_ENABLED": "0"}


def go_version() -> str:
    done = subprocess.run([_go(), "env", "GOVERSION"], capture_output=True, text=True, env=go_env(), check=False)
    if done.returncode != 0:
        raise BuildError(f"go env GOVERSION failed: {done.stderr.strip()}")
    return done.stdout.strip()


def _go_sum_lines(module_dir: Path) -> set[tuple[str, str, str]]:
    out = set()
    for line in (module_dir / "go.sum").read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and not parts[1].endswith("/go.mod"):
            out.add((parts[0], parts[1], parts[2]))
    return out


def built_from(component: Component, binary: Path) -> str | None:
    """None when the binary was built from this module: `go version -m` shows the package, and the module and every
    dependency at the version and hash go.sum pins; and `--version` reports the required version (-trimpath keeps
    the ldflags out of the build info, so the version is read from the binary itself). Else why not."""
    done = subprocess.run([_go(), "version", "-m", str(binary)], capture_output=True, text=True, env=go_env(),
                          check=False)
    if done.returncode != 0:
        return f"go version -m: {done.stderr.strip() or done.stdout.strip()}"
    pinned = _go_sum_lines(component.module_dir)
    path = ""
    modules = 0
    for line in done.stdout.splitlines()[1:]:
        parts = line.split("\t")[1:]
        if len(parts) >= 2 and parts[0] == "path":
            path = parts[1]
            if path != component.package:
                return f"package is {path!r}, not {component.package!r}"
        elif len(parts) >= 4 and parts[0] in ("mod", "dep", "=>"):
            modules += 1
            if (parts[1], parts[2], parts[3]) not in pinned:
                return f"module {parts[1]} {parts[2]} is not the one go.sum pins"
    if path != component.package:
        return f"package is {path!r}, not {component.package!r}"
    if not modules:
        return "no module list in its build info"
    try:
        version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30,
                                 check=False).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"--version: {exc}"
    wanted = component.required_version()
    wanted = wanted if component.version_from == KUBERNETES else wanted.lstrip("v")
    if wanted not in version.split():
        return f"--version says {version.strip()[:80]!r}, not {wanted}"
    return None


def _key_file(bin_dir: Path, name: str) -> Path:
    return bin_dir / f"{name}.key"


def bin_dirs(root: Path, minor: str | None = None) -> dict[str, Path]:
    """Where each binary of a minor lives: etcd is shared by every minor."""
    minor = minor_of(minor)
    return {c.name: (root / "etcd" / "bin" if c is ETCD else root / minor / "bin") for c in components(minor)}


def status(root: Path, minor: str | None = None, version: str | None = None) -> dict[str, str]:
    """Per binary: "ok" (reusable), "adoptable" (no key file but built from this module) or why it must be built."""
    version = version or go_version()
    dirs = bin_dirs(root, minor)
    out = {}
    for component in components(minor):
        bin_dir = dirs[component.name]
        binary = bin_dir / component.name
        key_file = _key_file(bin_dir, component.name)
        if not binary.is_file():
            out[component.name] = "missing"
        elif key_file.is_file():
            out[component.name] = "ok" if key_file.read_text().strip() == component.key(version) else "stale"
        else:
            why = built_from(component, binary)
            out[component.name] = "adoptable" if why is None else f"unknown build: {why}"
    return out


def ensure(root: Path, minor: str | None = None, *, log: Callable[[str], None] = print, force: bool = False,
           only: tuple[str, ...] = NAMES) -> dict[str, Path]:
    """Build what is missing or stale (everything with `force`); return the binaries' paths. Logs one line per
    binary: reused, or built in how many seconds with the go command's peak RSS."""
    minor = minor_of(minor)
    dirs = bin_dirs(root, minor)
    version = go_version()
    states = status(root, minor, version)
    for component in components(minor):
        if component.name not in only:
            continue
        bin_dir = dirs[component.name]
        bin_dir.mkdir(parents=True, exist_ok=True)
        state = "force" if force else states[component.name]
        key = component.key(version)
        if state == "ok":
            log(f"{component.name}: reused {bin_dir / component.name} (key {key[:12]})")
            continue
        if state == "adoptable":
            _key_file(bin_dir, component.name).write_text(key + "\n")
            log(f"{component.name}: adopted {bin_dir / component.name}: built from {component.module_dir.name}/"
                f"go.mod with these ldflags (go version -m); key {key[:12]} recorded")
            continue
        seconds, peak_mb = _build(component, bin_dir)
        _key_file(bin_dir, component.name).write_text(key + "\n")
        log(f"{component.name}: built in {seconds:.0f}s ({state}), peak RSS of a go child {peak_mb:.0f} MB, "
            f"{(bin_dir / component.name).stat().st_size / 1e6:.0f} MB")
    return {c.name: dirs[c.name] / c.name for c in components(minor) if c.name in only}


def _build(component: Component, bin_dir: Path) -> tuple[float, float]:
    tmp = bin_dir / f".{component.name}.partial"
    argv = ["nice", "-n", "10", _go(), "build", "-trimpath", "-ldflags", component.ldflags(), "-o", str(tmp),
            component.package]
    started = time.monotonic()
    done = subprocess.run(argv, cwd=component.module_dir, env=go_env(), capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise BuildError(f"{component.name}: go build exited {done.returncode} after {seconds:.0f}s:\n{tail}")
    tmp.replace(bin_dir / component.name)  # atomic: a concurrent `up` never sees half a binary
    # ru_maxrss of the children is the largest single child (compile or link), in KiB on Linux
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return seconds, peak_mb
