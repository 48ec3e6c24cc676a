"""The `gpuclaim` entry point: help lists every subcommand; usage errors exit 2."""

import subprocess
import sys

from gpuclaim.cli import main
from gpuclaim.commands import COMMANDS


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
