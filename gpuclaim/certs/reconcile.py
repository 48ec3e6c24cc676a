"""Bring the cluster in line: the certificate Secret per `rotation.plan`, and the caBundle of every
selected webhook configuration. Safe to run concurrently: every write is guarded by resourceVersion
and a conflict restarts from a fresh read."""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gpuclaim.certs import api, material, rotation, secret, selfsigned

log = logging.getLogger("gpuclaim.certs")


class SetupError(Exception):
    """The cluster holds something gpuclaim must not overwrite (exit 2 with this message)."""


@dataclass(frozen=True, slots=True)
class Target:
    namespace: str
    secret_name: str
    names: selfsigned.Names
    webhook_selector: str = api.DEFAULT_SELECTOR
    #: CN of the scheduler's client certificate to keep beside the serving one (None: none)
    client_name: str | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    actions: tuple[str, ...]
    material: rotation.Material
    secret_written: bool
    #: "Kind/name" of the webhook configurations whose caBundle was (or, with check, would be) set
    injected: tuple[str, ...]
    webhook_configurations: int
    overlap_until: datetime | None = None

    @property
    def changed(self) -> bool:
        return bool(self.actions) or self.secret_written or bool(self.injected)


def bundle_fingerprints(ca_bundle_b64: object) -> frozenset[str]:
    """CAs in a webhook's `clientConfig.caBundle` (base64 of PEM in the JSON); garbage reads as none."""
    if not isinstance(ca_bundle_b64, str) or not ca_bundle_b64:
        return frozenset()
    try:
        certs = material.parse_certs(base64.b64decode(ca_bundle_b64, validate=True))
    except (binascii.Error, ValueError):
        return frozenset()
    return frozenset(material.fingerprint(c) for c in certs)


def trusted_everywhere(configs: list[dict[str, Any]]) -> frozenset[str] | None:
    """Fingerprints trusted by every webhook of every configuration; None if there are no webhooks."""
    sets = [
        bundle_fingerprints(((w or {}).get("clientConfig") or {}).get("caBundle"))
        for c in configs
        for w in (c.get("webhooks") or [])
    ]
    if not sets:
        return None
    return frozenset.intersection(*sets)


def _with_bundle(config: dict[str, Any], bundle_b64: str) -> dict[str, Any] | None:
    """The configuration with every webhook's caBundle set, or None if all already carry it."""
    webhooks = config.get("webhooks") or []
    if all(((w or {}).get("clientConfig") or {}).get("caBundle") == bundle_b64 for w in webhooks):
        return None
    new_webhooks = []
    for w in webhooks:
        w = dict(w or {})
        w["clientConfig"] = {**(w.get("clientConfig") or {}), "caBundle": bundle_b64}
        new_webhooks.append(w)
    return {**config, "webhooks": new_webhooks}


async def _list_configs(client: api.CertsApi, selector: str) -> list[tuple[api.WebhookKind, dict[str, Any]]]:
    out: list[tuple[api.WebhookKind, dict[str, Any]]] = []
    for kind in api.WEBHOOK_KINDS:
        out += [(kind, c) for c in await client.list_webhook_configurations(kind, selector)]
    return out


async def _inject(client: api.CertsApi, selector: str, bundle_b64: str, *, attempts: int) -> list[str]:
    done: list[str] = []
    for _ in range(attempts):
        pending = [(k, c, n) for k, c in await _list_configs(client, selector) if (n := _with_bundle(c, bundle_b64))]
        if not pending:
            return done
        conflicted = False
        for kind, config, updated in pending:
            name = config["metadata"]["name"]
            try:
                await client.replace_webhook_configuration(kind, name, updated)
            except api.Conflict:
                conflicted = True  # somebody else wrote it: re-read and try again
                continue
            done.append(f"{kind}/{name}")
        if not conflicted:
            return done
    raise api.ApiError(
        409, f"webhook configurations kept changing: gave up injecting the caBundle after {attempts} tries"
    )


async def reconcile(
    client: api.CertsApi,
    *,
    target: Target,
    now: Callable[[], datetime],
    policy: rotation.Policy | None = None,
    check: bool = False,
    attempts: int = 5,
) -> Outcome:
    """Issue or rotate as needed, store, inject. With `check`, compute the same outcome but write nothing."""
    for _ in range(attempts):
        try:
            existing: dict[str, Any] | None = await client.get_secret(target.namespace, target.secret_name)
        except api.NotFound:
            existing = None
        if existing is not None and existing.get("type") != secret.SECRET_TYPE:
            raise SetupError(
                f"Secret {target.namespace}/{target.secret_name} has type {existing.get('type')!r}, "
                f"gpuclaim stores {secret.SECRET_TYPE!r} (the type is immutable): delete it or use another --secret"
            )
        old_data = secret.secret_data(existing)
        configs = [c for _, c in await _list_configs(client, target.webhook_selector)]
        p = rotation.plan(
            secret.decode(old_data),
            names=target.names,
            now=now(),
            policy=policy,
            trusted_everywhere=trusted_everywhere(configs),
            client_name=target.client_name,
        )
        foreign = {k: v for k, v in old_data.items() if k not in secret.ALL_KEYS}
        data = foreign | secret.encode(p.material)
        actions = list(p.actions)
        if data != old_data and not actions:
            actions.append("rewrote Secret (stored keys were incomplete or stale)")
        bundle_b64 = base64.b64encode(p.material.bundle_pem()).decode("ascii")
        if check:
            would = [f"{k}/{c['metadata']['name']}" for k, c in await _list_configs(client, target.webhook_selector)
                     if _with_bundle(c, bundle_b64) is not None]
            return Outcome(tuple(actions), p.material, data != old_data, tuple(would), len(configs), p.overlap_until)
        if data != old_data:
            body = secret.to_secret(name=target.secret_name, namespace=target.namespace, data=data, base=existing)
            try:
                if existing is None:
                    await client.create_secret(target.namespace, body)
                else:
                    await client.replace_secret(target.namespace, target.secret_name, body)
            except api.Conflict:
                log.info("certificate Secret changed under us; re-reading")
                continue
        injected = await _inject(client, target.webhook_selector, bundle_b64, attempts=attempts)
        return Outcome(tuple(actions), p.material, data != old_data, tuple(injected), len(configs), p.overlap_until)
    where = f"{target.namespace}/{target.secret_name}"
    raise api.ApiError(409, f"Secret {where} kept changing: gave up after {attempts} tries")
