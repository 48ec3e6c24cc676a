"""kubectl on `gpuclaim demo --keep`, as a new user meets it: a real kubectl of the newest supported minor (built
from Go modules by `python -m e2e.kube build`, tests/kube_binaries.py), never the one on PATH.

- every `kubectl` line the demo prints under `Try:` runs and exits 0, and docs/demo.md shows exactly those lines;
- every `$ kubectl` line of a console block in docs/demo.md and docs/dev/doubles.md runs in page order and prints
  what the page shows under it (ages masked);
- beyond the pages: client-side apply (create, configure, unchanged), describe and delete work, and what the
  double does not serve is refused by name.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kube_binaries
import orjson
import pytest
import yaml
from kept_demo import kept_demo

from e2e.kube import build
from gpuclaim.double.apiserver import discovery

REPO = Path(__file__).resolve().parents[2]
MINOR = build.DEFAULT_MINOR  # the double claims the newest supported release
PAGES = (REPO / "docs" / "demo.md", REPO / "docs" / "dev" / "doubles.md")
_AGE = re.compile(r"(?<![\w.-])\d+(?:[smhd]\d*[smh]?|y\d*d?)(?![\w.-])")


@pytest.fixture(scope="module")
def kubectl() -> Path:
    return kube_binaries.kubectl(MINOR)


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory, kubectl: Path) -> Iterator[dict[str, Any]]:
    """`gpuclaim demo --keep -o json`: its report (with `keep`) and workdir; its processes are stopped after."""
    workdir = tmp_path_factory.mktemp("kept")
    with kept_demo(workdir, timeout=120) as report:
        yield {"report": report, "workdir": workdir, "cache": tmp_path_factory.mktemp("kubectl-home")}


def run(kubectl: Path, kept: dict[str, Any], line: str) -> subprocess.CompletedProcess[str]:
    """One printed `kubectl ...` line, with the built kubectl and a private cache and home."""
    argv = shlex.split(line)
    assert argv[0] == "kubectl", line
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env.update({"HOME": str(kept["cache"]), "KUBECACHEDIR": str(kept["cache"] / "cache")})
    return subprocess.run([str(kubectl), *argv[1:]], capture_output=True, text=True, timeout=60, env=env,
                          cwd=kept["workdir"], check=False)


def try_lines(kept: dict[str, Any]) -> list[str]:
    return [e for e in kept["report"]["keep"]["examples"] if e.startswith("kubectl ")]


def page_runs(page: Path) -> Iterator[tuple[int, str, str]]:
    """(line, command, shown output) for every `$ kubectl` line of the page's console blocks."""
    lines = page.read_text(encoding="utf-8").splitlines()
    in_console = False
    for i, text in enumerate(lines):
        if text.startswith("```"):
            in_console = not in_console and text.strip() == "```console"
            continue
        if in_console and text.startswith("$ kubectl "):
            shown = []
            for later in lines[i + 1:]:
                if later.startswith(("$ ", "```")):
                    break
                shown.append(later)
            yield i + 1, text[2:], "\n".join(shown)


def _mask(text: str, workdir: Path) -> str:
    """Ages vary, and so does the padding of the columns after them."""
    masked = _AGE.sub("<age>", text.replace(str(workdir), "<workdir>"))
    return "\n".join(re.sub(r" +", " ", line).rstrip() for line in masked.rstrip().splitlines())


def test_the_kubectl_under_test_is_the_release_the_double_claims(kubectl: Path) -> None:
    done = subprocess.run([str(kubectl), "version", "--client", "-o", "json"], capture_output=True, text=True,
                          timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["clientVersion"]["gitVersion"] == build.release(MINOR)
    assert build.release(MINOR) == discovery.KUBERNETES_VERSION


@pytest.fixture(scope="module")
def tried(kubectl: Path, kept: dict[str, Any]) -> dict[str, subprocess.CompletedProcess[str]]:
    """Each `Try:` line run once, in the printed order (the create changes what a later get would show)."""
    return {line: run(kubectl, kept, line) for line in try_lines(kept)}


def test_every_try_line_runs(kept: dict[str, Any], tried: dict[str, subprocess.CompletedProcess[str]]) -> None:
    assert len(tried) == 4
    outputs = {}
    for line, done in tried.items():
        assert done.returncode == 0, f"{line}\n{done.stderr}"
        outputs.setdefault(shlex.split(line)[3], done.stdout)
    pods = [w for w in kept["report"]["workloads"] if w["kind"] == "Pod" and w["namespace"] == "ml-team"
            and w["admission"] != "denied"]
    wide = outputs["get"].splitlines()  # the first `get` lists the pods; -o wide adds the NODE column
    assert wide[0].split()[:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    assert {r.split()[0]: r.split()[6] for r in wide[1:]} == {w["name"]: w["scheduling"]["node"] for w in pods}
    assert outputs["create"].strip() == "pod/my-gpu-pod created"


def test_demo_md_shows_exactly_the_try_lines_and_what_they_print(
        kept: dict[str, Any], tried: dict[str, subprocess.CompletedProcess[str]]) -> None:
    workdir = kept["workdir"]
    shown = {cmd: out for _, cmd, out in page_runs(PAGES[0])}
    assert list(shown) == [line.replace(str(workdir), "<workdir>") for line in tried]
    for line, done in tried.items():
        command = line.replace(str(workdir), "<workdir>")
        assert _mask(done.stderr + done.stdout, workdir) == _mask(shown[command], workdir), command


def test_the_kubectl_lines_of_doubles_md_print_what_it_shows(
        kubectl: Path, kept: dict[str, Any], tried: dict[str, subprocess.CompletedProcess[str]]) -> None:
    workdir = kept["workdir"]
    runs = list(page_runs(PAGES[1]))
    assert runs, "docs/dev/doubles.md shows what kubectl meets on the double"
    for number, command, shown in runs:
        done = run(kubectl, kept, command.replace("<workdir>", str(workdir)))
        where = f"docs/dev/doubles.md:{number}: {command}"
        assert _mask(done.stderr + done.stdout, workdir) == _mask(shown, workdir), where


def _apply(kubectl: Path, kept: dict[str, Any], manifest: Path) -> subprocess.CompletedProcess[str]:
    return run(kubectl, kept, f"kubectl --kubeconfig {kept['workdir']}/apiserver/kubeconfig apply -f {manifest}")


def test_client_side_apply_creates_configures_and_leaves_unchanged(kubectl: Path, kept: dict[str, Any]) -> None:
    manifest = kept["workdir"] / "settings.yaml"
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "ml-team"},
              "data": {"batch": "8"}}
    manifest.write_text(yaml.safe_dump(config))
    assert _apply(kubectl, kept, manifest).stdout.strip() == "configmap/settings created"
    config["data"] = {"batch": "16", "epochs": "3"}
    manifest.write_text(yaml.safe_dump(config))
    done = _apply(kubectl, kept, manifest)  # a strategic merge patch
    assert (done.returncode, done.stdout.strip()) == (0, "configmap/settings configured"), done.stderr
    assert _apply(kubectl, kept, manifest).stdout.strip() == "configmap/settings unchanged"
    base = f"kubectl --kubeconfig {kept['workdir']}/apiserver/kubeconfig"
    described = run(kubectl, kept, f"{base} describe configmap settings -n ml-team")
    assert described.returncode == 0 and "epochs" in described.stdout, described.stderr
    deleted = run(kubectl, kept, f"{base} delete -f {manifest}")
    assert deleted.stdout.strip() == 'configmap "settings" deleted from ml-team namespace', deleted.stderr


def test_unknown_fields_are_refused_by_the_server_with_their_name(kubectl: Path, kept: dict[str, Any]) -> None:
    manifest = kept["workdir"] / "typo.yaml"
    manifest.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap",
                                        "metadata": {"name": "typo", "namespace": "ml-team"}, "dta": {"a": "b"}}))
    done = _apply(kubectl, kept, manifest)
    assert done.returncode == 1
    assert "'dta' was unexpected" in done.stderr


def test_describe_shows_where_a_demo_pod_landed(kubectl: Path, kept: dict[str, Any]) -> None:
    landed = next(w for w in kept["report"]["workloads"] if w["key"] == "train-4gpu")["scheduling"]["node"]
    base = f"kubectl --kubeconfig {kept['workdir']}/apiserver/kubeconfig"
    done = run(kubectl, kept, f"{base} describe pod train-4gpu -n ml-team")
    assert done.returncode == 0, done.stderr
    fields = dict(re.findall(r"^(Node|Status|Namespace):\s+(\S+)", done.stdout, flags=re.MULTILINE))
    assert fields == {"Node": f"{landed}/", "Status": "Pending", "Namespace": "ml-team"}  # node/hostIP: no kubelet
