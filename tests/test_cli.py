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
