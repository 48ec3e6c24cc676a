"""CLI plumbing the server commands share (`gpuclaim extender`, `gpuclaim webhook`): their common flags and the
config file read into the typed Config, with one-line errors that name the file.

What stays per command, because the servers differ there: `--kubeconfig` (the extender falls back to
$KUBECONFIG/~/.kube/config, the webhook never does), and how flags meet the file's section.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml

from gpuclaim.exitstatus import UsageError


def add_server_arguments(parser: argparse.ArgumentParser, *, section: str, serves: str) -> None:
    """--config, --listen, --tls-cert, --tls-key, --metrics-listen; `section` names the config file's section the
    flags override, `serves` what the main address serves."""
    parser.add_argument("--config", type=Path, metavar="FILE",
                        help="the gpuclaim config file (YAML); default: built-in")
    parser.add_argument("--listen", metavar="HOST:PORT", help=f"{serves} address (default {section}.listen)")
    parser.add_argument("--tls-cert", type=Path, metavar="FILE",
                        help="serving certificate (PEM), reloaded on change; with --tls-key")
    parser.add_argument("--tls-key", type=Path, metavar="FILE", help="its private key (PEM); with --tls-cert")
    parser.add_argument("--metrics-listen", metavar="HOST:PORT",
                        help=f"plain-HTTP /metrics address (default {section}.metricsListen)")


def read_config_file(path: Path) -> dict[str, Any] | None:
    """The top-level mapping of the YAML file at `path` (None for an empty file); UsageError naming the file."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"--config {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"--config {path}: not YAML: {' '.join(str(exc).split())}") from None
    if data is not None and not isinstance(data, dict):
        raise UsageError(f"--config {path}: expected a mapping at the top level")
    return data


def load_config_file(path: Path | None) -> Any:
    """The typed Config from `--config` (None: defaults); UsageError naming the file and key on problems."""
    from gpuclaim.dra.config import ConfigError, load_config

    if path is None:
        return load_config(None)
    data = read_config_file(path)
    try:
        return load_config(data)
    except ConfigError as exc:
        raise UsageError(f"--config {path}: {exc}") from None
