"""The Kubernetes side against an in-memory API with the server's write semantics: Secret created
once, nothing written on a second run, caBundle injected into every selected webhook, conflicts
retried, a CA rotation walked across runs, and the Secret valid against the 1.34 schema."""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import datetime, timedelta

import kubernetes_validate
import pytest
from certs_fakeapi import FakeApi
from certs_helpers import NAMES, NOW

from gpuclaim.certs import material, reconcile, rotation, secret

TARGET = reconcile.Target(namespace="gpuclaim", secret_name="gpuclaim-webhook-tls", names=NAMES)
MWC, VWC = "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"


def _clock(t: datetime) -> Callable[[], datetime]:
    return lambda: t


def _bundle_of(fake: FakeApi, kind: str, name: str) -> list[str]:
    return [w["clientConfig"].get("caBundle", "") for w in fake.webhooks[(kind, name)]["webhooks"]]


@pytest.fixture
def fake() -> FakeApi:
    f = FakeApi()
    f.add_webhook(MWC, "gpuclaim-webhook", webhooks=1)
    f.add_webhook(VWC, "gpuclaim-webhook", webhooks=3)
    f.add_webhook(VWC, "someone-else", labels={"app.kubernetes.io/name": "other"})
    return f


async def test_first_run_creates_the_secret_and_injects_every_selected_webhook(fake: FakeApi) -> None:
    out = await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW))
    assert out.actions == ("issued (no CA)",)
    assert fake.writes == ["create Secret/gpuclaim-webhook-tls", f"update {MWC}/gpuclaim-webhook",
                           f"update {VWC}/gpuclaim-webhook"]
    stored = fake.secrets[("gpuclaim", "gpuclaim-webhook-tls")]
    assert stored["type"] == "kubernetes.io/tls"
    data = secret.secret_data(stored)
    assert set(data) == {"tls.crt", "tls.key", "ca.crt", "ca-signer.crt", "ca-signer.key"}
    expected = base64.b64encode(data["ca.crt"]).decode()
    assert _bundle_of(fake, MWC, "gpuclaim-webhook") == [expected]
    assert _bundle_of(fake, VWC, "gpuclaim-webhook") == [expected] * 3
    assert _bundle_of(fake, VWC, "someone-else") == [""]  # not selected: untouched
    assert out.injected == (f"{MWC}/gpuclaim-webhook", f"{VWC}/gpuclaim-webhook")
    kubernetes_validate.validate(stored, "1.34.0", strict=True)
    for key in (MWC, VWC):
        kubernetes_validate.validate(fake.webhooks[(key, "gpuclaim-webhook")], "1.34.0", strict=True)


async def test_a_second_run_writes_nothing(fake: FakeApi) -> None:
    await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW))
    before = dict(fake.secrets), len(fake.writes)
    out = await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW + timedelta(days=100)))
    assert out.actions == () and not out.changed and out.injected == ()
    assert (dict(fake.secrets), len(fake.writes)) == before


async def test_check_reports_what_would_change_and_writes_nothing(fake: FakeApi) -> None:
    out = await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW), check=True)
    assert out.actions == ("issued (no CA)",) and out.secret_written
    assert out.injected == (f"{MWC}/gpuclaim-webhook", f"{VWC}/gpuclaim-webhook")
    assert fake.writes == [] and fake.secrets == {}


async def test_a_config_edited_concurrently_is_reread_and_injected(fake: FakeApi) -> None:
    fake.conflict_once.add("gpuclaim-webhook")
    out = await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW))
    data = secret.secret_data(fake.secrets[("gpuclaim", "gpuclaim-webhook-tls")])
    expected = base64.b64encode(data["ca.crt"]).decode()
    assert _bundle_of(fake, MWC, "gpuclaim-webhook") == [expected]
    assert _bundle_of(fake, VWC, "gpuclaim-webhook") == [expected] * 3
    assert sorted(out.injected) == [f"{MWC}/gpuclaim-webhook", f"{VWC}/gpuclaim-webhook"]


async def test_a_secret_written_concurrently_makes_the_run_start_over_from_it(fake: FakeApi) -> None:
    await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW))
    fake.conflict_once.add("gpuclaim-webhook-tls")
    later = NOW + timedelta(days=340)  # inside the serving renewal window
    out = await reconcile.reconcile(fake, target=TARGET, now=_clock(later))
    assert out.actions[0].startswith("rotated serving cert")
    assert fake.writes.count("update Secret/gpuclaim-webhook-tls") == 1


async def test_a_concurrent_create_is_a_conflict_and_the_winner_is_kept(fake: FakeApi) -> None:
    other = FakeApi()
    await reconcile.reconcile(other, target=TARGET, now=_clock(NOW))
    winner = other.secrets[("gpuclaim", "gpuclaim-webhook-tls")]
    real_get = fake.get_secret
    calls = 0

    async def get_then_lose_the_race(namespace: str, name: str) -> dict:
        nonlocal calls
        calls += 1
        if calls == 1:
            fake.secrets[(namespace, name)] = winner  # created by the other run after our read
            raise reconcile.api.NotFound("not yet")
        return await real_get(namespace, name)

    fake.get_secret = get_then_lose_the_race  # type: ignore[method-assign]
    out = await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW))
    assert out.actions == ()  # the winner's material is valid: adopted as is
    assert fake.secrets[("gpuclaim", "gpuclaim-webhook-tls")] is winner
    assert material.fingerprint(out.material.signer.cert) == material.fingerprint(  # type: ignore[union-attr]
        secret.decode(secret.secret_data(winner)).signer.cert)  # type: ignore[union-attr]


async def test_a_secret_of_another_type_is_not_overwritten(fake: FakeApi) -> None:
    await fake.create_secret("gpuclaim", {"metadata": {"name": "gpuclaim-webhook-tls"}, "type": "Opaque", "data": {}})
    with pytest.raises(reconcile.SetupError, match=r"has type 'Opaque', gpuclaim stores 'kubernetes\.io/tls'"):
        await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW))


async def test_foreign_keys_and_labels_in_the_secret_are_kept(fake: FakeApi) -> None:
    await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW))
    stored = fake.secrets[("gpuclaim", "gpuclaim-webhook-tls")]
    stored["data"]["note.txt"] = base64.b64encode(b"hello").decode()
    stored["metadata"]["labels"]["team"] = "ml"
    del stored["data"]["ca.crt"]  # damaged: must be rewritten
    out = await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW))
    assert out.actions == ("rewrote Secret (stored keys were incomplete or stale)",)
    stored = fake.secrets[("gpuclaim", "gpuclaim-webhook-tls")]
    assert stored["data"]["note.txt"] == base64.b64encode(b"hello").decode()
    assert stored["metadata"]["labels"]["team"] == "ml"
    assert "ca.crt" in stored["data"]


async def test_a_ca_rotation_across_runs_switches_only_after_the_bundle_is_injected(fake: FakeApi) -> None:
    first = await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW))
    policy = rotation.Policy()
    t = first.material.signer.not_after - policy.ca_renew_before + timedelta(days=1)  # type: ignore[union-attr]
    step1 = await reconcile.reconcile(fake, target=TARGET, now=_clock(t))
    assert step1.actions[0].startswith("introduced next CA")
    assert step1.injected  # both CAs now in every caBundle
    bundle = base64.b64decode(_bundle_of(fake, MWC, "gpuclaim-webhook")[0])
    assert len(material.parse_certs(bundle)) == 2
    # a webhook configuration re-applied by helm meanwhile, without the new bundle: no switch yet
    cfg = fake.webhooks[(VWC, "gpuclaim-webhook")]
    cfg["webhooks"][1]["clientConfig"]["caBundle"] = base64.b64encode(first.material.bundle_pem()).decode()
    held = await reconcile.reconcile(fake, target=TARGET, now=_clock(t + timedelta(hours=1)))
    assert held.actions == () and held.injected == (f"{VWC}/gpuclaim-webhook",)  # re-injected, not switched
    step2 = await reconcile.reconcile(fake, target=TARGET, now=_clock(t + timedelta(hours=2)))
    assert step2.actions[0].startswith("rotated CA (overlap until ")
    assert step2.injected == ()  # the bundle (both CAs) did not change, only its order of use
    data = secret.secret_data(fake.secrets[("gpuclaim", "gpuclaim-webhook-tls")])
    assert set(data) == {"tls.crt", "tls.key", "ca.crt", "ca-signer.crt", "ca-signer.key", "ca-previous.crt"}
    step3 = await reconcile.reconcile(fake, target=TARGET, now=_clock(step2.overlap_until))  # type: ignore[arg-type]
    assert step3.actions == ("retired previous CA (overlap over)",)
    assert len(material.parse_certs(base64.b64decode(_bundle_of(fake, MWC, "gpuclaim-webhook")[0]))) == 1


async def test_without_any_webhook_configuration_the_secret_is_still_managed() -> None:
    fake = FakeApi()
    out = await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW))
    assert out.actions == ("issued (no CA)",) and out.webhook_configurations == 0 and out.injected == ()


async def test_a_garbage_cabundle_counts_as_not_trusting_anything(fake: FakeApi) -> None:
    await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW))
    fake.webhooks[(MWC, "gpuclaim-webhook")]["webhooks"][0]["clientConfig"]["caBundle"] = "!!not base64!!"
    configs = await fake.list_webhook_configurations(MWC, "app.kubernetes.io/name=gpuclaim")
    assert reconcile.trusted_everywhere(configs) == frozenset()
    out = await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW))
    assert out.injected == (f"{MWC}/gpuclaim-webhook",)
