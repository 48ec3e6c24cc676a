"""The Dockerfile cannot be built here (no container engine); these checks parse it and pin the
properties the chart relies on: multi-stage, slim base, every packaged module copied, non-root
user equal to the chart's runAsUser, entrypoint `gpuclaim`."""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib

import pytest
import yaml
from chart_helpers import CHART, REPO

DOCKERFILE = REPO / "Dockerfile"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not pending, "dangling line continuation"
    return out


@pytest.fixture(scope="module")
def stages() -> list[list[tuple[str, str]]]:
    parsed = instructions(DOCKERFILE.read_text())
    assert parsed[0][0] == "ARG"
    result: list[list[tuple[str, str]]] = []
    for ins in parsed:
        if ins[0] == "FROM":
            result.append([])
        if result:
            result[-1].append(ins)
    return result


def test_it_is_a_multi_stage_build_on_a_slim_python_3_11_base(stages: list[list[tuple[str, str]]]) -> None:
    assert len(stages) >= 2
    default_base = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", DOCKERFILE.read_text(), re.MULTILINE)
    assert default_base and re.fullmatch(r"python:3\.11(\.\d+)?-slim(-\w+)?", default_base.group(1))
    assert all(stage[0][1].startswith("${PYTHON_IMAGE}") for stage in stages)
    # The runtime stage copies only the built venv from the build stage.
    copies = [args for ins, args in stages[-1] if ins == "COPY"]
    assert copies == ["--from=build /opt/gpuclaim /opt/gpuclaim"]
    assert not [args for ins, args in stages[-1] if ins == "RUN"]


def test_the_runtime_user_is_non_root_and_matches_the_chart(stages: list[list[tuple[str, str]]]) -> None:
    (user,) = [args for ins, args in stages[-1] if ins == "USER"]
    uid, _, gid = user.partition(":")
    assert int(uid) > 0 and int(gid) > 0
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert (values["securityContext"]["runAsUser"], values["securityContext"]["runAsGroup"]) == (int(uid), int(gid))


def test_the_entrypoint_is_the_gpuclaim_console_script(stages: list[list[tuple[str, str]]]) -> None:
    (entry,) = [args for ins, args in stages[-1] if ins == "ENTRYPOINT"]
    assert json.loads(entry) == ["gpuclaim"]  # exec form: signals reach the server directly
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert "gpuclaim" in project["scripts"]


def test_every_package_setuptools_packages_is_copied_and_not_dockerignored(stages: list[list[tuple[str, str]]]) -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    includes = config["tool"]["setuptools"]["packages"]["find"]["include"]
    top_level = sorted({pattern.rstrip("*").rstrip(".") for pattern in includes})
    copied = {args.split()[0].rstrip("/") for ins, args in stages[0] if ins == "COPY"}
    assert set(top_level) <= copied, f"not copied: {set(top_level) - copied}"
    assert {"pyproject.toml", "README.md"} <= {
        part for ins, args in stages[0] if ins == "COPY" for part in args.split()[:-1]
    }
    ignored = [p for p in (REPO / ".dockerignore").read_text().splitlines() if p and not p.startswith("#")]
    for src in copied | {"pyproject.toml", "README.md"}:
        assert not any(fnmatch.fnmatch(src, pattern) for pattern in ignored), src
        assert (REPO / src).exists(), src
    # Version control and test trees stay out of the build context.
    assert {".git", "tests", ".venv"} <= set(ignored)


def test_the_build_stage_installs_the_project_wheel_offline_into_a_venv(stages: list[list[tuple[str, str]]]) -> None:
    runs = " ".join(args for ins, args in stages[0] if ins == "RUN")
    assert "pip wheel --wheel-dir /wheels ." in runs
    assert "--no-index --find-links /wheels gpuclaim" in runs
    assert "compileall" in runs  # the runtime root filesystem is read-only


def test_chart_image_defaults_follow_the_chart_app_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert chart["appVersion"] == project["version"]


def test_parser_rejects_a_dangling_continuation() -> None:
    with pytest.raises(AssertionError):
        instructions("FROM x\nRUN a \\")


def test_parser_joins_continuations() -> None:
    assert instructions("FROM x AS b\n# c\nRUN a \\\n  && b\n") == [("FROM", "x AS b"), ("RUN", "a  && b")]
