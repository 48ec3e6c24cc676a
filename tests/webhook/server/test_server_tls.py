"""The admission endpoints over TLS as kube-apiserver reaches them: the certificate files are rotated during a
stream of keep-alive and new-connection reviews with zero failed requests; TLS 1.1 is refused."""

from __future__ import annotations

import asyncio
import ssl
import warnings
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import orjson
import pytest
from aiohttp import web
from server_helpers import StandInChecks, make_config, pod_review, reloader_for, start

from gpuclaim.certs import client_context, files, material, selfsigned
from gpuclaim.double import tls as selfsigned_files
from gpuclaim.webhook import app

NAMES = selfsigned.Names.build(["localhost"], ["127.0.0.1"])


def _issue(ca: material.KeyPair) -> material.KeyPair:
    return selfsigned.issue_serving(ca=ca, names=NAMES, now=datetime.now(UTC))


async def test_rotating_the_certificate_files_fails_no_request(tmp_path: Path) -> None:
    ca = selfsigned.issue_ca(now=datetime.now(UTC))
    first = _issue(ca)
    files.write_dir(tmp_path, {"tls.crt": first.cert_pem, "tls.key": first.key_pem}, private=frozenset({"tls.key"}))
    reloader = files.reloading_server_context(cert_file=tmp_path / "tls.crt", key_file=tmp_path / "tls.key",
                                              interval=0.05)
    application = app.create_app(make_config(), checks=StandInChecks(), reloader=reloader)
    runner, url = await start(application)
    context = client_context(ca_pem=material.cert_pem(ca.cert))
    answered: list[int] = []
    failures: list[str] = []
    stop = asyncio.Event()

    async def stream(session: aiohttp.ClientSession) -> None:
        while not stop.is_set():
            try:
                async with session.post(url + "/mutate", data=orjson.dumps(pod_review()),
                                        headers={"Content-Type": "application/json"}) as response:
                    body = orjson.loads(await response.read())
                    assert response.status == 200 and body["response"]["allowed"] is True
                    answered.append(1)
            except (aiohttp.ClientError, AssertionError, ssl.SSLError) as exc:
                failures.append(repr(exc))

    keep_alive = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context))
    fresh = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context, force_close=True))
    try:
        tasks = [asyncio.create_task(stream(keep_alive)) for _ in range(3)] + [asyncio.create_task(stream(fresh))]
        served = set()
        for _ in range(3):
            await asyncio.sleep(0.3)
            pair = _issue(ca)
            files.write_dir(tmp_path, {"tls.crt": pair.cert_pem, "tls.key": pair.key_pem},
                            private=frozenset({"tls.key"}))
            served.add(pair.cert_pem)
        await asyncio.sleep(0.3)
        stop.set()
        await asyncio.gather(*tasks)
    finally:
        await keep_alive.close()
        await fresh.close()
        await runner.cleanup()
    assert failures == [] and len(answered) > 50
    assert reloader.reloads == 4  # the first load and three rotations


def _tls11_client(ca_pem: bytes) -> ssl.SSLContext:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.load_verify_locations(cadata=ca_pem.decode())
        context.set_ciphers("DEFAULT:@SECLEVEL=0")  # let this client offer TLS 1.1 at all
        context.minimum_version = ssl.TLSVersion.TLSv1
        context.maximum_version = ssl.TLSVersion.TLSv1_1
    return context


async def _post(url: str, context: ssl.SSLContext) -> int:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session, \
            session.post(url + "/mutate", data=orjson.dumps(pod_review()),
                         headers={"Content-Type": "application/json"}) as response:
        return response.status


async def test_a_tls_1_1_client_is_refused(tls_files: selfsigned_files.TlsFiles) -> None:
    application = app.create_app(make_config(), checks=StandInChecks(), reloader=reloader_for(tls_files))
    runner, url = await start(application)
    try:
        with pytest.raises(aiohttp.ClientConnectorError):
            await _post(url, _tls11_client(tls_files.ca_pem))
        assert await _post(url, client_context(ca_pem=tls_files.ca_pem)) == 200
    finally:
        await runner.cleanup()
    # control: a server that allows TLS 1.1 is reachable by the same client on this OpenSSL, so the refusal
    # above is the webhook's minimum version and not the client's own limits
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        permissive = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        permissive.set_ciphers("DEFAULT:@SECLEVEL=0")
        permissive.minimum_version = ssl.TLSVersion.TLSv1
    permissive.load_cert_chain(tls_files.cert_path, tls_files.key_path)
    control_app = app.create_app(make_config(), checks=StandInChecks())
    control_runner = web.AppRunner(control_app, handle_signals=False)
    await control_runner.setup()
    site = web.TCPSite(control_runner, "127.0.0.1", 0, ssl_context=permissive)
    await site.start()
    try:
        try:
            status = await _post(f"https://127.0.0.1:{site.port}", _tls11_client(tls_files.ca_pem))
        except aiohttp.ClientConnectorError as exc:
            pytest.skip(f"this OpenSSL cannot speak TLS 1.1 at all, so the refusal proves nothing: {exc}")
        assert status == 200
    finally:
        await control_runner.cleanup()
