"""The `gpuclaim` entry point: help lists every subcommand; usage errors exit 2."""

import importlib.util
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from gpuclaim.cli import main
from gpuclaim.commands import COMMANDS

REPO = Path(__file__).resolve().parents[1]


def test_help_lists_every_subcommand() -> None:
    out = subprocess.run([sys.executable, "-m", "gpuclaim", "--help"], capture_output=True, text=True, check=True)
    for name in COMMANDS:
        assert name in out.stdout


def test_no_subcommand_is_a_usage_error() -> None:
    assert main([]) == 2


def test_unknown_subcommand_is_a_usage_error() -> None:
    proc = subprocess.run([sys.executable, "-m", "gpuclaim", "frobnicate"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "invalid choice" in proc.stderr


def test_a_command_imports_only_its_own_module() -> None:
    """`gpuclaim cel` pays for the CEL environment, not for aiohttp or the kubernetes client (as the registry says)."""
    probe = (
        "import sys\n"
        "from gpuclaim.cli import main\n"
        "code = main(['cel', 'device.driver == \"gpu.nvidia.com\"'])\n"
        "heavy = sorted(m for m in ('aiohttp', 'kubernetes', 'gpuclaim.commands.webhook', 'gpuclaim.commands.demo')\n"
        "               if m in sys.modules)\n"
        "print(code, heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "0 []", out.stdout + out.stderr


def test_options_before_the_command_still_select_it() -> None:
    proc = subprocess.run([sys.executable, "-m", "gpuclaim", "--debug", "cel", "--help"],
                          capture_output=True, text=True)
    assert proc.returncode == 0
    assert "--device" in proc.stdout


def test_demo_without_its_extra_names_an_install_command_that_works_from_a_clone(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """gpuclaim is on no package index, so `pip install 'gpuclaim[demo]'` finds nothing: the hint must install the
    extra from the repository itself (an editable install of the clone, run at its root)."""
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "jsonpatch" else real_find_spec(name, *a))
    assert main(["demo"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert err.startswith("gpuclaim demo: needs the demo extra (jsonpatch not installed)")
    argv = shlex.split(err.strip().rpartition(" with: ")[2])
    assert argv[:3] == ["pip", "install", "-e"], argv
    m = re.fullmatch(r"(.+)\[(\w+)\]", argv[3])
    assert m is not None, argv
    with (REPO / m.group(1) / "pyproject.toml").open("rb") as f:
        project = tomllib.load(f)["project"]
    assert project["name"] == "gpuclaim" and m.group(2) in project["optional-dependencies"]
