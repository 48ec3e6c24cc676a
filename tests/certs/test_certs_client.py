"""The scheduler's client certificate (`gpuclaim certs --client-name`, issue 22): issued with the serving pair,
signed by the same CA, for client authentication only, renewed with it and re-signed at a CA switch; removed when
no longer asked for; bad names refused naming the flag. Through the pure plan and the real CLI."""

from __future__ import annotations

import stat
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from certs_helpers import NAMES, NOW, run_certs
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from gpuclaim.certs import material, rotation, selfsigned
from gpuclaim.commands import certs as certs_command

NAME = "gpuclaim-scheduler"


pytestmark = pytest.mark.usefixtures("no_ambient_cluster")


def _usages(cert: x509.Certificate) -> list[x509.ObjectIdentifier]:
    return list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


def test_a_fresh_plan_issues_a_client_cert_for_client_auth_only_from_the_ca() -> None:
    p = rotation.plan(rotation.Material(), names=NAMES, now=NOW, client_name=NAME)
    m = p.material
    assert m.client is not None and m.signer is not None
    assert p.actions == ("issued (no CA)", f"issued client cert {NAME!r} (no client cert)")
    assert selfsigned.common_name(m.client.cert) == NAME
    assert material.issued_by(m.client.cert, m.signer.cert)
    assert _usages(m.client.cert) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert not material.dns_names(m.client.cert)  # a client identity, never a server's
    assert rotation.plan(m, names=NAMES, now=NOW + timedelta(days=1), client_name=NAME).actions == ()


@pytest.mark.parametrize(("change", "reason"), [
    ({"now": NOW + timedelta(days=250)}, "client cert past 67% of its lifetime"),
    ({"client_name": "other-scheduler"}, "client cert name changed"),
    ({"policy": rotation.Policy(key_type="rsa-2048")}, "client key type changed to rsa-2048"),
], ids=["due", "renamed", "key-type"])  # fmt: skip
def test_the_client_cert_is_renewed_like_the_serving_cert(change: dict[str, Any], reason: str) -> None:
    m = rotation.plan(rotation.Material(), names=NAMES, now=NOW, client_name=NAME).material
    kwargs: dict[str, Any] = {"now": NOW + timedelta(days=1), "client_name": NAME, **change}
    p = rotation.plan(m, names=NAMES, **kwargs)
    assert any(a.startswith("issued client cert") and a.endswith(f"({reason})") for a in p.actions), p.actions
    assert p.material.client is not None and p.material.client.cert != m.client.cert  # type: ignore[union-attr]
    assert selfsigned.common_name(p.material.client.cert) == kwargs["client_name"]


def test_a_ca_switch_re_signs_the_client_cert_and_dropping_the_name_removes_it() -> None:
    start = rotation.plan(rotation.Material(), names=NAMES, now=NOW, client_name=NAME).material
    introduce = NOW + timedelta(days=3650 - 364)
    step1 = rotation.plan(start, names=NAMES, now=introduce, client_name=NAME)
    assert step1.material.next is not None
    step2 = rotation.plan(step1.material, names=NAMES, now=introduce + timedelta(hours=1), client_name=NAME)
    m = step2.material
    assert m.signer == step1.material.next and m.client is not None
    assert material.issued_by(m.client.cert, m.signer.cert)
    assert step2.actions[-1].endswith("(client cert not signed by the current CA)")
    gone = rotation.plan(m, names=NAMES, now=introduce + timedelta(hours=2))
    assert gone.actions == ("removed client cert (none asked for)",) and gone.material.client is None


def test_the_cli_writes_the_client_pair_and_keeps_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report, _ = run_certs(capsys, "--out-dir", str(tmp_path), "--client-name", NAME, "-o", "json")
    assert code == 0 and report["clientCert"]["subject"] == f"CN={NAME}"
    assert {"client.crt", "client.key"} <= {p.name for p in tmp_path.iterdir()}
    assert stat.S_IMODE((tmp_path / "client.key").stat().st_mode) == 0o600
    pair = material.load_pair((tmp_path / "client.crt").read_bytes(), (tmp_path / "client.key").read_bytes())
    ca = material.parse_certs((tmp_path / "ca.crt").read_bytes())
    assert any(material.issued_by(pair.cert, c) for c in ca)
    code, again, _ = run_certs(capsys, "--out-dir", str(tmp_path), "--client-name", NAME, "-o", "json")
    assert code == 0 and again["actions"] == ["unchanged"]
    code, text, _ = run_certs(capsys, "--out-dir", str(tmp_path), "--client-name", NAME)
    assert f"client cert: CN={NAME}; not after " in text
    code, dropped, _ = run_certs(capsys, "--out-dir", str(tmp_path), "-o", "json")
    assert dropped["actions"] == ["removed client cert (none asked for)"] and dropped["clientCert"] is None
    assert sorted(dropped["filesRemoved"]) == ["client.crt", "client.key"]


@pytest.mark.parametrize("name", ["", "has space", "-dash-first", "x" * 65, "CN=evil,O=system:masters"])
def test_a_bad_client_name_is_a_usage_error_naming_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            name: str) -> None:
    code, _, err = run_certs(capsys, "--out-dir", str(tmp_path), f"--client-name={name}")
    assert code == 2 and "--client-name" in err and not list(tmp_path.iterdir())


def test_the_clock_given_to_the_cli_drives_the_client_renewal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    clock: list[datetime] = [NOW]
    monkeypatch.setattr(certs_command, "_now", lambda: clock[0])
    run_certs(capsys, "--out-dir", str(tmp_path), "--client-name", NAME, "-o", "json")
    first = (tmp_path / "client.crt").read_bytes()
    clock[0] = NOW + timedelta(days=340)
    code, report, _ = run_certs(capsys, "--out-dir", str(tmp_path), "--client-name", NAME, "-o", "json")
    assert code == 0 and any(a.startswith("issued client cert") for a in report["actions"])
    assert (tmp_path / "client.crt").read_bytes() != first
