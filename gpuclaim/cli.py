"""`gpuclaim` entry point: parse the subcommand, import it lazily, map errors to exit codes."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from gpuclaim import __version__
from gpuclaim.commands import COMMANDS
from gpuclaim.exitstatus import ExitStatus, UsageError


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on usage errors already; keep its message to one line."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(ExitStatus.USAGE, f"{self.prog}: error: {message}\n")


def _build_parser() -> tuple[_Parser, dict[str, object]]:
    parser = _Parser(prog="gpuclaim", description="Kubernetes DRA for GPU clusters: webhook and extender.")
    parser.add_argument("--version", action="version", version=f"gpuclaim {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on internal errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    modules: dict[str, object] = {}
    for name, cmd in COMMANDS.items():
        sp = sub.add_parser(name, help=cmd.summary, description=cmd.summary)
        module = importlib.import_module(cmd.module)
        module.configure(sp)
        modules[name] = module
    return parser, modules


def main(argv: Sequence[str] | None = None) -> int:
    parser, modules = _build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return ExitStatus.USAGE
    module = modules[args.command]
    try:
        return int(module.run(args))  # type: ignore[attr-defined]
    except UsageError as exc:
        print(f"gpuclaim {args.command}: {exc}", file=sys.stderr)
        return ExitStatus.USAGE
    except KeyboardInterrupt:
        return ExitStatus.INTERRUPTED
    except Exception as exc:
        if args.debug:
            raise
        print(f"gpuclaim {args.command}: internal error: {type(exc).__name__}: {exc} "
              "(run with --debug for the traceback)", file=sys.stderr)
        return ExitStatus.INTERNAL
