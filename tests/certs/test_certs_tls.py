"""Real TLS on loopback: a client that trusts only our CA (as kube-apiserver with a caBundle) gets in,
old protocol versions are refused, 1.3 is negotiated when offered, the host name is checked."""

from __future__ import annotations

import asyncio
import ssl
import warnings
from pathlib import Path

import aiohttp
import pytest
from certs_helpers import NOW, https_server, write_pair

from gpuclaim.certs import context, material, selfsigned


async def _get(port: int, ctx: ssl.SSLContext, host: str = "127.0.0.1") -> str:
    async with aiohttp.ClientSession() as s, s.get(f"https://{host}:{port}/", ssl=ctx) as r:
        return await r.text()


async def _handshake(port: int, ctx: ssl.SSLContext, server_hostname: str = "127.0.0.1") -> str:
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname=server_hostname)
    try:
        version = writer.get_extra_info("ssl_object").version()
    finally:
        writer.close()
        await writer.wait_closed()
    return str(version)


async def _refusal(port: int, ctx: ssl.SSLContext) -> BaseException:
    with pytest.raises((ssl.SSLError, ConnectionResetError)) as info:
        await _handshake(port, ctx)
    return info.value


def _is_refusal(exc: BaseException) -> bool:
    """The server answers a version it does not accept with a protocol_version alert; asyncio's server
    transport sometimes closes before the alert is flushed, which the client sees as a reset."""
    return isinstance(exc, ConnectionResetError) or "version" in str(exc).lower() or "protocol" in str(exc).lower()


def _memory_handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> tuple[str | None, str | None]:
    """Run a handshake through memory BIOs: (server error, client error), the exact reasons on both sides."""
    s_in, s_out, c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    srv = server.wrap_bio(s_in, s_out, server_side=True)
    cli = client.wrap_bio(c_in, c_out, server_side=False, server_hostname=None)
    errors: dict[str, str | None] = {"server": None, "client": None}
    done = {"server": False, "client": False}
    for _ in range(10):
        for side, obj in (("client", cli), ("server", srv)):
            if done[side] or errors[side]:
                continue
            try:
                obj.do_handshake()
                done[side] = True
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                pass
            except ssl.SSLError as exc:
                errors[side] = exc.reason or str(exc)
        s_in.write(c_out.read())
        c_in.write(s_out.read())
    return errors["server"], errors["client"]


def _legacy_client(version: ssl.TLSVersion) -> ssl.SSLContext:
    """A client that can only speak `version` (1.0/1.1 need OpenSSL security level 0 to be offered at all)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # setting 1.0/1.1 is deprecated: the point here
        ctx.minimum_version = version
        ctx.maximum_version = version
    return ctx


async def test_a_client_verifying_the_ca_completes_the_handshake_and_prefers_tls13(
    tmp_path: Path, ca: material.KeyPair, serving: material.KeyPair
) -> None:
    cert, key = write_pair(tmp_path, serving)
    server = context.server_context(cert_file=cert, key_file=key)
    async with https_server(server) as port:
        client = context.client_context(ca_pem=ca.cert_pem)
        assert await _get(port, client) == "TLSv1.3"
        # every Service name in the certificate verifies, as kube-apiserver dials <svc>.<ns>.svc
        for name in selfsigned.service_dns_names("gpuclaim-webhook", "gpuclaim"):
            assert await _handshake(port, client, server_hostname=name) == "TLSv1.3"


async def test_a_tls12_only_client_is_served_by_the_default_minimum(
    tmp_path: Path, ca: material.KeyPair, serving: material.KeyPair
) -> None:
    cert, key = write_pair(tmp_path, serving)
    async with https_server(context.server_context(cert_file=cert, key_file=key)) as port:
        client = context.client_context(ca_pem=ca.cert_pem)
        client.maximum_version = ssl.TLSVersion.TLSv1_2
        assert await _handshake(port, client) == "TLSv1.2"


async def test_a_minimum_of_13_refuses_tls12(tmp_path: Path, ca: material.KeyPair, serving: material.KeyPair) -> None:
    cert, key = write_pair(tmp_path, serving)
    server13 = context.server_context(cert_file=cert, key_file=key, min_version="1.3")
    async with https_server(server13) as port:
        client = context.client_context(ca_pem=ca.cert_pem)
        client.maximum_version = ssl.TLSVersion.TLSv1_2
        assert _is_refusal(await _refusal(port, client))
        assert _memory_handshake(server13, client) == ("UNSUPPORTED_PROTOCOL", "TLSV1_ALERT_PROTOCOL_VERSION")
        assert await _handshake(port, context.client_context(ca_pem=ca.cert_pem)) == "TLSv1.3"


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_1, ssl.TLSVersion.TLSv1], ids=["tls1.1", "tls1.0"])
async def test_tls11_and_tls10_clients_are_refused(
    tmp_path: Path, serving: material.KeyPair, version: ssl.TLSVersion
) -> None:
    cert, key = write_pair(tmp_path, serving)
    # control: a server that allows the old version does complete the handshake with this client,
    # so the refusal below is our server's doing, not the client's inability
    permissive = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    permissive.set_ciphers("DEFAULT:@SECLEVEL=0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        permissive.minimum_version = version
    permissive.load_cert_chain(cert, key)
    async with https_server(permissive) as port:
        assert await _handshake(port, _legacy_client(version)) == version.name.replace("_", ".")
    server = context.server_context(cert_file=cert, key_file=key)
    async with https_server(server) as port:
        assert _is_refusal(await _refusal(port, _legacy_client(version)))
    # the same handshake in memory shows the reason on both sides: the server refuses the version
    server_error, client_error = _memory_handshake(server, _legacy_client(version))
    assert server_error == "UNSUPPORTED_PROTOCOL"
    assert client_error == "TLSV1_ALERT_PROTOCOL_VERSION"


async def test_a_client_trusting_another_ca_is_refused(tmp_path: Path, serving: material.KeyPair) -> None:
    cert, key = write_pair(tmp_path, serving)
    other = selfsigned.issue_ca(now=NOW)
    async with https_server(context.server_context(cert_file=cert, key_file=key)) as port:
        with pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer"):
            await _handshake(port, context.client_context(ca_pem=other.cert_pem))


async def test_a_name_not_in_the_certificate_is_refused(
    tmp_path: Path, ca: material.KeyPair, serving: material.KeyPair
) -> None:
    cert, key = write_pair(tmp_path, serving)
    async with https_server(context.server_context(cert_file=cert, key_file=key)) as port:
        with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
            await _handshake(port, context.client_context(ca_pem=ca.cert_pem), server_hostname="evil.example.com")


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1.2", ssl.TLSVersion.TLSv1_2), ("1.3", ssl.TLSVersion.TLSv1_3), ("VersionTLS13", ssl.TLSVersion.TLSv1_3),
     ("TLSv1.2", ssl.TLSVersion.TLSv1_2)],
)
def test_tls_versions_are_read_in_the_usual_spellings(value: str, expected: ssl.TLSVersion) -> None:
    assert context.tls_version(value) == expected


@pytest.mark.parametrize("value", ["1.1", "1.0", "", "tls", "1.4"])
def test_old_or_unknown_tls_versions_are_a_clear_error_naming_the_field(value: str) -> None:
    with pytest.raises(ValueError, match=r"^tls\.minVersion: unsupported TLS version"):
        context.tls_version(value)


async def test_new_tls13_connections_leave_no_session_in_the_server_cache(
    tmp_path: Path, ca: material.KeyPair, serving: material.KeyPair
) -> None:
    # every kept session costs ~2 KB until OpenSSL's 20,480-entry cache is full: RSS that grows with traffic.
    # kube-apiserver speaks 1.3. TLS 1.2 clients still get cached session IDs (Python exposes no switch for
    # OpenSSL's server session cache), which stays bounded by that cache size.
    cert, key = write_pair(tmp_path, serving)
    server = context.server_context(cert_file=cert, key_file=key)
    async with https_server(server) as port:
        client = context.client_context(ca_pem=ca.cert_pem)
        for _ in range(20):
            await _handshake(port, client)
    assert server.session_stats()["accept_good"] == 20
    assert server.session_stats()["number"] == 0
