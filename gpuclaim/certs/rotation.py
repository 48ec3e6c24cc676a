"""What to do with the stored certificates now: issue, keep, renew the serving cert, or rotate the CA.

Pure: the stored material, what the webhook configurations currently trust, the wanted names, the
policy and the clock go in; the new material and a list of what was done come out.

The CA rotates in three steps, one per run at the earliest, so that no client ever meets a serving
certificate from a CA it does not trust yet:

1. *introduce*: the CA is within `ca_renew_before` of its end. A next CA is created and added to the
   bundle (`ca.crt` and every webhook's caBundle); the serving certificate stays on the old CA.
2. *switch*: once every selected webhook configuration carries the next CA and `ca_switch_delay`
   has passed (apiservers see configuration changes through informers), the next CA becomes the
   signer and a new serving certificate is issued from it. The old CA stays in the bundle because
   servers pick up the new Secret files only when the kubelet syncs the volume.
3. *retire*: `ca_overlap` after the new CA was introduced (or when the old CA expires) the old
   CA leaves the bundle.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from gpuclaim.certs import material, selfsigned


@dataclass(frozen=True, slots=True)
class Policy:
    ca_validity: timedelta = selfsigned.CA_VALIDITY
    #: start a CA rotation this long before the CA ends; must leave room for the whole overlap
    ca_renew_before: timedelta = timedelta(days=365)
    #: both CAs are in the bundle for this long after the next CA is introduced
    ca_overlap: timedelta = timedelta(days=30)
    #: minimum wait between introducing the next CA and signing with it
    ca_switch_delay: timedelta = timedelta(minutes=10)
    serving_validity: timedelta = selfsigned.SERVING_VALIDITY
    #: renew the serving cert when less than this is left ...
    serving_renew_before: timedelta = timedelta(days=30)
    #: ... or when this fraction of its lifetime has passed (cert-manager renews at 2/3 too)
    serving_renew_fraction: float = 2 / 3
    key_type: selfsigned.KeyType = "ecdsa-p256"

    def __post_init__(self) -> None:
        for shorter, longer, why in _ORDER:
            if sum((getattr(self, f) for f in shorter), timedelta(0)) >= getattr(self, longer):
                raise PolicyError(shorter, longer, why)
        if not 0 < self.serving_renew_fraction < 1:
            raise ValueError("certs policy: serving_renew_fraction must be between 0 and 1")
        if self.key_type not in selfsigned.KEY_TYPES:
            raise ValueError(f"certs policy: key type {self.key_type!r} not one of {', '.join(selfsigned.KEY_TYPES)}")


class PolicyError(ValueError):
    """Durations of a Policy that contradict each other: the sum of the `shorter` fields must be shorter than the
    `longer` field. The fields are named, so a caller can name its own flags for them."""

    def __init__(self, shorter: tuple[str, ...], longer: str, why: str) -> None:
        self.shorter, self.longer, self.why = shorter, longer, why
        super().__init__(f"certs policy: {' + '.join(shorter)} must be shorter than {longer}: {why}")


#: (fields whose sum must be shorter, than this field, why): checked in this order, the first broken one is reported
_ORDER: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("ca_overlap", "ca_switch_delay"), "ca_renew_before",
     "a CA rotation (the switch delay, then the overlap) must fit inside the CA's renewal window"),
    (("ca_renew_before",), "ca_validity", "a new CA would be due for rotation as soon as it is issued"),
    (("serving_renew_before",), "serving_validity",
     "a serving certificate would be due for renewal as soon as it is issued"),
    (("serving_renew_before",), "ca_validity",
     "a serving certificate cannot outlive its CA, so every one would be due for renewal as soon as it is issued"),
    (("serving_renew_before", "ca_switch_delay"), "ca_renew_before",
     "a serving certificate cannot outlive its CA, so while the CA's end is nearer than the serving renewal window "
     "and the next CA does not sign yet, every run would renew the serving certificate"),
)


@dataclass(frozen=True, slots=True)
class Material:
    """The stored state. `previous` (a CA cert, no key) and `next` (a CA pair) never coexist."""

    signer: material.KeyPair | None = None
    serving: material.KeyPair | None = None
    next: material.KeyPair | None = None
    previous: x509.Certificate | None = None
    #: the scheduler's client certificate for the extender's mutual TLS, signed by `signer` like `serving`
    client: material.KeyPair | None = None
    #: what could not be used, e.g. "serving: key does not match", for the report
    problems: tuple[str, ...] = ()

    def bundle(self) -> list[x509.Certificate]:
        """The CAs clients must trust, oldest first: the bytes stay the same from the introduction of
        the next CA through the switch, so the switch rewrites no webhook configuration."""
        out = [] if self.signer is None else [self.signer.cert]
        if self.next is not None:
            out.append(self.next.cert)
        if self.previous is not None:
            out.append(self.previous)
        return sorted(out, key=lambda c: (c.not_valid_before_utc, material.fingerprint(c)))

    def bundle_pem(self) -> bytes:
        return material.bundle_pem(self.bundle())


@dataclass(frozen=True, slots=True)
class Plan:
    material: Material
    actions: tuple[str, ...]
    #: when the old CA leaves the bundle, while an overlap is in progress
    overlap_until: datetime | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def changed(self) -> bool:
        return bool(self.actions)


def _key_type(key: material.PrivateKey) -> str:
    if isinstance(key, rsa.RSAPrivateKey):
        return f"rsa-{key.key_size}"
    assert isinstance(key, ec.EllipticCurvePrivateKey)  # material loads only RSA and EC keys
    return "ecdsa-p256" if key.curve.name == "secp256r1" else f"ecdsa-{key.curve.name}"


def _serving_due(serving: material.KeyPair, policy: Policy, now: datetime, what: str = "serving") -> str | None:
    """Why the serving (or client) certificate must be renewed now, or None."""
    lifetime = serving.not_after - serving.not_before
    left = serving.not_after - now
    if left <= timedelta(0):
        return f"{what} cert expired"
    if left <= policy.serving_renew_before:
        return f"{what} cert ends in {left.days} days (renew window {policy.serving_renew_before.days} days)"
    if now - serving.not_before >= lifetime * policy.serving_renew_fraction:
        return f"{what} cert past {policy.serving_renew_fraction:.0%} of its lifetime"
    return None


def _client(m: Material, client_name: str | None, policy: Policy, now: datetime) -> tuple[Material, str | None]:
    """The client certificate under the current signer: (material, what was done or None). Same lifetime and
    renewal rules as the serving certificate; a new signer (issue, CA switch) always means a new one."""
    assert m.signer is not None
    if client_name is None:
        return (replace(m, client=None), "removed client cert (none asked for)") if m.client is not None \
            else (m, None)
    reason: str | None
    if m.client is None:
        reason = "no client cert"
    elif not material.issued_by(m.client.cert, m.signer.cert):
        reason = "client cert not signed by the current CA"
    elif selfsigned.common_name(m.client.cert) != client_name:
        reason = "client cert name changed"
    elif _key_type(m.client.key) != policy.key_type:
        reason = f"client key type changed to {policy.key_type}"
    else:
        reason = _serving_due(m.client, policy, now, "client")
    if reason is None:
        return m, None
    client = selfsigned.issue_client(ca=m.signer, name=client_name, now=now, validity=policy.serving_validity,
                                     key_type=policy.key_type)
    return replace(m, client=client), f"issued client cert {client_name!r} ({reason})"


def _overlap_until(signer: material.KeyPair, previous: x509.Certificate, policy: Policy) -> datetime:
    introduced = signer.not_before + selfsigned.BACKDATE
    return min(introduced + policy.ca_overlap, previous.not_valid_after_utc)


def plan(
    current: Material,
    *,
    names: selfsigned.Names,
    now: datetime,
    policy: Policy | None = None,
    trusted_everywhere: frozenset[str] | None = None,
    client_name: str | None = None,
) -> Plan:
    """Decide and build the new material.

    `trusted_everywhere`: fingerprints of the CAs that every selected webhook configuration already
    trusts (None when there is nothing to inject into, e.g. a local run: then nobody waits).
    `client_name`: also keep a client certificate with this CN (kube-scheduler's, for the extender's mutual TLS);
    None: keep none.
    """
    policy = policy or Policy()
    now = material.utc(now)
    actions: list[str] = []
    m = current
    for problem in current.problems:
        actions.append(f"discarded unusable stored material: {problem}")

    signer_ok = m.signer is not None and material.is_ca(m.signer.cert) and m.signer.not_after > now
    if not signer_ok:
        why = "no CA" if m.signer is None else "CA unusable or expired"
        ca = selfsigned.issue_ca(now=now, validity=policy.ca_validity, key_type=policy.key_type)
        serving = selfsigned.issue_serving(
            ca=ca, names=names, now=now, validity=policy.serving_validity, key_type=policy.key_type
        )
        fresh, did = _client(Material(signer=ca, serving=serving), client_name, policy, now)
        return Plan(material=fresh, actions=(*actions, f"issued ({why})", *([did] if did else [])))
    assert m.signer is not None

    overlap_until: datetime | None = None
    # step 3: retire the old CA once its overlap is over
    if m.previous is not None:
        overlap_until = _overlap_until(m.signer, m.previous, policy)
        if now >= overlap_until:
            m = replace(m, previous=None)
            overlap_until = None
            actions.append("retired previous CA (overlap over)")

    # step 2: switch to the next CA once every webhook trusts it
    upcoming = m.next
    if upcoming is not None:
        if upcoming.not_after <= now:
            m = replace(m, next=None)
            actions.append("dropped next CA (expired before it was used)")
        else:
            waited = now - (upcoming.not_before + selfsigned.BACKDATE) >= policy.ca_switch_delay
            injected = trusted_everywhere is None or material.fingerprint(upcoming.cert) in trusted_everywhere
            if waited and injected:
                old = m.signer
                assert old is not None
                serving = selfsigned.issue_serving(
                    ca=upcoming, names=names, now=now, validity=policy.serving_validity, key_type=policy.key_type
                )
                m = Material(signer=upcoming, serving=serving, previous=old.cert, client=m.client)
                overlap_until = _overlap_until(m.signer, old.cert, policy)  # type: ignore[arg-type]
                actions.append(f"rotated CA (overlap until {overlap_until.isoformat()})")
                m, did = _client(m, client_name, policy, now)
                actions += [did] if did else []
                return Plan(material=m, actions=tuple(actions), overlap_until=overlap_until)

    assert m.signer is not None  # every replace() above keeps the signer; mypy loses the narrowing
    # step 1: introduce the next CA when the signer nears its end (and no rotation is in flight)
    if m.next is None and m.previous is None and m.signer.not_after - now <= policy.ca_renew_before:
        nxt = selfsigned.issue_ca(now=now, validity=policy.ca_validity, key_type=policy.key_type)
        m = replace(m, next=nxt)
        actions.append("introduced next CA (both CAs in caBundle; serving cert switches once injected)")

    assert m.signer is not None
    # the serving certificate under the current signer
    reason: str | None
    if m.serving is None:
        reason = "no serving cert"
    elif not material.issued_by(m.serving.cert, m.signer.cert):
        reason = "serving cert not signed by the current CA"
    elif not names.matches(m.serving.cert):
        reason = "serving cert names changed"
    elif _key_type(m.serving.key) != policy.key_type:
        reason = f"serving key type changed to {policy.key_type}"
    else:
        reason = _serving_due(m.serving, policy, now)
    if reason is not None:
        serving = selfsigned.issue_serving(
            ca=m.signer, names=names, now=now, validity=policy.serving_validity, key_type=policy.key_type
        )
        m = replace(m, serving=serving)
        actions.append(f"rotated serving cert ({reason})")
    m, did = _client(m, client_name, policy, now)
    actions += [did] if did else []
    m = replace(m, problems=())
    return Plan(material=m, actions=tuple(actions), overlap_until=overlap_until)
