"""`gpuclaim extender` as a real process over HTTPS against the API double, as kube-scheduler calls it; and the
command's refusals (no cluster, bad config, half a TLS pair) with exit 2 and one line."""

from __future__ import annotations

import json
import ssl
from pathlib import Path

import aiohttp
import pytest
import yaml

from gpuclaim.cli import main
from gpuclaim.double import tls as selfsigned
from gpuclaim.double.apiserver import RunningDouble

from . import extender_process, fleet


async def test_the_server_answers_over_https_once_ready(double: RunningDouble, tmp_path: Path) -> None:
    extender_process.seed(double, fleet.allocated_claim("held", [("a", "gpu-0"), ("a", "gpu-2"), ("a", "gpu-4"),
                                                                 ("a", "gpu-6")]))
    tls = selfsigned.issue(tmp_path / "extender-tls")  # the suite's double keeps its own in tmp_path/tls
    context = ssl.create_default_context(cafile=str(tls.ca_path))
    async with extender_process.running(double, cert=tls.cert_path, key=tls.key_path) as extender, \
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session:
        await extender.wait_ready(session, f"{extender.base}/readyz")
        args = {"Pod": fleet.pod("two"), "Nodes": None, "NodeNames": ["a", "b"]}
        async with session.post(f"{extender.base}/prioritize", json=args) as resp:
            scores = {e["Host"]: e["Score"] for e in await resp.json()}
        assert scores["b"] > scores["a"] > 0
        async with session.get(f"{extender.metrics}/metrics") as resp:
            text = await resp.text()
        assert 'gpuclaim_extender_requests_total{result="ok",verb="prioritize"} 1.0' in text
        assert "gpuclaim_kube_" in text  # the cluster cache's series share the registry


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
