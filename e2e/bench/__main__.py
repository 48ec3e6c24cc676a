"""`python -m e2e.bench NAME [--quick]`: run one benchmark, print one JSON object on stdout.

Each benchmark is a module `e2e.bench.<name>` exposing `run(args) -> dict`; progress goes
to stderr. Benchmarks never run under plain pytest.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import sys
from importlib import metadata

import orjson

BENCHMARKS = ("cel", "cache", "convert", "validate", "webhook", "extender", "hostile", "scheduler", "fleet")


SCHEDULER_SHAPES = ("empty", "half", "full")  # e2e.bench.scheduler.SHAPES; not imported, it needs e2e.kube


def _shapes(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in SCHEDULER_SHAPES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown shape {', '.join(unknown) or repr(text)}: "
                                         f"choose from {', '.join(SCHEDULER_SHAPES)}")
    return tuple(name for name in SCHEDULER_SHAPES if name in names)  # the fill only grows: in this order


def _environment() -> dict[str, object]:
    def version(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    return {
        "python": platform.python_version(),
        "cel_python": version("cel-python"),
        "aiohttp": version("aiohttp"),
        "cpu": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
    }


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.bench")
    parser.add_argument("name", choices=BENCHMARKS)
    parser.add_argument("--quick", action="store_true", help="reduced size, finishes in under a minute")
    parser.add_argument("--kubernetes-version", metavar="X.Y",
                        help="for the benchmarks on a real control plane (scheduler): the minor to build and run "
                             "(default: the newest e2e.kube builds)")
    parser.add_argument("--shapes", metavar="S[,S...]", type=_shapes, default=SCHEDULER_SHAPES,
                        help="for the scheduler benchmark: the cluster shapes to measure, any of "
                             f"{', '.join(SCHEDULER_SHAPES)} (default: all; create latency is measured in every run)")
    parser.add_argument("--pairs", metavar="N", type=_positive, default=3,
                        help="for the scheduler benchmark: runs without and with the extender per shape, in "
                             "alternating order; the ratio is the median of the pairs' (default: 3)")
    args = parser.parse_args(argv)
    try:
        module = importlib.import_module(f"e2e.bench.{args.name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"e2e.bench.{args.name}":
            print(f"benchmark {args.name!r} is not built yet", file=sys.stderr)
            return 2
        raise
    figures = module.run(args)
    figures.setdefault("benchmark", args.name)
    figures.setdefault("quick", args.quick)
    figures["environment"] = _environment()
    sys.stdout.buffer.write(orjson.dumps(figures, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
