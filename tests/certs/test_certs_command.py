"""`gpuclaim certs` through the real CLI: local files only, bad input (exit 2 with the flag named),
and against the Kubernetes API double over TLS: Secret stored, caBundle injected, second run
unchanged, and the served certificate verified with the caBundle read back from the cluster."""

from __future__ import annotations

import asyncio
import base64
import json
import stat
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from certs_helpers import NOW, https_server, run_certs
from official_schemas import assert_valid

from gpuclaim import cli
from gpuclaim.certs import context, material
from gpuclaim.commands import certs as certs_command
from gpuclaim.double.apiserver import RunningDouble
from gpuclaim.kube.client import KubeClient

ADMISSION = "/apis/admissionregistration.k8s.io/v1"


pytestmark = pytest.mark.usefixtures("no_ambient_cluster")


def test_local_run_issues_files_then_changes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "tls"
    argv = ("--out-dir", str(out_dir), "--ip", "127.0.0.1", "--dns", "localhost", "-o", "json")
    code, report, _ = run_certs(capsys, *argv)
    assert code == 0
    assert report["mode"] == "local" and report["actions"] == ["issued (no CA)"] and report["changed"]
    assert report["servingCert"]["dnsNames"] == [
        "gpuclaim-webhook", "gpuclaim-webhook.gpuclaim", "gpuclaim-webhook.gpuclaim.svc",
        "gpuclaim-webhook.gpuclaim.svc.cluster.local", "localhost"]
    assert report["servingCert"]["ipAddresses"] == ["127.0.0.1"]
    assert sorted(p.name for p in out_dir.iterdir()) == ["ca-signer.crt", "ca-signer.key", "ca.crt", "tls.crt",
                                                         "tls.key"]
    for key in ("tls.key", "ca-signer.key"):
        assert stat.S_IMODE((out_dir / key).stat().st_mode) == 0o600
    before = {p.name: p.read_bytes() for p in out_dir.iterdir()}
    code, again, _ = run_certs(capsys, *argv)
    assert code == 0 and again["actions"] == ["unchanged"] and not again["changed"] and again["filesWritten"] == []
    assert {p.name: p.read_bytes() for p in out_dir.iterdir()} == before


def test_local_text_output_says_what_was_done(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_certs(capsys, "--out-dir", str(tmp_path))
    assert code == 0
    assert out.splitlines()[0] == "issued (no CA)"
    assert "wrote ca-signer.key, tls.key, ca-signer.crt, ca.crt, tls.crt in" in out
    code, out, _ = run_certs(capsys, "--out-dir", str(tmp_path))
    assert out.splitlines()[0] == "unchanged"


def test_check_changes_nothing_and_exits_1_when_work_is_due(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_certs(capsys, "--out-dir", str(tmp_path / "d"), "--check")
    assert code == 1 and out.startswith("would: issued (no CA)")
    assert not (tmp_path / "d").exists()
    assert run_certs(capsys, "--out-dir", str(tmp_path / "d"))[0] == 0
    assert run_certs(capsys, "--out-dir", str(tmp_path / "d"), "--check")[0] == 0


async def test_local_files_serve_tls_that_verifies_with_the_written_ca(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_certs(capsys, "--out-dir", str(tmp_path), "--ip", "127.0.0.1")[0] == 0
    server = context.server_context(cert_file=tmp_path / "tls.crt", key_file=tmp_path / "tls.key")
    async with https_server(server) as port:
        client = context.client_context(ca_file=tmp_path / "ca.crt")
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
        assert writer.get_extra_info("ssl_object").version() == "TLSv1.3"
        writer.close()
        await writer.wait_closed()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--namespace", "Bad_NS"], "--namespace: 'Bad_NS' is not a valid namespace name"),
        (["--service=web_hook"], "--service: 'web_hook' is not a valid Service name"),
        (["--secret", "UPPER"], "--secret: 'UPPER' is not a valid Secret name"),
        (["--ip", "999.1.1.1"], "--dns/--ip: IP address '999.1.1.1' is not a valid IPv4 or IPv6 address"),
        (["--dns", "has space"], "--dns/--ip: DNS name 'has space' is not a valid host name"),
        (["--renew-before", "soon"], "--renew-before: 'soon' is not a positive duration"),
        (["--ca-overlap", "400d"],
         "--ca-overlap (400d) + --ca-switch-delay (10m) must be shorter than --ca-renew-before (365d): a CA rotation"),
        (["--ca-validity", "10d"], "--ca-renew-before (365d) must be shorter than --ca-validity (10d): "),
        (["--ca-validity", "10d", "--ca-renew-before", "5d", "--ca-overlap", "1d"],
         "--renew-before (30d) must be shorter than --ca-validity (10d): a serving certificate cannot outlive its CA"),
        (["--ca-renew-before", "20d", "--ca-overlap", "1d"],
         "--renew-before (30d) + --ca-switch-delay (10m) must be shorter than --ca-renew-before (20d): "),
        (["--serving-validity", "20d"], "--renew-before (30d) must be shorter than --serving-validity (20d): "),
        (["--key-type", "dsa"], "argument --key-type: invalid choice"),
    ],
    ids=["namespace", "service", "secret", "ip", "dns", "duration", "ca-overlap", "ca-validity", "serving-outlives-ca",
         "serving-window-past-ca-window", "serving-validity", "key-type"],
)
def test_bad_input_exits_2_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    try:
        code = cli.main(["certs", "--out-dir", str(tmp_path), *argv])
    except SystemExit as exc:  # argparse's own choice check exits 2 itself
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [
    [],
    ["--ca-validity", "10d", "--ca-renew-before", "5d", "--ca-overlap", "1d", "--renew-before", "2d"],
    ["--ca-validity", "2h", "--ca-renew-before", "1h", "--ca-overlap", "10m", "--ca-switch-delay", "1m",
     "--serving-validity", "30m", "--renew-before", "5m"],
], ids=["defaults", "short-ca", "hours"])
def test_durations_that_are_accepted_settle_on_the_second_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """Flags the command accepts never make a renewal that is due again at once (a serving cert clamped to a short
    CA's end used to be renewed at every run)."""
    assert run_certs(capsys, "--out-dir", str(tmp_path), *argv, "-o", "json")[1]["actions"] == ["issued (no CA)"]
    code, again, _ = run_certs(capsys, "--out-dir", str(tmp_path), *argv, "-o", "json")
    assert code == 0 and again["actions"] == ["unchanged"], again["actions"]


def test_a_local_ca_rotation_runs_its_three_steps_and_settles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a cluster the files stand in for the Secret: what a step retires (ca-next.* at the switch,
    ca-previous.crt after the overlap) leaves the directory, and each step is followed by `unchanged`."""
    clock = [NOW]
    monkeypatch.setattr(certs_command, "_now", lambda: clock[0])

    def step(at: datetime) -> tuple[list[str], list[str], list[str]]:
        clock[0] = at
        code, report, _ = run_certs(capsys, "--out-dir", str(tmp_path), "-o", "json")
        assert code == 0
        code, again, _ = run_certs(capsys, "--out-dir", str(tmp_path), "-o", "json")
        assert code == 0 and again["actions"] == ["unchanged"] and again["filesWritten"] == [], again
        assert run_certs(capsys, "--out-dir", str(tmp_path), "--check")[0] == 0
        return [a.split(" (")[0] for a in report["actions"]], report["filesRemoved"], sorted(
            p.name for p in tmp_path.iterdir())

    base = ["ca-signer.crt", "ca-signer.key", "ca.crt", "tls.crt", "tls.key"]
    assert step(NOW) == (["issued"], [], base)
    ca_end = NOW + timedelta(days=3650)
    introduce = ca_end - timedelta(days=364)
    # the first serving cert (365 days) has long expired by then: renewed from the old CA, as the plan says
    assert step(introduce) == (["introduced next CA", "rotated serving cert"], [],
                               sorted([*base, "ca-next.crt", "ca-next.key"]))
    assert step(introduce + timedelta(minutes=11)) == (
        ["rotated CA"], ["ca-next.crt", "ca-next.key"], sorted([*base, "ca-previous.crt"]))
    assert step(introduce + timedelta(days=31)) == (["retired previous CA"], ["ca-previous.crt"], base)


def test_an_out_dir_that_is_a_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "f").write_text("x")
    code, _, err = run_certs(capsys, "--out-dir", str(tmp_path / "f"))
    assert code == 2 and "is not a directory" in err


def test_no_cluster_and_no_out_dir_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_certs(capsys)
    assert code == 2 and err.startswith("gpuclaim certs: kubeconfig ") and len(err.splitlines()) == 1


# ---- against the API double -----------------------------------------------------------------------------------


def _webhook_configuration(kind: str, name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name, "labels": labels},
        "webhooks": [{
            "name": f"{kind.lower()[:8]}.gpuclaim.io",
            "clientConfig": {"service": {"namespace": "gpuclaim", "name": "gpuclaim-webhook", "path": "/x",
                                         "port": 443}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}],
            "sideEffects": "None" if kind.startswith("Validating") else "NoneOnDryRun",
            "admissionReviewVersions": ["v1"],
            "failurePolicy": "Ignore",
        }],
    }


async def _cli(*argv: str) -> tuple[int, str]:
    """The CLI runs its own event loop: run it in a thread so the double keeps serving from ours."""
    import contextlib
    import io

    buf = io.StringIO()

    def go() -> int:
        with contextlib.redirect_stdout(buf):
            return cli.main(["certs", *argv])

    code = await asyncio.to_thread(go)
    return code, buf.getvalue()


async def test_against_the_api_double_stores_injects_and_is_idempotent(
    double: RunningDouble, client: KubeClient, tmp_path: Path
) -> None:
    labels = {"app.kubernetes.io/name": "gpuclaim"}
    for kind, plural in (("MutatingWebhookConfiguration", "mutatingwebhookconfigurations"),
                         ("ValidatingWebhookConfiguration", "validatingwebhookconfigurations")):
        await client.create(f"{ADMISSION}/{plural}", _webhook_configuration(kind, "gpuclaim-webhook", labels))
    await client.create(f"{ADMISSION}/validatingwebhookconfigurations",
                         _webhook_configuration("ValidatingWebhookConfiguration", "unrelated", {"x": "y"}))
    await client.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                "metadata": {"name": "gpuclaim"}})
    argv = ("--kubeconfig", str(double.kubeconfig), "--namespace", "gpuclaim", "--service", "gpuclaim-webhook",
            "--secret", "gpuclaim-webhook-tls", "--ip", "127.0.0.1", "--out-dir", str(tmp_path / "out"), "-o", "json")
    code, out = await _cli(*argv)
    assert code == 0, out
    report = json.loads(out)
    assert report["mode"] == "cluster" and report["actions"] == ["issued (no CA)"]
    assert report["secret"]["written"] and report["webhookConfigurations"] == 2
    assert sorted(report["injected"]) == ["MutatingWebhookConfiguration/gpuclaim-webhook",
                                          "ValidatingWebhookConfiguration/gpuclaim-webhook"]
    assert sorted(report["filesWritten"]) == ["ca.crt", "tls.crt", "tls.key"]  # the CA key stays in the Secret

    stored = await client.get("/api/v1/namespaces/gpuclaim/secrets/gpuclaim-webhook-tls")
    assert stored["type"] == "kubernetes.io/tls"
    assert_valid(stored)
    ca_bundle = base64.b64decode(stored["data"]["ca.crt"])
    mwc = await client.get(f"{ADMISSION}/mutatingwebhookconfigurations/gpuclaim-webhook")
    assert base64.b64decode(mwc["webhooks"][0]["clientConfig"]["caBundle"]) == ca_bundle
    unrelated = await client.get(f"{ADMISSION}/validatingwebhookconfigurations/unrelated")
    assert "caBundle" not in unrelated["webhooks"][0]["clientConfig"]
    rv = stored["metadata"]["resourceVersion"], mwc["metadata"]["resourceVersion"]

    code, out = await _cli(*argv)
    again = json.loads(out)
    assert code == 0 and again["actions"] == ["unchanged"] and again["injected"] == []
    assert not again["secret"]["written"] and again["filesWritten"] == []
    stored2 = await client.get("/api/v1/namespaces/gpuclaim/secrets/gpuclaim-webhook-tls")
    mwc2 = await client.get(f"{ADMISSION}/mutatingwebhookconfigurations/gpuclaim-webhook")
    assert (stored2["metadata"]["resourceVersion"], mwc2["metadata"]["resourceVersion"]) == rv

    # kube-apiserver's view: the caBundle from the configuration verifies the certificate the server presents
    out_dir = tmp_path / "out"
    server = context.server_context(cert_file=out_dir / "tls.crt", key_file=out_dir / "tls.key")
    async with https_server(server) as port:
        ca_bundle = base64.b64decode(mwc2["webhooks"][0]["clientConfig"]["caBundle"])
        apiserver_like = context.client_context(ca_pem=ca_bundle)
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=apiserver_like,
                                                  server_hostname="gpuclaim-webhook.gpuclaim.svc")
        peer = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        writer.close()
        await writer.wait_closed()
    assert material.fingerprint(material.parse_certs(base64.b64decode(stored2["data"]["tls.crt"]))[0]) == \
        material.fingerprint(material.x509.load_der_x509_certificate(peer))


async def test_an_unreachable_cluster_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n")
    code, out = await _cli("--kubeconfig", str(kubeconfig))
    err = capsys.readouterr().err
    assert code == 1 and out == ""
    assert err.startswith("gpuclaim certs: cluster: GET ") and "unreachable" in err and len(err.splitlines()) == 1
