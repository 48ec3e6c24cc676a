"""The extender's mutual TLS (issue 22): with `--client-ca`, only a caller presenting a certificate that CA signed
completes the TLS handshake (kube-scheduler with the `gpuclaim certs --client-name` pair), and with
`extender.clientAuth.allowedNames` only one naming an allowed identity gets an answer (403 else); kubelet's
probes get /healthz and /readyz on the metrics port without a certificate; a CA added to the bundle file is
trusted without a restart. A real `gpuclaim extender` process over TLS against the API double."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import time
from pathlib import Path

import aiohttp
import pytest
import yaml

from gpuclaim.certs import files, material
from gpuclaim.cli import main
from gpuclaim.double.apiserver import RunningDouble

from . import extender_process, fleet

NAME = "gpuclaim-scheduler"


def _certs(out_dir: Path, client_name: str) -> None:
    assert main(["certs", "--out-dir", str(out_dir), "--ip", "127.0.0.1", "--client-name", client_name]) == 0


def _client(ca_dir: Path, pair: tuple[Path, Path] | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca_dir / "ca.crt"))
    if pair is not None:
        context.load_cert_chain(certfile=str(pair[0]), keyfile=str(pair[1]))
    return context


async def _post(context: ssl.SSLContext, url: str, body: object) -> tuple[int, str]:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context, force_close=True)) as session, \
            session.post(url, json=body, timeout=aiohttp.ClientTimeout(total=10)) as resp:
        return resp.status, await resp.text()


async def _refused(context: ssl.SSLContext, url: str) -> bool:
    """True when the TLS layer ended the call: no HTTP status was ever read."""
    try:
        await _post(context, url, {"Pod": fleet.pod("two"), "NodeNames": ["a"]})
    except (aiohttp.ClientError, ssl.SSLError, ConnectionError):
        return True
    return False


async def test_only_the_scheduler_certificate_gets_an_answer(double: RunningDouble, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    extender_process.seed(double)
    ours, foreign, renamed = tmp_path / "ours", tmp_path / "foreign", tmp_path / "renamed"
    _certs(ours, NAME)
    _certs(foreign, NAME)  # another CA: same name, not trusted
    shutil.copytree(ours, renamed)
    _certs(renamed, "intruder")  # our CA, another name
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"extender": {"clientAuth": {"allowedNames": [NAME]}},
                                      "certs": {"reloadIntervalSeconds": 0.2}}))
    scheduler = _client(ours, (ours / "client.crt", ours / "client.key"))
    args = ("--config", str(config), "--client-ca", str(ours / "ca.crt"))
    async with extender_process.running(double, cert=ours / "tls.crt", key=ours / "tls.key", args=args) as extender:
        base = extender.base
        async with aiohttp.ClientSession() as plain:  # kubelet: plain HTTP on the metrics port, no certificate
            await extender.wait_ready(plain, f"{extender.metrics}/readyz")
            async with plain.get(f"{extender.metrics}/healthz") as resp:
                assert resp.status == 200
        status, text = await _post(scheduler, f"{base}/prioritize",
                                   {"Pod": fleet.pod("two"), "Nodes": None, "NodeNames": ["a", "b"]})
        assert status == 200 and '"Host":"a"' in text.replace(" ", "")
        # no certificate, a certificate of another CA, our serving certificate (serverAuth only): no handshake
        assert await _refused(_client(ours, None), f"{base}/prioritize")
        assert await _refused(_client(ours, (foreign / "client.crt", foreign / "client.key")), f"{base}/prioritize")
        assert await _refused(_client(ours, (ours / "tls.crt", ours / "tls.key")), f"{base}/prioritize")
        # the probes' paths are not open on the scheduler port either
        with pytest.raises((aiohttp.ClientError, ssl.SSLError, ConnectionError)):
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=_client(ours, None))) as s, \
                    s.get(f"{base}/readyz") as resp:
                await resp.read()
        # our CA, a name allowedNames does not list: the handshake passes, the call is refused by name
        status, text = await _post(_client(ours, (renamed / "client.crt", renamed / "client.key")),
                                   f"{base}/filter", {"Pod": fleet.pod("two"), "NodeNames": ["a"]})
        assert status == 403 and "extender.clientAuth.allowedNames" in text
        # a CA added to the bundle file is trusted at the next poll, without a restart
        bundle = material.parse_certs((ours / "ca.crt").read_bytes())
        bundle += material.parse_certs((foreign / "ca.crt").read_bytes())
        files.write_atomic(ours / "ca.crt", material.bundle_pem(bundle))
        foreign_client = _client(ours, (foreign / "client.crt", foreign / "client.key"))
        deadline = time.monotonic() + 10
        while await _refused(foreign_client, f"{base}/prioritize"):
            assert time.monotonic() < deadline, "the added CA was not trusted within 10 s"
            await asyncio.sleep(0.2)


@pytest.mark.parametrize(("setup", "message"), [
    ("no-tls", "--client-ca: extender.clientAuth.caFile needs TLS"),
    ("missing-ca", "--client-ca: extender.clientAuth.caFile: no usable CA bundle"),
    ("not-a-ca", "--client-ca: extender.clientAuth.caFile: no usable CA bundle"),
], ids=["no-tls", "missing-ca", "not-a-ca"])  # fmt: skip
def test_a_client_ca_that_cannot_be_used_refuses_to_start(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch, setup: str,
                                                         message: str) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    kubeconfig = tmp_path / "kubeconfig"  # read, never called: the refusal comes first
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    _certs(tmp_path / "tls", NAME)
    tls = ["--tls-cert", str(tmp_path / "tls" / "tls.crt"), "--tls-key", str(tmp_path / "tls" / "tls.key")]
    ca = {"no-tls": tmp_path / "tls" / "ca.crt", "missing-ca": tmp_path / "nope.crt",
          "not-a-ca": tmp_path / "tls" / "client.crt"}[setup]
    argv = ["extender", "--kubeconfig", str(kubeconfig), "--listen", "127.0.0.1:0",
            "--metrics-listen", "127.0.0.1:0", "--client-ca", str(ca), *([] if setup == "no-tls" else tls)]
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]  # before it, at most the log line of the serving certificate loaded
    assert last.startswith("gpuclaim extender: ") and message in last, err


def test_the_scheduler_double_reads_the_client_pair_as_kube_scheduler_does(tmp_path: Path) -> None:
    """The scheduler double's extenders[].tlsConfig takes certFile/keyFile (or certData/keyData, preferred, as
    client-go does); half a pair, bad base64 or a key of another certificate is refused naming the field."""
    import base64

    from gpuclaim.double.scheduler.extenders import ExtenderConfig, ExtenderConfigError

    _certs(tmp_path / "a", NAME)
    _certs(tmp_path / "b", NAME)
    crt, key = tmp_path / "a" / "client.crt", tmp_path / "a" / "client.key"
    base = {"urlPrefix": "https://127.0.0.1:1", "enableHTTPS": True}
    files_given = ExtenderConfig.from_dict({**base, "tlsConfig": {"certFile": str(crt), "keyFile": str(key)}})
    assert files_given.client_pair == (crt.read_bytes(), key.read_bytes())
    data = {"certData": base64.b64encode(crt.read_bytes()).decode(),
            "keyData": base64.b64encode(key.read_bytes()).decode()}
    assert ExtenderConfig.from_dict({**base, "tlsConfig": {**data, "certFile": "/nope"}}).client_pair == \
        files_given.client_pair
    for tls, field in (({"certFile": str(crt)}, "extenders[0].tlsConfig: a client certificate needs both"),
                       ({"certData": "!!", "keyData": "x"}, "extenders[0].tlsConfig.certData: Invalid value"),
                       ({"certFile": str(crt), "keyFile": str(tmp_path / "b" / "client.key")},
                        "extenders[0].tlsConfig: client"),
                       ({"certFile": str(tmp_path / "none"), "keyFile": str(key)}, "extenders[0].tlsConfig.certFile")):
        with pytest.raises(ExtenderConfigError) as refused:
            ExtenderConfig.from_dict({**base, "tlsConfig": tls})
        assert str(refused.value).startswith(field), refused.value
