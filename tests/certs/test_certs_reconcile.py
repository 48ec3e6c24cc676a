"""The Kubernetes side through `certs.kubeapi` against the API double: Secret created once, nothing
written on a second run, caBundle injected into every selected webhook, conflicts (409 from the
double, mapped by kubeapi) retried, a CA rotation walked across runs, and the Secret valid against
the 1.34 schema."""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from certs_cluster import Cluster
from certs_helpers import NAMES, NOW
from official_schemas import assert_valid

from gpuclaim.certs import material, reconcile, rotation, secret
from gpuclaim.double.apiserver import RunningDouble
from gpuclaim.double.apiserver.resources import BY_KIND
from gpuclaim.kube.client import KubeClient

TARGET = reconcile.Target(namespace="gpuclaim", secret_name="gpuclaim-webhook-tls", names=NAMES)
MWC, VWC = "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"


def _clock(t: datetime) -> Callable[[], datetime]:
    return lambda: t


SECRET = "gpuclaim-webhook-tls"


def _bundle_of(fake: Cluster, kind: str, name: str) -> list[str]:
    return [w["clientConfig"].get("caBundle", "") for w in fake.webhook(kind, name)["webhooks"]]


def _stored(fake: Cluster) -> dict:
    stored = fake.secret(SECRET)
    assert stored is not None
    return stored


@pytest.fixture
def bare(double: RunningDouble, client: KubeClient) -> Cluster:
    return Cluster(double, client)


@pytest.fixture
def fake(bare: Cluster) -> Cluster:
    bare.add_webhook(MWC, "gpuclaim-webhook", webhooks=1)
    bare.add_webhook(VWC, "gpuclaim-webhook", webhooks=3)
    bare.add_webhook(VWC, "someone-else", labels={"app.kubernetes.io/name": "other"})
    return bare


async def test_first_run_creates_the_secret_and_injects_every_selected_webhook(fake: Cluster) -> None:
    out = await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW))
    assert out.actions == ("issued (no CA)",)
    assert fake.writes == ["create Secret/gpuclaim-webhook-tls", f"update {MWC}/gpuclaim-webhook",
                           f"update {VWC}/gpuclaim-webhook"]
    stored = _stored(fake)
    assert stored["type"] == "kubernetes.io/tls"
    data = secret.secret_data(stored)
    assert set(data) == {"tls.crt", "tls.key", "ca.crt", "ca-signer.crt", "ca-signer.key"}
    expected = base64.b64encode(data["ca.crt"]).decode()
    assert _bundle_of(fake, MWC, "gpuclaim-webhook") == [expected]
    assert _bundle_of(fake, VWC, "gpuclaim-webhook") == [expected] * 3
    assert _bundle_of(fake, VWC, "someone-else") == [""]  # not selected: untouched
    assert out.injected == (f"{MWC}/gpuclaim-webhook", f"{VWC}/gpuclaim-webhook")
    assert_valid(stored)
    for key in (MWC, VWC):
        assert_valid(fake.webhook(key, "gpuclaim-webhook"))


async def test_a_second_run_writes_nothing(fake: Cluster) -> None:
    await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW))
    before = _stored(fake), len(fake.writes), fake.double.store.rv
    out = await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW + timedelta(days=100)))
    assert out.actions == () and not out.changed and out.injected == ()
    assert (_stored(fake), len(fake.writes), fake.double.store.rv) == before  # no write reached the store


async def test_check_reports_what_would_change_and_writes_nothing(fake: Cluster) -> None:
    out = await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW), check=True)
    assert out.actions == ("issued (no CA)",) and out.secret_written
    assert out.injected == (f"{MWC}/gpuclaim-webhook", f"{VWC}/gpuclaim-webhook")
    assert fake.writes == [] and fake.secret(SECRET) is None


async def test_a_config_edited_concurrently_is_reread_and_injected(fake: Cluster) -> None:
    fake.conflict_once.add("gpuclaim-webhook")
    out = await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW))
    data = secret.secret_data(_stored(fake))
    expected = base64.b64encode(data["ca.crt"]).decode()
    assert _bundle_of(fake, MWC, "gpuclaim-webhook") == [expected]
    assert _bundle_of(fake, VWC, "gpuclaim-webhook") == [expected] * 3
    assert sorted(out.injected) == [f"{MWC}/gpuclaim-webhook", f"{VWC}/gpuclaim-webhook"]


async def test_a_secret_written_concurrently_makes_the_run_start_over_from_it(fake: Cluster) -> None:
    await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW))
    fake.conflict_once.add("gpuclaim-webhook-tls")
    later = NOW + timedelta(days=340)  # inside the serving renewal window
    out = await reconcile.reconcile(fake, target=TARGET, now=_clock(later))
    assert out.actions[0].startswith("rotated serving cert")
    assert fake.writes.count("update Secret/gpuclaim-webhook-tls") == 1


async def test_a_concurrent_create_is_a_conflict_and_the_winner_is_kept(fake: Cluster) -> None:
    await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW))
    winner = _stored(fake)
    await fake.double.store.delete(BY_KIND[("v1", "Secret")], "gpuclaim", SECRET)
    real_get = fake.get_secret
    calls = 0

    async def get_then_lose_the_race(namespace: str, name: str) -> dict:
        nonlocal calls
        calls += 1
        if calls == 1:  # another run creates the Secret after our read said it is missing
            body = {k: v for k, v in winner.items() if k != "metadata"}
            body["metadata"] = {"name": SECRET, "labels": winner["metadata"].get("labels", {})}
            await fake.double.store.create(BY_KIND[("v1", "Secret")], namespace, body)
            raise reconcile.api.NotFound("not yet")
        return await real_get(namespace, name)

    fake.get_secret = get_then_lose_the_race  # type: ignore[method-assign]
    out = await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW))
    assert calls == 2  # the create got 409 AlreadyExists (kubeapi: Conflict) and the run read again
    assert out.actions == ()  # the winner's material is valid: adopted as is
    assert _stored(fake)["data"] == winner["data"]
    assert material.fingerprint(out.material.signer.cert) == material.fingerprint(  # type: ignore[union-attr]
        secret.decode(secret.secret_data(winner)).signer.cert)  # type: ignore[union-attr]


async def test_a_secret_of_another_type_is_not_overwritten(fake: Cluster) -> None:
    await fake.create_secret("gpuclaim", {"metadata": {"name": SECRET}, "type": "Opaque", "data": {}})
    with pytest.raises(reconcile.SetupError, match=r"has type 'Opaque', gpuclaim stores 'kubernetes\.io/tls'"):
        await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW))


async def test_foreign_keys_and_labels_in_the_secret_are_kept(fake: Cluster) -> None:
    await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW))
    stored = _stored(fake)
    stored["data"]["note.txt"] = base64.b64encode(b"hello").decode()
    stored["metadata"]["labels"]["team"] = "ml"
    del stored["data"]["ca.crt"]  # damaged: must be rewritten
    await fake.put(stored)
    out = await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW))
    assert out.actions == ("rewrote Secret (stored keys were incomplete or stale)",)
    stored = _stored(fake)
    assert stored["data"]["note.txt"] == base64.b64encode(b"hello").decode()
    assert stored["metadata"]["labels"]["team"] == "ml"
    assert "ca.crt" in stored["data"]


async def test_a_ca_rotation_across_runs_switches_only_after_the_bundle_is_injected(fake: Cluster) -> None:
    first = await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW))
    policy = rotation.Policy()
    t = first.material.signer.not_after - policy.ca_renew_before + timedelta(days=1)  # type: ignore[union-attr]
    step1 = await reconcile.reconcile(fake, target=TARGET, now=_clock(t))
    assert step1.actions[0].startswith("introduced next CA")
    assert step1.injected  # both CAs now in every caBundle
    bundle = base64.b64decode(_bundle_of(fake, MWC, "gpuclaim-webhook")[0])
    assert len(material.parse_certs(bundle)) == 2
    # a webhook configuration re-applied by helm meanwhile, without the new bundle: no switch yet
    cfg = fake.webhook(VWC, "gpuclaim-webhook")
    cfg["webhooks"][1]["clientConfig"]["caBundle"] = base64.b64encode(first.material.bundle_pem()).decode()
    await fake.put(cfg)
    held = await reconcile.reconcile(fake, target=TARGET, now=_clock(t + timedelta(hours=1)))
    assert held.actions == () and held.injected == (f"{VWC}/gpuclaim-webhook",)  # re-injected, not switched
    step2 = await reconcile.reconcile(fake, target=TARGET, now=_clock(t + timedelta(hours=2)))
    assert step2.actions[0].startswith("rotated CA (overlap until ")
    assert step2.injected == ()  # the bundle (both CAs) did not change, only its order of use
    data = secret.secret_data(_stored(fake))
    assert set(data) == {"tls.crt", "tls.key", "ca.crt", "ca-signer.crt", "ca-signer.key", "ca-previous.crt"}
    step3 = await reconcile.reconcile(fake, target=TARGET, now=_clock(step2.overlap_until))  # type: ignore[arg-type]
    assert step3.actions == ("retired previous CA (overlap over)",)
    assert len(material.parse_certs(base64.b64decode(_bundle_of(fake, MWC, "gpuclaim-webhook")[0]))) == 1


async def test_without_any_webhook_configuration_the_secret_is_still_managed(bare: Cluster) -> None:
    fake = bare
    out = await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW))
    assert out.actions == ("issued (no CA)",) and out.webhook_configurations == 0 and out.injected == ()


async def test_a_garbage_cabundle_counts_as_not_trusting_anything(fake: Cluster) -> None:
    await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW))
    cfg = fake.webhook(MWC, "gpuclaim-webhook")
    cfg["webhooks"][0]["clientConfig"]["caBundle"] = base64.b64encode(b"!!not a certificate!!").decode()
    await fake.put(cfg)
    configs = await fake.list_webhook_configurations(MWC, "app.kubernetes.io/name=gpuclaim")
    assert reconcile.trusted_everywhere(configs) == frozenset()
    out = await reconcile.reconcile(fake, target=TARGET, now=_clock(NOW))
    assert out.injected == (f"{MWC}/gpuclaim-webhook",)
