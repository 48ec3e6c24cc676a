"""`python -m e2e.reliability [--long] [--workdir DIR]`: print the suite's figures as one JSON object.

Exit 0 when every check holds, 1 when one does not. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
from pathlib import Path

import orjson

from e2e.reliability.runner import run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.reliability", description=__doc__)
    parser.add_argument("--long", action="store_true", help="the long run (minutes): more chaos traffic and load")
    parser.add_argument("--workdir", type=Path, help="keep logs and certificates here (default: a temp dir)")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="gpuclaim-reliability-"))
    print(f"e2e.reliability: {'long' if args.long else 'short'} run in {workdir}", file=sys.stderr, flush=True)
    try:
        report = asyncio.run(run(workdir, long=args.long))
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    sys.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0 if report.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
