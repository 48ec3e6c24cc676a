"""`gpuclaim demo [--keep] [-o text|json] [--workdir DIR]`: the whole path on loopback in about 20 seconds.

Starts the Kubernetes API double loaded with a sample GPU fleet built from real ResourceSlices, issues the
certificates with `gpuclaim certs`, runs `gpuclaim webhook` and `gpuclaim extender` over TLS as child processes,
submits legacy GPU workloads through the double's admission chain, schedules them with the scheduler double, and
reports what happened. Every child process is stopped at the end (also on errors, Ctrl-C and SIGTERM) unless
`--keep`, which leaves the stack running and prints how to talk to it. Exit 0 when every check of the report
holds, 1 when one does not, 4 when the stack could not start.
"""

from __future__ import annotations

import argparse
import importlib.util
import shlex
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

import orjson

from gpuclaim.exitstatus import ExitStatus, UsageError


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keep", action="store_true",
                        help="leave the API double, webhook and extender running and print how to reach them")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    parser.add_argument("--workdir", type=Path, metavar="DIR",
                        help="where kubeconfig, certificates and logs go (default: a temporary directory, removed "
                             "at the end unless --keep)")


def _terminate(signum: int, _frame: FrameType | None) -> None:
    # SIGTERM takes the same way out as Ctrl-C, so the finally blocks stop every child process
    raise KeyboardInterrupt(f"signal {signum}")


#: import name -> distribution, for what the `demo` extra adds to the base install
DEMO_EXTRA = {"jsonpatch": "jsonpatch", "kubernetes_validate": "kubernetes-validate", "jsonschema": "jsonschema",
              "referencing": "referencing"}
#: gpuclaim is not on a package index: the extra is installed from a clone of the repository
INSTALL_HINT = "pip install -e '.[demo]'"


def _require_demo_extra() -> None:
    missing = [dist for module, dist in DEMO_EXTRA.items() if importlib.util.find_spec(module) is None]
    if missing:
        raise UsageError(f"needs the demo extra ({', '.join(missing)} not installed); install it from a clone of the "
                         f"repository with: {INSTALL_HINT}")


def run(args: argparse.Namespace) -> int:
    _require_demo_extra()
    from gpuclaim.demo import run_demo
    from gpuclaim.demo.report import render
    from gpuclaim.demo.stack import StackError

    if args.workdir is not None:
        if args.workdir.exists() and not args.workdir.is_dir():
            raise UsageError(f"--workdir: {args.workdir} exists and is not a directory")
        workdir, temporary = args.workdir, False
        workdir.mkdir(parents=True, exist_ok=True)
    else:
        workdir, temporary = Path(tempfile.mkdtemp(prefix="gpuclaim-demo-")), True
    previous = signal.signal(signal.SIGTERM, _terminate)
    print(f"gpuclaim demo: starting the stack in {workdir} ...", file=sys.stderr, flush=True)
    try:
        report, stack = run_demo(workdir, keep=args.keep)
    except StackError as exc:
        print(f"gpuclaim demo: the stack did not start: {exc}", file=sys.stderr)
        return ExitStatus.INTERNAL
    finally:
        signal.signal(signal.SIGTERM, previous)
        if temporary and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    if args.keep:
        report["keep"] = _keep(stack)
    if args.output == "json":
        sys.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        render(report, sys.stdout)
        if args.keep:
            _print_keep(report["keep"])
    return ExitStatus.OK if all(c["ok"] for c in report["checks"]) else ExitStatus.FINDINGS


def _keep(stack: Any) -> dict[str, Any]:
    import yaml

    from gpuclaim.demo import workloads

    ca = stack.workdir / "apiserver-ca.crt"
    ca.write_bytes(stack.api_ca)
    pids = stack.pids()
    stop = stack.workdir / "stop.sh"
    stop.write_text("#!/bin/sh\n# stops the processes `gpuclaim demo --keep` left running\n"
                    f"kill {' '.join(str(p) for p in pids.values())} 2>/dev/null\n")
    stop.chmod(0o755)
    kubeconfig = shlex.quote(str(stack.kubeconfig))
    base = f"{stack.api_url}/api/v1/namespaces/ml-team/pods"
    # the file the create example names, so every line under `Try:` runs as printed (tests/e2e/test_kubectl.py)
    pod_file = stack.workdir / "my-gpu-pod.yaml"
    pod_file.write_text(yaml.safe_dump(workloads.my_gpu_pod(), sort_keys=False))
    pod = shlex.quote(str(pod_file))
    return {
        "kubeconfig": str(stack.kubeconfig),
        "pids": pids,
        "stop": f"sh {shlex.quote(str(stop))}",
        "examples": [
            f"kubectl --kubeconfig {kubeconfig} get pods -n ml-team -o wide",
            f"kubectl --kubeconfig {kubeconfig} get resourceclaims -A",
            f"kubectl --kubeconfig {kubeconfig} create -f {pod}",
            # what the webhook made of it (nothing schedules it: the scheduler double ran inside the demo only)
            f"kubectl --kubeconfig {kubeconfig} get pod my-gpu-pod -n ml-team -o jsonpath='{{.spec.resourceClaims}}'",
            f"curl --cacert {shlex.quote(str(ca))} -H 'Authorization: Bearer double-token' {base}",
            f"curl --cacert {shlex.quote(str(ca))} -H 'Authorization: Bearer double-token' "
            f"{stack.api_url}/apis/resource.k8s.io/v1/resourceclaimtemplates",
        ],
        "logs": str(stack.workdir / "logs"),
        # the fleet page, served by the extender; a browser signs in with a token from the file (docs/fleet.md)
        "fleet": {"url": stack.fleet_url, "tokens": str(stack.fleet_tokens),
                  "ca": str(stack.tls_dir / "ca.crt") if stack.tls_dir else None},
    }


def _print_keep(keep: dict[str, Any]) -> None:
    print()
    print("The stack is still running (--keep):")
    print(f"  kubeconfig: {keep['kubeconfig']}")
    for name, pid in keep["pids"].items():
        print(f"  {name}: pid {pid}")
    print(f"  logs: {keep['logs']}")
    print(f"  fleet page: {keep['fleet']['url']} (sign in with a token from {keep['fleet']['tokens']})")
    print("Try:")
    for example in keep["examples"]:
        print(f"  {example}")
    print(f"Stop it with: {keep['stop']}")
