"""Every command that takes `--config` reads it one way: the same one-line error, exit 2, for each bad file.

Before, a YAML list was taken for "no file" by `lint` (exit 0 with the defaults), refused by `convert` and
`score` with different wording, and the webhook and extender worded their errors differently again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuclaim.cli import main

POD = """apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
  containers:
  - name: c
    image: busybox
    resources: {limits: {nvidia.com/gpu: 1}}
"""


def _argv(command: str, config: Path, tmp_path: Path) -> list[str]:
    pod = tmp_path / "pod.yaml"
    pod.write_text(POD)
    cluster = tmp_path / "cluster"
    cluster.mkdir(exist_ok=True)
    return {
        "lint": ["lint", str(pod), "--config", str(config)],
        "convert": ["convert", "-f", str(pod), "--config", str(config)],
        "score": ["score", "--cluster", str(cluster), "--pod", str(pod), "--config", str(config)],
        "webhook": ["webhook", "--config", str(config)],
        "extender": ["extender", "--config", str(config)],
    }[command]


COMMANDS = ["lint", "convert", "score", "webhook", "extender"]
BAD_FILES = {
    "a-yaml-list": ("- a\n- b\n", "expected a mapping at the top level, got a list"),
    "a-bare-string": ("hello\n", "expected a mapping at the top level, got a string"),
    "not-yaml": ("a: [\n", "not YAML: "),
    "unknown-key": ("webhook: {lisen: ':1'}\n", "1 error: webhook.lisen: unknown key"),
    "wrong-type": ("logging: {level: 3}\n",
                   "1 error: logging.level: must be one of debug, info, warning, error, got int 3"),
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", list(BAD_FILES))
def test_a_bad_config_file_is_the_same_one_line_error_and_exit_2_in_every_command(
        command: str, case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text, expected = BAD_FILES[case]
    config = tmp_path / "config.yaml"
    config.write_text(text)
    assert main(_argv(command, config, tmp_path)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"gpuclaim {command}: --config {config}: {expected}"), err
    assert "\n" not in err


@pytest.mark.parametrize("command", COMMANDS)
def test_a_missing_config_file_is_named(command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.yaml"
    assert main(_argv(command, missing, tmp_path)) == 2
    assert capsys.readouterr().err.strip() == f"gpuclaim {command}: --config {missing}: No such file or directory"


@pytest.mark.parametrize("command", ["lint", "convert"])
def test_an_empty_config_file_is_the_defaults(command: str, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("")
    assert main(_argv(command, config, tmp_path)) in (0, 1)  # ran: findings or not, never a usage error


def test_a_server_flag_error_names_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("logging: {level: info}\n")
    assert main(["webhook", "--config", str(config), "--listen", "nope"]) == 2
    assert capsys.readouterr().err.strip().startswith("gpuclaim webhook: --listen: must be HOST:PORT")
