"""`gpuclaim certs`: issue or rotate the webhook's certificates, store them, inject the caBundle.

With a cluster (a kubeconfig, or in a pod): the material lives in a `kubernetes.io/tls` Secret and
the CA bundle goes into every selected webhook configuration. With only `--out-dir` and no cluster:
the same decisions on files in that directory (local runs, the demo, tests).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from gpuclaim.certs import api, files, material, reconcile, rotation, secret, selfsigned
from gpuclaim.exitstatus import ExitStatus, UsageError

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_CLIENT_NAME = re.compile(r"^[A-Za-z0-9][-A-Za-z0-9._:]{0,63}$")
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
#: the three files a server needs, and the scheduler's client pair (with --client-name); `--out-dir` gets these
#: in cluster mode (the CA key stays in the Secret)
_SERVER_FILES = (secret.TLS_CRT, secret.TLS_KEY, secret.CA_CRT, secret.CLIENT_CRT, secret.CLIENT_KEY)


def configure(parser: argparse.ArgumentParser) -> None:
    p = parser
    p.add_argument("--kubeconfig", metavar="FILE", help="cluster access (default: in-cluster, then $KUBECONFIG)")
    p.add_argument("--namespace", default="gpuclaim", help="namespace of the Service and Secret (default gpuclaim)")
    p.add_argument("--service", default="gpuclaim-webhook", help="the webhook Service name (default gpuclaim-webhook)")
    p.add_argument("--secret", default=None, help="the Secret to keep the material in (default <service>-tls)")
    p.add_argument("--webhook-selector", default=api.DEFAULT_SELECTOR, metavar="LABELSEL",
                   help=f"label selector of the webhook configurations to inject into (default {api.DEFAULT_SELECTOR})")
    p.add_argument("--out-dir", type=Path, metavar="DIR",
                   help="also write tls.crt, tls.key, ca.crt here; without cluster access, keep everything here")
    p.add_argument("--dns", action="append", default=[], metavar="NAME", help="extra DNS name (repeatable)")
    p.add_argument("--ip", action="append", default=[], metavar="ADDR", help="extra IP address, e.g. 127.0.0.1")
    p.add_argument("--client-name", metavar="CN",
                   help="also keep a client certificate with this common name (client.crt, client.key), signed "
                        "by the same CA: kube-scheduler presents it to the extender (mutual TLS, "
                        "extender.clientAuth); without it, a stored one is removed")
    p.add_argument("--key-type", choices=selfsigned.KEY_TYPES, default="ecdsa-p256")
    p.add_argument("--serving-validity", default="365d", metavar="DURATION", help="e.g. 365d (default)")
    p.add_argument("--renew-before", default="30d", metavar="DURATION",
                   help="renew the serving cert when less is left (default 30d; also past 2/3 of its lifetime)")
    p.add_argument("--ca-validity", default="3650d", metavar="DURATION", help="default 3650d")
    p.add_argument("--ca-renew-before", default="365d", metavar="DURATION", help="start a CA rotation (default 365d)")
    p.add_argument("--ca-overlap", default="30d", metavar="DURATION", help="both CAs trusted this long (default 30d)")
    p.add_argument("--ca-switch-delay", default="10m", metavar="DURATION",
                   help="minimum wait between adding the next CA to the bundle and signing with it (default 10m)")
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 if something would change")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")


#: rotation.Policy's durations and the flags that set them
_POLICY_FLAGS = {"ca_validity": "--ca-validity", "ca_renew_before": "--ca-renew-before", "ca_overlap": "--ca-overlap",
                 "ca_switch_delay": "--ca-switch-delay", "serving_validity": "--serving-validity",
                 "serving_renew_before": "--renew-before"}


def _duration(flag: str, value: str) -> timedelta:
    m = _DURATION.match(value.strip())
    if not m or float(m.group(1)) <= 0:
        raise UsageError(f"{flag}: {value!r} is not a positive duration like 30d, 12h, 10m")
    return timedelta(**{_UNITS[m.group(2)]: float(m.group(1))})


def _inputs(args: argparse.Namespace) -> tuple[reconcile.Target, rotation.Policy]:
    if not _DNS_LABEL.match(args.namespace):
        raise UsageError(f"--namespace: {args.namespace!r} is not a valid namespace name (RFC 1123 label)")
    if not _DNS_LABEL.match(args.service):
        raise UsageError(f"--service: {args.service!r} is not a valid Service name (RFC 1123 label)")
    secret_name = args.secret or f"{args.service}-tls"
    if not _DNS_SUBDOMAIN.match(secret_name):
        raise UsageError(f"--secret: {secret_name!r} is not a valid Secret name (RFC 1123 subdomain)")
    extra_dns = [d for item in args.dns for d in item.split(",") if d.strip()]
    extra_ips = [i for item in args.ip for i in item.split(",") if i.strip()]
    try:
        names = selfsigned.Names.build([*selfsigned.service_dns_names(args.service, args.namespace), *extra_dns],
                                       extra_ips)
    except ValueError as exc:
        raise UsageError(f"--dns/--ip: {exc}") from None
    try:
        policy = rotation.Policy(
            ca_validity=_duration("--ca-validity", args.ca_validity),
            ca_renew_before=_duration("--ca-renew-before", args.ca_renew_before),
            ca_overlap=_duration("--ca-overlap", args.ca_overlap),
            ca_switch_delay=_duration("--ca-switch-delay", args.ca_switch_delay),
            serving_validity=_duration("--serving-validity", args.serving_validity),
            serving_renew_before=_duration("--renew-before", args.renew_before),
            key_type=args.key_type,
        )
    except rotation.PolicyError as exc:
        def flag(field: str) -> str:
            name = _POLICY_FLAGS[field]
            return f"{name} ({getattr(args, name[2:].replace('-', '_'))})"
        raise UsageError(f"{' + '.join(flag(f) for f in exc.shorter)} must be shorter than {flag(exc.longer)}: "
                         f"{exc.why}") from None
    client_name = args.client_name
    if client_name is not None and not _CLIENT_NAME.match(client_name):
        raise UsageError(f"--client-name: {client_name!r} must be 1 to 64 characters of letters, digits and "
                         "'.-_:' (a certificate's common name)")
    return reconcile.Target(args.namespace, secret_name, names, args.webhook_selector, client_name), policy


def _now() -> datetime:
    return datetime.now(UTC)


def _local(args: argparse.Namespace, target: reconcile.Target, policy: rotation.Policy) -> dict[str, Any]:
    out_dir: Path = args.out_dir
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out-dir: {out_dir} exists and is not a directory")
    try:
        old = files.read_dir(out_dir, secret.ALL_KEYS)
    except OSError as exc:
        raise UsageError(f"--out-dir: cannot read {out_dir}: {exc.strerror}") from None
    p = rotation.plan(secret.decode(old), names=target.names, now=_now(), policy=policy,
                      client_name=target.client_name)
    data = secret.encode(p.material)
    actions = list(p.actions) or (["rewrote files (incomplete or stale)"] if data != old else [])
    written: list[str] = []
    removed: list[str] = []
    if not args.check and data != old:
        try:
            written = files.write_dir(out_dir, data, private=secret.PRIVATE_KEYS)
            # what the plan retired (the next CA once it signs, the previous CA after the overlap) leaves the
            # directory as it leaves the Secret; left behind, it would be read again at every later run
            removed = files.remove_files(out_dir, [name for name in old if name not in data])
        except OSError as exc:
            raise UsageError(f"--out-dir: cannot write {out_dir}: {exc.strerror}") from None
    return _report("local", actions, p.material, p.overlap_until, args=args, files_written=written,
                   files_removed=removed, would_write=data != old)


async def _cluster(args: argparse.Namespace, target: reconcile.Target, policy: rotation.Policy) -> dict[str, Any]:
    from gpuclaim import kube  # lazily: local runs need no cluster client
    from gpuclaim.certs import kubeapi
    from gpuclaim.kube import config as kube_config

    try:
        cfg = kube_config.load(args.kubeconfig)
    except kube.KubeConfigError as exc:
        raise UsageError(str(exc)) from None
    client = kube.KubeClient(cfg)
    try:
        outcome = await reconcile.reconcile(kubeapi.KubeCertsApi(client), target=target, now=_now, policy=policy,
                                            check=args.check)
    except reconcile.SetupError as exc:
        raise UsageError(str(exc)) from None
    finally:
        await client.close()
    written: list[str] = []
    if args.out_dir is not None and not args.check:
        data = {k: v for k, v in secret.encode(outcome.material).items() if k in _SERVER_FILES}
        try:
            written = files.write_dir(args.out_dir, data, private=secret.PRIVATE_KEYS)
        except OSError as exc:
            raise UsageError(f"--out-dir: cannot write {args.out_dir}: {exc.strerror}") from None
    report = _report("cluster", list(outcome.actions), outcome.material, outcome.overlap_until, args=args,
                     files_written=written, would_write=outcome.secret_written)
    report["secret"] = {"namespace": target.namespace, "name": target.secret_name,
                        "written": outcome.secret_written and not args.check}
    report["webhookConfigurations"] = outcome.webhook_configurations
    report["injected"] = list(outcome.injected)
    report["changed"] = report["changed"] or bool(outcome.injected)
    return report


def _cert_summary(pair: material.KeyPair) -> dict[str, Any]:
    return {"subject": pair.cert.subject.rfc4514_string(), "notAfter": pair.not_after.isoformat(),
            "sha256": material.fingerprint(pair.cert)}


def _report(mode: str, actions: list[str], m: rotation.Material, overlap_until: datetime | None, *,
            args: argparse.Namespace, files_written: list[str], would_write: bool,
            files_removed: list[str] | None = None) -> dict[str, Any]:
    assert m.serving is not None and m.signer is not None
    serving = _cert_summary(m.serving)
    serving["dnsNames"] = list(material.dns_names(m.serving.cert))
    serving["ipAddresses"] = list(material.ip_addresses(m.serving.cert))
    return {
        "version": "1",
        "mode": mode,
        "check": bool(args.check),
        "changed": bool(actions) or would_write,
        "actions": actions or ["unchanged"],
        "servingCert": serving,
        "clientCert": _cert_summary(m.client) if m.client is not None else None,
        "ca": _cert_summary(m.signer),
        "caBundle": [material.fingerprint(c) for c in m.bundle()],
        "overlapUntil": overlap_until.isoformat() if overlap_until else None,
        "outDir": str(args.out_dir) if args.out_dir is not None else None,
        "filesWritten": files_written,
        "filesRemoved": files_removed or [],
    }


def _print_text(r: dict[str, Any]) -> None:
    prefix = "would: " if r["check"] and r["changed"] else ""
    for action in r["actions"]:
        print(f"{prefix}{action}")
    s = r["servingCert"]
    print(f"serving cert: {', '.join(s['dnsNames'] + s['ipAddresses'])}; not after {s['notAfter']}")
    if r["clientCert"] is not None:
        print(f"client cert: {r['clientCert']['subject']}; not after {r['clientCert']['notAfter']}")
    print(f"CA: {r['ca']['subject']}; not after {r['ca']['notAfter']}; {len(r['caBundle'])} CA(s) in caBundle")
    if "secret" in r:
        sec = r["secret"]
        print(f"Secret {sec['namespace']}/{sec['name']}: {'written' if sec['written'] else 'not written'}")
        verb = "would inject" if r["check"] else "injected"
        print(f"caBundle: {r['webhookConfigurations']} webhook configuration(s) selected; "
              f"{verb} into: {', '.join(r['injected']) or 'none needed'}")
    if r["filesWritten"]:
        print(f"wrote {', '.join(r['filesWritten'])} in {r['outDir']}")
    if r["filesRemoved"]:
        print(f"removed {', '.join(r['filesRemoved'])} from {r['outDir']}")


def run(args: argparse.Namespace) -> int:
    target, policy = _inputs(args)
    local = args.out_dir is not None and args.kubeconfig is None and not os.environ.get("KUBERNETES_SERVICE_HOST")
    try:
        report = _local(args, target, policy) if local else asyncio.run(_cluster(args, target, policy))
    except api.ApiError as exc:
        print(f"gpuclaim certs: cluster: {exc.message}", file=sys.stderr)
        return ExitStatus.FINDINGS
    if args.output == "json":
        sys.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        _print_text(report)
    return ExitStatus.FINDINGS if args.check and report["changed"] else ExitStatus.OK
