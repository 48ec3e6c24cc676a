"""`gpuclaim extender` as a real process over HTTPS against the API double, as kube-scheduler calls it; and the
command's refusals (no cluster, bad config, half a TLS pair) with exit 2 and one line."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import ssl
import sys
import time
from pathlib import Path

import aiohttp
import pytest
import yaml

from gpuclaim.cli import main
from gpuclaim.double import tls as selfsigned
from gpuclaim.double.apiserver import RunningDouble

from . import fleet


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_the_server_answers_over_https_once_ready(double: RunningDouble, tmp_path: Path) -> None:
    for obj in (fleet.pairs_node("a"), fleet.pairs_node("b"), *fleet.gpu_classes(),
                fleet.allocated_claim("held", [("a", "gpu-0"), ("a", "gpu-2"), ("a", "gpu-4"), ("a", "gpu-6")])):
        double.store.restore(obj)
    template = fleet.template("two", fleet.tight_or_any(2))
    template["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "gpuclaim"}
    double.store.restore(template)
    tls = selfsigned.issue(tmp_path / "extender-tls")  # the suite's double keeps its own in tmp_path/tls
    port, metrics_port = _free_port(), _free_port()
    env = {**os.environ, "KUBERNETES_SERVICE_HOST": ""}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gpuclaim", "extender", "--kubeconfig", str(double.kubeconfig),
        "--listen", f"127.0.0.1:{port}", "--metrics-listen", f"127.0.0.1:{metrics_port}",
        "--tls-cert", str(tls.cert_path), "--tls-key", str(tls.key_path), env=env)  # fmt: skip
    context = ssl.create_default_context(cafile=str(tls.ca_path))
    base = f"https://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session:
            deadline = time.monotonic() + 30
            while True:
                with contextlib.suppress(aiohttp.ClientError):
                    async with session.get(f"{base}/readyz") as resp:
                        if resp.status == 200:
                            assert "[+]cluster ok" in await resp.text()
                            break
                assert process.returncode is None, "the extender exited"
                assert time.monotonic() < deadline, "not ready in 30 s"
                await asyncio.sleep(0.1)
            args = {"Pod": fleet.pod("two"), "Nodes": None, "NodeNames": ["a", "b"]}
            async with session.post(f"{base}/prioritize", json=args) as resp:
                scores = {e["Host"]: e["Score"] for e in await resp.json()}
            assert scores["b"] > scores["a"] > 0
            async with session.get(f"http://127.0.0.1:{metrics_port}/metrics") as resp:
                text = await resp.text()
            assert 'gpuclaim_extender_requests_total{result="ok",verb="prioritize"} 1.0' in text
            assert "gpuclaim_kube_" in text  # the cluster cache's series share the registry
    finally:
        process.terminate()
        assert await asyncio.wait_for(process.wait(), 30) == 0  # SIGTERM is a clean shutdown


@pytest.mark.parametrize(("setup", "message"), [
    ("no-cluster", "no cluster to watch: kubeconfig"),
    ("bad-config", "--config"),
    ("half-tls", "--tls-cert and --tls-key go together"),
    ("bad-listen", "--listen nope: expected HOST:PORT"),
], ids=["no-cluster", "bad-config", "half-tls", "bad-listen"])  # fmt: skip
def test_the_command_refuses_to_start_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch, setup: str, message: str) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    argv = ["extender", "--kubeconfig", str(tmp_path / "missing-kubeconfig")]
    if setup == "bad-config":
        config = tmp_path / "config.yaml"
        config.write_text(yaml.safe_dump({"extender": {"policy": "tetris"}}))
        argv += ["--config", str(config)]
        message = "extender.policy: must be one of binpack, spread"
    elif setup == "half-tls":
        argv += ["--tls-cert", str(tmp_path / "tls.crt")]
    elif setup == "bad-listen":
        argv += ["--listen", "nope"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert json.dumps(err)
