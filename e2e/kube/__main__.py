"""`python -m e2e.kube build|up|down|demo`: see e2e/kube/__init__.py and docs/dev/real-control-plane.md."""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import time
from pathlib import Path

from e2e.kube import build


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def cmd_build(args: argparse.Namespace) -> int:
    started = time.monotonic()
    paths: list[Path] = []
    try:
        # `build` alone takes a list (1.37,1.35: what the realkube suite runs on), built one minor after the other
        for minor in (args.kubernetes_version or build.DEFAULT_MINOR).split(","):
            binaries = build.ensure(build.cache_dir(args.cache_dir), minor, log=_log, force=args.force)
            paths += [path for path in binaries.values() if path not in paths]
    except build.BuildError as exc:
        print(f"e2e.kube build: {exc}", file=sys.stderr)
        return 1
    _log(f"build: {time.monotonic() - started:.0f}s in all")
    for path in paths:
        print(path)
    return 0


def _binaries(args: argparse.Namespace) -> dict[str, Path]:
    return build.ensure(build.cache_dir(args.cache_dir), args.kubernetes_version, log=_log)


def cmd_up(args: argparse.Namespace) -> int:
    from e2e.kube.cluster import PlaneError
    from e2e.kube.stack import Stack, default_run_dir

    run = Path(args.run_dir) if args.run_dir else default_run_dir()
    try:
        binaries = _binaries(args)
        # the fleet page on (docs/fleet.md): its URL is printed below; sign in with `kubectl create token`
        stack = Stack.start(run, binaries, nodes=args.nodes, values={"config": {"fleet": {"listen": "0.0.0.0:8890"}}})
    except (build.BuildError, PlaneError, TimeoutError) as exc:
        print(f"e2e.kube up: {exc}", file=sys.stderr)
        return 1
    stack.save()
    print(stack.plane.kubeconfig_path(), flush=True)
    _log(f"up: {len(stack.fleet.nodes)} nodes; {stack.timings}")
    for name, proc in stack.procs().items():
        _log(f"  {name}: pid {proc.pid}, log {proc.log}")
    if stack.gpuclaim.fleet_url:
        _log(f"  fleet page: {stack.gpuclaim.fleet_url} (CA {stack.gpuclaim.tls / 'ca.crt'}; sign in with a token of "
             "an account that may list pods, e.g. `kubectl create token`)")
    if args.detach:
        if args.owner_pid:
            _watch_owner(run, args.owner_pid)
        _log(f"detached: `python -m e2e.kube down{' --run-dir ' + str(run) if args.run_dir else ''}` stops it")
        return 0
    stopping: list[int] = []
    dead: list[str] = []

    def on_signal(signum: int, _frame: object) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    _log("running; Ctrl-C stops everything")
    while not stopping:
        dead = [n for n, p in stack.procs().items() if not p.alive()]
        if dead:
            _log(f"{', '.join(dead)} exited: stopping")
            break
        time.sleep(0.5)
    stack.stop()
    Stack.down(run)
    return 0 if not dead else 1


def _watch_owner(run: Path, owner: int) -> None:
    """A detached watchdog (`down --after-pid`): when `owner` ends without calling `down` (a test session killed
    before its teardown), it stops the cluster anyway."""
    import os
    import subprocess

    with open(run / "logs" / "watchdog.log", "ab") as log:
        subprocess.Popen([sys.executable, "-m", "e2e.kube", "down", "--run-dir", str(run), "--after-pid", str(owner)],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                         cwd=Path(__file__).resolve().parents[2], env={**os.environ})


def _wait_gone(pid: int, state: Path) -> bool:
    """True once `pid` has exited; False if the state file went first (an explicit `down` did the work)."""
    import os

    while state.exists():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(1)
    return False


def cmd_down(args: argparse.Namespace) -> int:
    from e2e.kube.stack import Stack, default_run_dir

    run = Path(args.run_dir) if args.run_dir else default_run_dir()
    if args.after_pid and not _wait_gone(args.after_pid, run / "state.json"):
        return 0
    stopped = Stack.down(run)
    _log(f"down: stopped {', '.join(stopped) or 'nothing (no running cluster recorded in ' + str(run) + ')'}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    import orjson

    from e2e.kube import demo
    from e2e.kube.api import Api
    from e2e.kube.cluster import PlaneError
    from e2e.kube.stack import Stack, default_run_dir, running_state

    run = Path(args.run_dir) if args.run_dir else default_run_dir()
    state = running_state(run)
    stack = None
    try:
        if state is None:  # build and start what is missing; stopped again at the end
            stack = Stack.start(run, _binaries(args))
            _log(f"started a cluster for the demo in {stack.timings['total']:.0f}s")
            api = stack.plane.api()
        else:
            _log(f"using the running cluster in {run}")
            api = Api(state["server"], str(run / "pki" / "ca.crt"), (run / "pki" / "admin.token").read_text().strip())
        try:
            report = demo.run(api, run / "gpuclaim-config.yaml")
        finally:
            api.close()
    except (build.BuildError, PlaneError, TimeoutError) as exc:
        print(f"e2e.kube demo: {exc}", file=sys.stderr)
        return 1
    finally:
        if stack is not None:
            stack.stop()
            shutil.rmtree(run, ignore_errors=True)
    if args.output == "json":
        sys.stdout.buffer.write(orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        print(demo.text(report))
    return 0 if report["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.kube")
    parser.add_argument("--cache-dir", help="where the binaries live (default $GPUCLAIM_KUBE_CACHE or "
                                            "~/.cache/gpuclaim/kube)")
    version = argparse.ArgumentParser(add_help=False)
    version.add_argument("--kubernetes-version", metavar="X.Y",
                         help=f"the Kubernetes minor to build and run: {', '.join(build.MINORS)} "
                              f"(default {build.DEFAULT_MINOR}, the newest)")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("build", help="build (or reuse) etcd, the three control-plane binaries and kubectl")
    p.add_argument("--kubernetes-version", metavar="X.Y[,X.Y...]",
                   help=f"the Kubernetes minors to build: any of {', '.join(build.MINORS)} "
                        f"(default {build.DEFAULT_MINOR}, the newest)")
    p.add_argument("--force", action="store_true", help="rebuild even when the cached binaries are current")
    p.set_defaults(func=cmd_build)
    p = sub.add_parser("up", parents=[version],
                       help="start the cluster; the admin kubeconfig path is stdout's first line")
    p.add_argument("--nodes", type=int, help="that many fake GPU nodes cloned from the demo fleet (default: the "
                                             "demo fleet, 19 nodes with some GPUs in use)")
    p.add_argument("--detach", action="store_true", help="leave it running; `down` stops it")
    p.add_argument("--run-dir", help="state, logs, certificates (default $GPUCLAIM_KUBE_RUN or "
                                     "$TMPDIR/gpuclaim-kube-$UID)")
    p.add_argument("--owner-pid", type=int, help="with --detach: stop the cluster when this process ends")
    p.set_defaults(func=cmd_up)
    p = sub.add_parser("down", help="stop what a detached `up` started and remove its run directory")
    p.add_argument("--run-dir")
    p.add_argument("--after-pid", type=int, help="first wait until this process has ended (the --owner-pid watchdog)")
    p.set_defaults(func=cmd_down)
    p = sub.add_parser("demo", parents=[version],
                       help="the demo workloads on the real control plane (starts one if none is up)")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")
    p.add_argument("--run-dir")
    p.set_defaults(func=cmd_demo)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
