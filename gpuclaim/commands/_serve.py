"""CLI plumbing the server commands share (`gpuclaim extender`, `gpuclaim webhook`): their common flags. The
config file is read by `gpuclaim.commands._config`, as for every command that takes `--config`.

What stays per command, because the servers differ there: `--kubeconfig` (the extender falls back to
$KUBECONFIG/~/.kube/config, the webhook never does), and how flags meet the file's section.
"""

from __future__ import annotations

import argparse
from pathlib import Path


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
