"""The pure rotation decisions: issue, keep, renew the serving cert in its window, rotate the CA in
three steps with an overlap, and the safety property that no client ever meets a serving cert
from a CA it was not already trusting."""

from __future__ import annotations

import asyncio
import os
import ssl
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from certs_helpers import NAMES, NOW, https_server
from cryptography.hazmat.primitives import serialization
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gpuclaim.certs import context, material, rotation, secret, selfsigned

POLICY = rotation.Policy()
DAY = timedelta(days=1)


def _fresh() -> rotation.Plan:
    return rotation.plan(rotation.Material(), names=NAMES, now=NOW)


def _fps(m: rotation.Material) -> frozenset[str]:
    return frozenset(material.fingerprint(c) for c in m.bundle())


def test_nothing_stored_issues_a_ca_and_a_serving_cert() -> None:
    p = _fresh()
    assert p.actions == ("issued (no CA)",)
    m = p.material
    assert m.signer is not None and m.serving is not None
    assert material.is_ca(m.signer.cert) and material.issued_by(m.serving.cert, m.signer.cert)
    assert NAMES.matches(m.serving.cert)
    assert m.bundle() == [m.signer.cert]
    assert m.signer.not_after - NOW == POLICY.ca_validity
    assert m.serving.not_after - NOW == POLICY.serving_validity


@pytest.mark.parametrize("later", [timedelta(0), DAY, 200 * DAY], ids=["same-instant", "next-day", "200-days"])
def test_a_second_run_changes_nothing_while_everything_is_valid(later: timedelta) -> None:
    first = _fresh().material
    again = rotation.plan(first, names=NAMES, now=NOW + later, trusted_everywhere=_fps(first))
    assert again.actions == () and not again.changed
    assert secret.encode(again.material) == secret.encode(first)


@pytest.mark.parametrize(
    ("age", "reason"),
    [(336 * DAY, "serving cert ends in 29 days (renew window 30 days)"),
     (250 * DAY, "serving cert past 67% of its lifetime"),
     (400 * DAY, "serving cert expired")],
    ids=["inside-30-day-window", "past-two-thirds", "expired"],
)
def test_the_serving_cert_is_renewed_in_its_window_and_the_ca_stays(age: timedelta, reason: str) -> None:
    first = _fresh().material
    p = rotation.plan(first, names=NAMES, now=NOW + age, trusted_everywhere=_fps(first))
    assert p.actions == (f"rotated serving cert ({reason})",)
    assert p.material.signer == first.signer
    assert p.material.serving is not None and p.material.serving.not_before <= NOW + age < p.material.serving.not_after
    assert material.issued_by(p.material.serving.cert, first.signer.cert)  # type: ignore[union-attr]


def test_just_before_the_window_the_serving_cert_is_kept() -> None:
    first = _fresh().material
    assert rotation.plan(first, names=NAMES, now=NOW + 240 * DAY).actions == ()


def test_changed_names_reissue_the_serving_cert_only() -> None:
    first = _fresh().material
    names = selfsigned.Names.build([*NAMES.dns, "gpuclaim.example.com"], NAMES.ips)
    p = rotation.plan(first, names=names, now=NOW + DAY)
    assert p.actions == ("rotated serving cert (serving cert names changed)",)
    assert "gpuclaim.example.com" in material.dns_names(p.material.serving.cert)  # type: ignore[union-attr]
    assert p.material.signer == first.signer


def test_a_changed_key_type_reissues_the_serving_cert() -> None:
    first = _fresh().material
    p = rotation.plan(first, names=NAMES, now=NOW + DAY, policy=rotation.Policy(key_type="rsa-2048"))
    assert p.actions == ("rotated serving cert (serving key type changed to rsa-2048)",)
    assert isinstance(p.material.serving.key, material.rsa.RSAPrivateKey)  # type: ignore[union-attr]


def test_an_expired_ca_is_replaced_outright() -> None:
    first = _fresh().material
    p = rotation.plan(first, names=NAMES, now=NOW + 3651 * DAY)
    assert p.actions == ("issued (CA unusable or expired)",)
    assert p.material.bundle() == [p.material.signer.cert]  # type: ignore[union-attr]


def test_a_corrupted_serving_key_is_reported_and_replaced() -> None:
    data = secret.encode(_fresh().material)
    data["tls.key"] = b"-----BEGIN PRIVATE KEY-----\nbroken\n-----END PRIVATE KEY-----\n"
    current = secret.decode(data)
    p = rotation.plan(current, names=NAMES, now=NOW + DAY)
    assert p.actions[0].startswith("discarded unusable stored material: tls.crt/tls.key: serving key: not an")
    assert p.actions[1] == "rotated serving cert (no serving cert)"


class _CaRotation:
    """Walk one CA rotation from the first day the CA is inside its renewal window."""

    def __init__(self) -> None:
        first = _fresh().material
        assert first.signer is not None
        self.t1 = first.signer.not_after - POLICY.ca_renew_before + DAY
        # years of yearly serving renewals went by; the last one two days before the CA's window
        renewed = rotation.plan(first, names=NAMES, now=self.t1 - 2 * DAY)
        assert renewed.actions == ("rotated serving cert (serving cert expired)",)
        self.start = renewed.material
        self.step1 = rotation.plan(self.start, names=NAMES, now=self.t1, trusted_everywhere=_fps(self.start))


def test_ca_rotation_step1_introduces_the_next_ca_into_the_bundle_but_keeps_signing_with_the_old() -> None:
    r = _CaRotation()
    m = r.step1.material
    assert r.step1.actions == ("introduced next CA (both CAs in caBundle; serving cert switches once injected)",)
    assert m.next is not None and m.signer == r.start.signer and m.serving == r.start.serving
    assert m.bundle() == [r.start.signer.cert, m.next.cert]  # type: ignore[union-attr]


def test_ca_rotation_waits_until_every_webhook_trusts_the_next_ca() -> None:
    r = _CaRotation()
    later = r.t1 + timedelta(hours=1)
    not_injected = rotation.plan(r.step1.material, names=NAMES, now=later, trusted_everywhere=_fps(r.start))
    assert not_injected.actions == ()
    too_soon = rotation.plan(r.step1.material, names=NAMES, now=r.t1 + timedelta(minutes=1),
                             trusted_everywhere=_fps(r.step1.material))
    assert too_soon.actions == ()


def test_ca_rotation_step2_switches_to_the_next_ca_and_step3_retires_the_old_one() -> None:
    r = _CaRotation()
    t2 = r.t1 + timedelta(hours=1)
    step2 = rotation.plan(r.step1.material, names=NAMES, now=t2, trusted_everywhere=_fps(r.step1.material))
    m = step2.material
    assert step2.overlap_until == r.t1 + POLICY.ca_overlap
    assert step2.actions == (f"rotated CA (overlap until {step2.overlap_until.isoformat()})",)
    assert m.signer == r.step1.material.next and m.previous == r.start.signer.cert  # type: ignore[union-attr]
    assert material.issued_by(m.serving.cert, m.signer.cert)  # type: ignore[union-attr]
    assert m.bundle() == [r.start.signer.cert, m.signer.cert]  # type: ignore[union-attr]
    # idempotent during the overlap
    assert rotation.plan(m, names=NAMES, now=t2 + DAY, trusted_everywhere=_fps(m)).actions == ()
    # step 3: the old CA leaves the bundle when the overlap ends
    step3 = rotation.plan(m, names=NAMES, now=step2.overlap_until, trusted_everywhere=_fps(m))
    assert step3.actions == ("retired previous CA (overlap over)",)
    assert step3.material.bundle() == [m.signer.cert]  # type: ignore[union-attr]


async def _handshake(port: int, client: ssl.SSLContext) -> bytes:
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname=NAMES.dns[0])
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    await writer.wait_closed()
    return bytes(der)


async def test_during_the_overlap_old_and_new_serving_certs_both_verify_over_real_tls(tmp_path: Path) -> None:
    """Real TLS checks validity against the wall clock, so this walk uses a short policy ending now."""
    wall = datetime.now(UTC)
    short = rotation.Policy(ca_validity=10 * DAY, ca_renew_before=5 * DAY, ca_overlap=2 * DAY,
                            serving_validity=9 * DAY, serving_renew_before=DAY, serving_renew_fraction=0.9)
    start = rotation.plan(rotation.Material(), names=NAMES, now=wall - 6 * DAY, policy=short).material
    step1 = rotation.plan(start, names=NAMES, now=wall - timedelta(hours=1), policy=short,
                          trusted_everywhere=_fps(start))
    assert step1.actions[0].startswith("introduced next CA")
    step2 = rotation.plan(step1.material, names=NAMES, now=wall, policy=short,
                          trusted_everywhere=_fps(step1.material))
    assert step2.actions[0].startswith("rotated CA")
    overlap = step2.material
    clients = {
        "before": context.client_context(ca_pem=start.bundle_pem()),
        "step1": context.client_context(ca_pem=step1.material.bundle_pem()),
        "overlap": context.client_context(ca_pem=overlap.bundle_pem()),
        "old-ca-only-after": context.client_context(ca_pem=overlap.previous and material.cert_pem(overlap.previous)),
    }
    verified: dict[tuple[str, str], bool] = {}
    for label, pair in (("old", start.serving), ("new", overlap.serving)):
        assert pair is not None
        cert, key = tmp_path / f"{label}.crt", tmp_path / f"{label}.key"
        cert.write_bytes(pair.cert_pem)
        key.write_bytes(pair.key_pem)
        async with https_server(context.server_context(cert_file=cert, key_file=key)) as port:
            for who, client in clients.items():
                try:
                    verified[(label, who)] = await _handshake(port, client) == pair.cert.public_bytes(
                        serialization.Encoding.DER)
                except ssl.SSLCertVerificationError:
                    verified[(label, who)] = False
    assert verified == {
        ("old", "before"): True, ("old", "step1"): True, ("old", "overlap"): True, ("old", "old-ca-only-after"): True,
        # the new serving cert is trusted by whoever got the step-1 bundle, i.e. before it was served
        ("new", "before"): False, ("new", "step1"): True, ("new", "overlap"): True, ("new", "old-ca-only-after"): False,
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"ca_overlap": timedelta(days=400)}, "ca_overlap \\+ ca_switch_delay must be shorter than ca_renew_before"),
     ({"serving_renew_before": timedelta(days=400)}, "serving_renew_before must be shorter than serving_validity"),
     ({"ca_validity": 10 * DAY, "ca_renew_before": 5 * DAY, "ca_overlap": DAY},
      "serving_renew_before must be shorter than ca_validity: a serving certificate cannot outlive its CA"),
     ({"ca_renew_before": 20 * DAY, "ca_overlap": DAY},
      "serving_renew_before \\+ ca_switch_delay must be shorter than ca_renew_before"),
     ({"serving_renew_fraction": 1.5}, "serving_renew_fraction must be between 0 and 1"),
     ({"key_type": "dsa"}, "key type 'dsa' not one of")],
)
def test_an_inconsistent_policy_is_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        rotation.Policy(**kwargs)


@settings(max_examples=500 if os.environ.get("GPUCLAIM_LONG") else 25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(
    # around the CA's renewal window (day 3285) half the time, anywhere in its life otherwise
    start=st.one_of(st.integers(min_value=3270, max_value=3330), st.integers(min_value=0, max_value=3660)),
    steps=st.lists(st.tuples(st.integers(min_value=0, max_value=60), st.booleans()), min_size=1, max_size=25),
)
def test_no_client_ever_meets_a_serving_cert_from_a_ca_it_does_not_trust(
    start: int, steps: list[tuple[int, bool]]
) -> None:
    """Runs at arbitrary days; sometimes the injection of the bundle is lost (a failed patch). Unless
    everything is (re)issued, a run that moves the serving cert to another CA only moves it to a CA
    every webhook already trusted before the run."""
    m = _fresh().material
    injected = _fps(m)
    seen: set[str] = set()
    now = NOW + timedelta(days=start)  # lands anywhere in the CA's life, often inside its renewal window
    for days, inject_ok in steps:
        now += timedelta(days=days)
        p = rotation.plan(m, names=NAMES, now=now, trusted_everywhere=injected)
        new = p.material
        assert new.signer is not None and new.serving is not None
        assert new.serving.not_before <= now < new.serving.not_after
        assert material.issued_by(new.serving.cert, new.signer.cert)
        assert new.signer.cert in new.bundle() and len(new.bundle()) <= 2
        moved = not material.issued_by(new.serving.cert, m.signer.cert)  # type: ignore[union-attr]
        if moved and not any(a.startswith("issued") for a in p.actions):
            assert material.fingerprint(new.signer.cert) in injected
        if inject_ok:
            injected = _fps(new)
        m = new
        seen.update(a.split(" (")[0] for a in p.actions)


#: durations from minutes to years, so that valid and contradicting combinations are both drawn often
_DURATIONS = st.sampled_from([timedelta(minutes=10), timedelta(hours=1), timedelta(hours=20), 2 * DAY, 10 * DAY,
                              30 * DAY, 100 * DAY, 365 * DAY, 3650 * DAY])
_POLICY_DURATIONS = ("ca_validity", "ca_renew_before", "ca_overlap", "ca_switch_delay", "serving_validity",
                     "serving_renew_before")


@settings(max_examples=300 if os.environ.get("GPUCLAIM_LONG") else 60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(
    durations=st.fixed_dictionaries({k: _DURATIONS for k in _POLICY_DURATIONS}),
    gaps=st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1, max_size=12),
)
# the issue's loops: a 10-day CA under the default 30-day serving renewal window; a serving window as long as the
# CA's, where a serving cert renewed from the old CA during the rotation is due again at once
@example(durations={"ca_validity": 10 * DAY, "ca_renew_before": 2 * DAY, "ca_overlap": timedelta(hours=20),
                    "ca_switch_delay": timedelta(minutes=10), "serving_validity": 365 * DAY,
                    "serving_renew_before": 30 * DAY}, gaps=[0.0])
@example(durations={"ca_validity": 3650 * DAY, "ca_renew_before": 30 * DAY, "ca_overlap": 2 * DAY,
                    "ca_switch_delay": timedelta(minutes=10), "serving_validity": 365 * DAY,
                    "serving_renew_before": 30 * DAY}, gaps=[1.0, 0.989])
def test_every_accepted_policy_settles_a_run_repeated_at_the_same_instant_changes_nothing(
    durations: dict[str, timedelta], gaps: list[float]
) -> None:
    """Whatever durations a Policy accepts, a run right after a run has nothing to do, at any point of the CA's
    life and of its rotation (no injection to wait for, as in a local run): nothing is due again at once."""
    try:
        policy = rotation.Policy(**durations)
    except rotation.PolicyError:
        return
    m = rotation.plan(rotation.Material(), names=NAMES, now=NOW, policy=policy).material
    now = NOW
    for gap in gaps:
        now += policy.ca_validity * gap / 2
        m = rotation.plan(m, names=NAMES, now=now, policy=policy).material
        again = rotation.plan(m, names=NAMES, now=now, policy=policy)
        assert again.actions == (), (now - NOW, again.actions)
