"""Who may call a server's main site, once its TLS handshake required a client certificate (mutual TLS).

The handshake itself refuses a caller without a certificate the configured CA signed
(`CertReloader.require_client_certificates`), so nothing of such a caller's bytes reaches the HTTP parser. This
middleware adds the names check: with `allowedNames`, the certificate's subject CN or a DNS SAN must be one of them,
else 403 before the handler (or the body) is touched.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Middleware

from gpuclaim.certs import material
from gpuclaim.certs.files import CertReloader
from gpuclaim.dra.config import ClientAuthConfig

CLIENT_AUTH = web.AppKey("gpuclaim.serving.client_auth", ClientAuthConfig)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def certificate_names(request: web.Request) -> set[str] | None:
    """The verified peer certificate's subject CNs and DNS SANs; None when the connection carries none."""
    transport = request.transport
    cert = transport.get_extra_info("peercert") if transport is not None else None
    if not cert:
        return None
    names = {value for rdn in cert.get("subject", ()) for key, value in rdn if key == "commonName"}
    return names | {value for kind, value in cert.get("subjectAltName", ()) if kind == "DNS"}


def refusal(request: web.Request, auth: ClientAuthConfig, *, section: str) -> tuple[int, str] | None:
    """(status, reason) when the caller may not call, None when it may. `section` names the config keys."""
    if not auth.ca_file:
        return None
    names = certificate_names(request)
    if names is None:  # unreachable behind a CERT_REQUIRED handshake; kept so a plain site never serves openly
        return 401, f"a client certificate signed by {section}.clientAuth.caFile is required"
    if auth.allowed_names and not names & set(auth.allowed_names):
        return 403, f"the client certificate names none of {section}.clientAuth.allowedNames"
    return None


def middleware(section: str) -> Middleware:
    """Refuse callers `refusal` refuses (the app's `CLIENT_AUTH`), before any handler runs."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        refused = refusal(request, request.app[CLIENT_AUTH], section=section)
        if refused is not None:
            return web.Response(status=refused[0], text=refused[1] + "\n")
        return await handler(request)

    return check


def install(app: web.Application, auth: ClientAuthConfig, reloader: CertReloader | None, *, section: str) -> None:
    """Turn on mutual TLS for `app`'s main site (the handshake requires a certificate `auth.caFile` signed, the
    reloader keeps that CA current) and the names check. ValueError naming the keys when it cannot be done: a
    server told to authenticate its callers never serves them unauthenticated."""
    if not auth.ca_file:
        return
    if reloader is None:
        raise ValueError(f"{section}.clientAuth.caFile needs TLS: give {section}.tls.certFile/keyFile "
                         "(or --tls-cert/--tls-key)")
    try:
        reloader.require_client_certificates(Path(auth.ca_file))
    except (OSError, material.MaterialError, ssl.SSLError) as exc:
        raise ValueError(f"{section}.clientAuth.caFile: no usable CA bundle: {exc}") from None
    app[CLIENT_AUTH] = auth
    app.middlewares.append(middleware(section))
