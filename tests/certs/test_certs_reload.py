"""The reloader: rotation of the files under a stream of HTTPS requests (keep-alive and new
connections) fails nothing and new connections see the new certificate; a half-written or broken
pair never replaces a good one."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import pytest
from certs_helpers import NAMES, https_server, write_pair
from cryptography.hazmat.primitives import serialization

from gpuclaim.certs import context, files, material, selfsigned


def _der(pair: material.KeyPair) -> bytes:
    return pair.cert.public_bytes(serialization.Encoding.DER)


async def _peer_cert(port: int, ctx: ssl.SSLContext) -> bytes:
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
    try:
        return bytes(writer.get_extra_info("ssl_object").getpeercert(binary_form=True))
    finally:
        writer.close()
        await writer.wait_closed()


def _reloader(tmp_path: Path, pair: material.KeyPair, interval: float = 0.02) -> files.CertReloader:
    cert, key = write_pair(tmp_path, pair)
    reloader = files.CertReloader(context.server_context(), cert_file=cert, key_file=key, interval=interval)
    assert reloader.load() is True
    return reloader


async def test_rotation_under_load_fails_no_request_and_new_connections_get_the_new_cert(
    tmp_path: Path, ca: material.KeyPair
) -> None:
    now = datetime.now(UTC)
    ca2 = selfsigned.issue_ca(now=now)  # the last rotation also changes CA, as after a CA switch
    pairs = [selfsigned.issue_serving(ca=ca, names=NAMES, now=now) for _ in range(3)]
    pairs.append(selfsigned.issue_serving(ca=ca2, names=NAMES, now=now))
    reloader = _reloader(tmp_path, pairs[0])
    client_ctx = context.client_context(ca_pem=ca.cert_pem + ca2.cert_pem)
    ok: list[int] = []
    failures: list[BaseException] = []
    stop = asyncio.Event()

    async def keep_alive_worker(url: str, ports: set[str]) -> None:
        conn = aiohttp.TCPConnector(limit=1, ssl=client_ctx)
        async with aiohttp.ClientSession(connector=conn) as s:
            while not stop.is_set():
                try:
                    async with s.get(url) as r:
                        r.raise_for_status()
                        ports.add(r.headers["X-Peer"])
                        ok.append(1)
                except Exception as exc:
                    failures.append(exc)

    async def new_connection_worker(url: str) -> None:
        conn = aiohttp.TCPConnector(force_close=True, ssl=client_ctx)
        async with aiohttp.ClientSession(connector=conn) as s:
            while not stop.is_set():
                try:
                    async with s.get(url) as r:
                        r.raise_for_status()
                        ok.append(1)
                except Exception as exc:
                    failures.append(exc)

    async with https_server(reloader.context) as port:
        url = f"https://127.0.0.1:{port}/"
        watcher = asyncio.create_task(reloader.run())
        keep_alive_ports: list[set[str]] = [set() for _ in range(2)]
        workers = [asyncio.create_task(keep_alive_worker(url, p)) for p in keep_alive_ports]
        workers += [asyncio.create_task(new_connection_worker(url)) for _ in range(2)]
        try:
            for i, pair in enumerate(pairs[1:]):
                await asyncio.sleep(0.2)
                # one file, several polls, then the other: a mismatched pair sits on disk in between,
                # in both orders (a new cert next to the old key is the one that breaks a naive reload)
                first, second = (("tls.crt", pair.cert_pem), ("tls.key", pair.key_pem))[:: 1 if i % 2 else -1]
                files.write_atomic(tmp_path / first[0], first[1])
                await asyncio.sleep(0.1)
                files.write_atomic(tmp_path / second[0], second[1])
                for _ in range(100):
                    if reloader.fingerprint == material.fingerprint(pair.cert):
                        break
                    await asyncio.sleep(0.01)
                assert await _peer_cert(port, client_ctx) == _der(pair)
            await asyncio.sleep(0.2)
        finally:
            stop.set()
            await asyncio.gather(*workers)
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
    assert failures == []
    assert len(ok) > 100
    assert reloader.reloads == len(pairs)
    assert reloader.failures > 0  # the half-written pairs were on disk, polled, and refused
    # the keep-alive connections were never dropped: each stayed on one client port throughout
    assert [len(p) for p in keep_alive_ports] == [1, 1]
    assert reloader.expiry_timestamp() == pairs[-1].not_after.timestamp()


async def test_a_key_that_does_not_match_the_cert_is_refused_and_retried(
    tmp_path: Path, ca: material.KeyPair, serving: material.KeyPair, caplog: pytest.LogCaptureFixture
) -> None:
    reloader = _reloader(tmp_path, serving)
    new = selfsigned.issue_serving(ca=ca, names=NAMES, now=datetime.now(UTC))
    (tmp_path / "tls.crt").write_bytes(new.cert_pem)  # the cert arrived, the key not yet
    with caplog.at_level(logging.WARNING, logger="gpuclaim.certs"):
        assert reloader.load() is False
        assert reloader.load() is False  # polled again: still refused, logged once
    # this reloader's warnings only: in a whole run another test's server may still be logging as it winds down,
    # and a server test that ran before may have left gpuclaim's loggers at INFO ("loaded serving certificate")
    assert [r.getMessage() for r in caplog.records
            if r.name.startswith("gpuclaim.certs") and r.levelno >= logging.WARNING] == [
        "keeping the current serving certificate: serving key does not match the serving certificate "
        "(half-written pair?)"
    ]
    assert reloader.fingerprint == material.fingerprint(serving.cert)
    async with https_server(reloader.context) as port:
        assert await _peer_cert(port, context.client_context(ca_pem=ca.cert_pem)) == _der(serving)
        (tmp_path / "tls.key").write_bytes(new.key_pem)  # the second half lands
        assert reloader.load() is True
        assert await _peer_cert(port, context.client_context(ca_pem=ca.cert_pem)) == _der(new)


@pytest.mark.parametrize(
    ("cert", "key"),
    [(b"garbage", None), (None, b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), (b"", b"")],
    ids=["garbage-cert", "corrupt-key", "empty-files"],
)
async def test_unparseable_files_never_replace_a_good_pair(
    tmp_path: Path, ca: material.KeyPair, serving: material.KeyPair, cert: bytes | None, key: bytes | None
) -> None:
    reloader = _reloader(tmp_path, serving)
    if cert is not None:
        (tmp_path / "tls.crt").write_bytes(cert)
    if key is not None:
        (tmp_path / "tls.key").write_bytes(key)
    assert reloader.load() is False
    assert reloader.failures == 1
    async with https_server(reloader.context) as port:
        assert await _peer_cert(port, context.client_context(ca_pem=ca.cert_pem)) == _der(serving)


async def test_missing_files_keep_the_current_pair(tmp_path: Path, serving: material.KeyPair) -> None:
    reloader = _reloader(tmp_path, serving)
    (tmp_path / "tls.key").unlink()
    assert reloader.load() is False
    assert reloader.loaded and reloader.fingerprint == material.fingerprint(serving.cert)


def test_a_server_without_a_usable_pair_refuses_to_start(tmp_path: Path, ca: material.KeyPair) -> None:
    (tmp_path / "tls.crt").write_bytes(ca.cert_pem)
    (tmp_path / "tls.key").write_bytes(b"")
    reloader = files.CertReloader(context.server_context(), cert_file=tmp_path / "tls.crt",
                                  key_file=tmp_path / "tls.key")
    with pytest.raises(material.MaterialError, match="serving key: not an unencrypted PEM private key"):
        reloader.load()
    assert not reloader.loaded and reloader.expiry_timestamp() == 0.0
    with pytest.raises(FileNotFoundError):
        files.CertReloader(context.server_context(), cert_file=tmp_path / "nope", key_file=tmp_path / "tls.key").load()


def test_unchanged_files_are_not_reloaded(tmp_path: Path, serving: material.KeyPair) -> None:
    reloader = _reloader(tmp_path, serving)
    write_pair(tmp_path, serving)  # rewritten with the same content (a Secret volume resync)
    assert reloader.load() is False
    assert reloader.reloads == 1 and reloader.failures == 0


async def test_a_server_wires_the_reloader_with_cleanup_ctx_and_exports_the_expiry(
    tmp_path: Path, ca: material.KeyPair, serving: material.KeyPair
) -> None:
    from aiohttp import web
    from prometheus_client import CollectorRegistry, Gauge

    cert, key = write_pair(tmp_path, serving)
    reloader = files.reloading_server_context(cert_file=cert, key_file=key, interval=0.02)
    registry = CollectorRegistry()
    Gauge("gpuclaim_certs_expiry_timestamp_seconds", "notAfter of the served certificate",
          registry=registry).set_function(reloader.expiry_timestamp)
    app = web.Application()
    app.cleanup_ctx.append(reloader.cleanup_ctx)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=reloader.context)
    await site.start()
    port = runner.addresses[0][1]
    try:
        assert registry.get_sample_value("gpuclaim_certs_expiry_timestamp_seconds") == serving.not_after.timestamp()
        new = selfsigned.issue_serving(ca=ca, names=NAMES, now=datetime.now(UTC), validity=timedelta(days=90))
        files.write_dir(tmp_path, {"tls.crt": new.cert_pem, "tls.key": new.key_pem}, private=frozenset({"tls.key"}))
        for _ in range(200):
            if reloader.fingerprint == material.fingerprint(new.cert):
                break
            await asyncio.sleep(0.01)
        assert await _peer_cert(port, context.client_context(ca_pem=ca.cert_pem)) == _der(new)
        assert registry.get_sample_value("gpuclaim_certs_expiry_timestamp_seconds") == new.not_after.timestamp()
    finally:
        await runner.cleanup()
    assert not [t for t in asyncio.all_tasks() if t.get_name() == "gpuclaim-certs-reload"]
