"""Issue 14, finding 7: with webhook.clientAuth.caFile, only a caller with a certificate from that CA (and, with
allowedNames, one of those names) reaches /mutate and /validate; kubelet's probes need none."""

from __future__ import annotations

import asyncio
import datetime
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import orjson
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from server_helpers import StandInChecks, pod_review, reloader_for, start

from gpuclaim.double import tls as selfsigned
from gpuclaim.dra.config import load_config
from gpuclaim.webhook import app


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def client_ca(directory: Path) -> tuple[Path, dict[str, tuple[Path, Path]]]:
    """A client CA and two client certificates it signs (CN kube-apiserver, CN intruder)."""
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    until = now + datetime.timedelta(days=1)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name("client CA")).issuer_name(_name("client CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now).not_valid_after(until)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .sign(ca_key, hashes.SHA256()))
    directory.mkdir(parents=True, exist_ok=True)
    ca_path = directory / "client-ca.crt"
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    out = {}
    for cn in ("kube-apiserver", "intruder"):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(ca.subject)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now).not_valid_after(until)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                .sign(ca_key, hashes.SHA256()))
        cert_path, key_path = directory / f"{cn}.crt", directory / f"{cn}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        out[cn] = (cert_path, key_path)
    return ca_path, out


@pytest.fixture
async def guarded(tls_files: selfsigned.TlsFiles, tmp_path: Path
                  ) -> AsyncIterator[tuple[str, dict[str, ssl.SSLContext]]]:
    ca_path, certs = client_ca(tmp_path / "client")
    config = load_config({"webhook": {"clientAuth": {"caFile": str(ca_path), "allowedNames": ["kube-apiserver"]}}})
    application = app.create_app(config, checks=StandInChecks(), reloader=reloader_for(tls_files))
    runner, url = await start(application)
    contexts = {}
    for who in ("none", "kube-apiserver", "intruder"):
        ctx = ssl.create_default_context(cadata=tls_files.ca_pem.decode())
        if who != "none":
            ctx.load_cert_chain(*map(str, certs[who]))
        contexts[who] = ctx
    try:
        yield url, contexts
    finally:
        await runner.cleanup()


async def _post(url: str, ctx: ssl.SSLContext, path: str) -> int:
    async with (aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as session,
                session.post(url + path, data=orjson.dumps(pod_review()),
                             headers={"Content-Type": "application/json"}) as response):
        return response.status


async def test_only_the_apiservers_certificate_reaches_admission(
        guarded: tuple[str, dict[str, ssl.SSLContext]]) -> None:
    url, contexts = guarded
    assert await _post(url, contexts["kube-apiserver"], "/mutate") == 200
    assert await _post(url, contexts["none"], "/mutate") == 401  # a forged review without a certificate
    assert await _post(url, contexts["none"], "/validate") == 401
    assert await _post(url, contexts["intruder"], "/mutate") == 403  # signed, but not an allowed name


async def test_probes_need_no_client_certificate(guarded: tuple[str, dict[str, ssl.SSLContext]]) -> None:
    url, contexts = guarded
    async with (aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=contexts["none"])) as session,
                session.get(url + "/healthz") as response):
        assert response.status == 200


async def test_expect_continue_refuses_a_caller_without_the_certificate_before_the_body(
        guarded: tuple[str, dict[str, ssl.SSLContext]]) -> None:
    """Issue 22, item 7: `Expect: 100-continue` from a caller clientAuth refuses gets 401 at once, not an
    invitation to send its body; the apiserver's certificate gets `100 Continue`."""
    url, contexts = guarded
    host, _, port = url.removeprefix("https://").rpartition(":")
    for who, expected in (("none", b"HTTP/1.1 401 "), ("intruder", b"HTTP/1.1 403 "),
                          ("kube-apiserver", b"HTTP/1.1 100 ")):
        reader, writer = await asyncio.open_connection(host, int(port), ssl=contexts[who],
                                                       server_hostname="localhost")
        try:
            writer.write(b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 1000\r\nExpect: 100-continue\r\n\r\n")
            await writer.drain()
            assert (await asyncio.wait_for(reader.readline(), 5)).startswith(expected), who
        finally:
            writer.close()
