"""The demo report: the checks it states about itself, and its text form (`-o json` prints the dict as is)."""

from __future__ import annotations

import textwrap
from typing import Any, TextIO

Obj = dict[str, Any]
_WIDTH = 100


def checks(report: Obj) -> list[Obj]:
    """Facts the demo asserts about its own run; a failed one makes the command exit 1."""
    out = []
    for w in report["workloads"]:
        got = w["admission"]
        ok = got == w["expected"] or (w["expected"] == "converted" and got == "created")
        detail = f"expected {w['expected']}, got {got}"
        if ok and w["expected"] == "denied":
            ok = bool(w.get("message"))
            detail += " with a reason" if ok else " without a reason"
        if ok and w["kind"] == "Pod" and got != "denied" and "extender" not in report["stack"]["skipped"]:
            outcome = (w.get("scheduling") or {}).get("outcome")
            ok = outcome == "scheduled"
            detail += f"; scheduling: {outcome}"
        out.append({"check": f"{w['key']}: {w['title']}", "ok": ok, "detail": detail})
    train = next((w for w in report["workloads"] if w["key"] == "train-4gpu"), None)
    if train and "extender" not in report["stack"]["skipped"]:
        s = train.get("scheduling") or {}
        ok = s.get("locality") is not None and s.get("locality") == s.get("bestFeasibleLocality")
        out.append({"check": "the 4-GPU pod landed on a node with the best topology", "ok": ok,
                    "detail": f"locality {s.get('locality')} on {s.get('node')}, best feasible "
                              f"{s.get('bestFeasibleLocality')}"})
        lagging = [w["name"] for w in report["workloads"]
                   if (w.get("scheduling") or {}).get("extenderConverged") is False]
        out.append({"check": "the extender's cache matched the double before every scheduling cycle",
                    "ok": not lagging, "detail": f"lagging for {lagging}" if lagging else "all converged"})
    return out


def _line(out: TextIO, text: str = "", indent: int = 0) -> None:
    print(" " * indent + text, file=out)


def _wrapped(out: TextIO, label: str, text: str, indent: int = 4) -> None:
    """`label` then `text` wrapped at word boundaries, continuation lines aligned under the text."""
    first = " " * indent + label
    pad = " " * len(first)
    lines: list[str] = []
    for paragraph in text.splitlines() or [""]:
        lines.extend(textwrap.wrap(paragraph, width=_WIDTH - len(pad), break_on_hyphens=False) or [""])
    for index, line in enumerate(lines):
        print((first if index == 0 else pad) + line, file=out)


def render(report: Obj, out: TextIO) -> None:
    stack, fleet = report["stack"], report["fleet"]
    _line(out, "gpuclaim demo: legacy GPU workloads through the webhook, the DRA allocator and the extender")
    _line(out, "(on a Kubernetes API double and a kube-scheduler double, not a real cluster; see docs/dev/doubles.md)")
    _line(out)
    _line(out, f"fleet: {fleet['summary']}")
    for note in fleet["provenance"]:
        _wrapped(out, "- ", note, indent=2)
    _line(out, f"stack: API double {stack['apiserver']['url']} (pid {stack['apiserver']['pid']})")
    for part in ("webhook", "extender"):
        info = stack.get(part)
        if info:
            _line(out, f"       gpuclaim {part} {info['url']} (pid {info['pid']}, TLS from gpuclaim certs)", 0)
    if stack.get("fleet"):
        _line(out, f"       fleet page {stack['fleet']['url']} (viewer tokens: {stack['fleet']['tokens']})", 0)
    for part, why in stack["skipped"].items():
        _wrapped(out, f"       SKIPPED {part}: ", why, indent=0)
    certs = stack["certs"]
    _wrapped(out, "certs: ", f"{'; '.join(certs['actions'])}; caBundle injected into "
                             f"{', '.join(certs['injected']) or 'nothing'}; serving cert for "
                             f"{', '.join(certs['names'])}", indent=0)
    timings = ", ".join(f"{part} {seconds:.1f}s" for part, seconds in stack["timings"].items())
    _line(out, f"started in {stack['startSeconds']:.1f} s ({timings})")
    _line(out)
    _line(out, "WORKLOADS")
    for index, w in enumerate(report["workloads"], 1):
        _line(out)
        _line(out, f"[{index}] {w['title']}  ({w['kind']} {w['namespace']}/{w['name']})")
        _workload(out, w)
    _line(out)
    _line(out, "DEVICES PER NODE  (# held, . free; M = MIG device)")
    for node in report["nodes"]:
        _node(out, node)
    _line(out)
    passed = sum(1 for c in report["checks"] if c["ok"])
    _line(out, f"CHECKS {passed}/{len(report['checks'])} passed")
    for c in report["checks"]:
        _wrapped(out, f"  [{'ok' if c['ok'] else 'FAILED'}] ", f"{c['check']}: {c['detail']}", indent=0)
    _line(out, f"done in {report['seconds']:.1f} s")


def _workload(out: TextIO, w: Obj) -> None:
    if w["admission"] == "denied":
        # a selector that does not compile is refused by the apiserver itself, before any webhook
        who = "webhook:  " if "admission webhook" in str(w.get("message")) else "apiserver:"
        _wrapped(out, who, f"DENIED ({w['httpStatus']} {w.get('reason')})")
        _wrapped(out, "          ", str(w.get("message")))
        return
    if w["admission"] == "untouched":
        _line(out, "webhook:  not called or no change (created as submitted)", 4)
    elif w["admission"] == "created":
        _line(out, "webhook:  allowed, created", 4)
    else:
        _line(out, "webhook:  converted", 4)
        for claim in w.get("claims") or ():
            source = f"template {claim['template']}" if "template" in claim else f"shared claim {claim['claim']}"
            _line(out, f"claim {claim['name']} from {source}:", 14)
            for request in claim["requests"]:
                _wrapped(out, "- ", request, indent=16)
        for op in w.get("patch") or ():
            _wrapped(out, "          patch: ", op)
    for warning in w.get("warnings") or ():
        _wrapped(out, "          warning: ", warning)
    s = w.get("scheduling")
    if not s:
        return
    if s["outcome"] != "scheduled":
        _wrapped(out, "landed:   ", f"{s['outcome'].upper()}: {s['message']}")
        return
    devices = ", ".join(d.split("/", 1)[1] for d in s["devices"]) or "no devices"
    score = s.get("score")
    scored = f"score {score}/10 (best of {s['feasibleNodes']} feasible: {s['bestFeasibleScore']})" \
        if score is not None else "not scored"
    _wrapped(out, "landed:   ", f"{s['node']}: {devices}; {scored}")
    if s.get("reason"):
        _wrapped(out, "why:      ", s["reason"])
    for alt in (s.get("alternatives") or ())[:2]:
        _wrapped(out, "vs:       ", f"{alt['node']} score {alt['score']}: {alt['reason']}")
    for warning in s.get("warnings") or ():
        _wrapped(out, "note:     ", warning)


def _node(out: TextIO, node: Obj) -> None:
    marks = "".join(("#" if d["heldBy"] else ".") if d["type"] != "mig" else ("M" if d["heldBy"] else "m")
                    for d in node["devices"])
    holders: dict[str, list[str]] = {}
    for d in node["devices"]:
        if d["heldBy"]:
            holders.setdefault(d["heldBy"], []).append(d["name"])
    _line(out, f"{node['node']:<11} {node['product'] or '':<22} {node['used']:>2}/{node['total']:<3}[{marks}]", 2)
    for claim, names in holders.items():
        _wrapped(out, f"{claim}: ", ", ".join(names), indent=40)
