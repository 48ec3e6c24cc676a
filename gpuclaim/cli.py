"""`gpuclaim` entry point: parse the subcommand, import it lazily, map errors to exit codes."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Iterable, Sequence

from gpuclaim import __version__
from gpuclaim.commands import COMMANDS
from gpuclaim.exitstatus import ExitStatus, UsageError


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on usage errors already; keep its message to one line."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(ExitStatus.USAGE, f"{self.prog}: error: {message}\n")


def _build_parser(configured: Iterable[str] = COMMANDS, prog: str = "gpuclaim") -> tuple[_Parser, dict[str, object]]:
    """The whole parser; only the subcommands in `configured` import their module and get their arguments.

    `main` configures just the one the command line names: importing every command module costs ~150 ms
    (aiohttp, the kubernetes client, the CEL environment) that `gpuclaim cel` or `--version` should not pay.
    The others stay listed with their summaries, so `--help` and "invalid choice" are unchanged.
    """
    parser = _Parser(prog=prog, description="Kubernetes DRA for GPU clusters: webhook and extender.")
    parser.add_argument("--version", action="version", version=f"gpuclaim {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on internal errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    wanted = set(configured)
    modules: dict[str, object] = {}
    for name, cmd in COMMANDS.items():
        sp = sub.add_parser(name, help=cmd.summary, description=cmd.summary)
        if name in wanted:
            module = importlib.import_module(cmd.module)
            module.configure(sp)
            modules[name] = module
    return parser, modules


def _named_command(argv: Sequence[str]) -> list[str]:
    """The subcommand the command line names, if any: the first word that is not a top-level option."""
    for word in argv:
        if word == "--":
            continue
        if not word.startswith("-"):
            return [word] if word in COMMANDS else []
    return []


def main(argv: Sequence[str] | None = None, *, prog: str = "gpuclaim") -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    parser, modules = _build_parser(_named_command(words), prog)
    args = parser.parse_args(words)
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


def kubectl_main() -> int:
    """The `kubectl-gpuclaim` console script: kubectl runs it for `kubectl gpuclaim ...` with the words after
    `gpuclaim`; usage and help then name the command as the user typed it."""
    return main(prog="kubectl gpuclaim")
