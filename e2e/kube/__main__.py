"""`python -m e2e.kube build|up|down|demo`: see e2e/kube/__init__.py and docs/dev/real-control-plane.md."""

from __future__ import annotations

import argparse
import sys
import time

from e2e.kube import build


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def cmd_build(args: argparse.Namespace) -> int:
    started = time.monotonic()
    try:
        binaries = build.ensure(build.cache_dir(args.cache_dir), log=_log, force=args.force)
    except build.BuildError as exc:
        print(f"e2e.kube build: {exc}", file=sys.stderr)
        return 1
    _log(f"build: {time.monotonic() - started:.0f}s in all")
    for path in binaries.values():
        print(path)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.kube")
    parser.add_argument("--cache-dir", help="where the binaries live (default $GPUCLAIM_KUBE_CACHE or "
                                            "~/.cache/gpuclaim/kube)")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("build", help="build (or reuse) etcd and the three control-plane binaries")
    p.add_argument("--force", action="store_true", help="rebuild even when the cached binaries are current")
    p.set_defaults(func=cmd_build)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
