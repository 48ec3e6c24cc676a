"""Access verdicts: cluster-wide, per namespace, none; cached by token digest with a TTL and a bound."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from gpuclaim.fleet import access


class TableReviewer:
    """The reviews' answers from a table (the RBAC evaluation itself is tested on the API double and real
    apiservers: tests/e2e/test_fleet.py, tests/realkube/test_realkube_fleet.py)."""

    def __init__(self, users: dict[str, str], rights: set[tuple[str, str, str]]) -> None:
        self.users = users  # token -> username
        self.rights = rights  # (user, resource, namespace or "")
        self.calls = 0

    async def token_review(self, token: str) -> Mapping[str, Any] | None:
        self.calls += 1
        await asyncio.sleep(0.01)
        name = self.users.get(token)
        return None if name is None else {"username": name, "groups": ["system:authenticated"]}

    async def access_review(self, user: Mapping[str, Any], attributes: Mapping[str, str]) -> bool:
        name, resource = user["username"], attributes["resource"]
        return (name, resource, "") in self.rights or (name, resource, attributes.get("namespace", "")) in self.rights


RIGHTS = {("admin", "pods", ""), ("admin", "resourceclaims", ""), ("alice", "pods", "team-a"),
          ("pods-only", "pods", "")}


def reviewer() -> TableReviewer:
    return TableReviewer({"t-admin": "admin", "t-alice": "alice", "t-bob": "bob", "t-pods": "pods-only"}, RIGHTS)


async def test_verdicts_follow_the_rights() -> None:
    a = access.Access(reviewer())
    ns = lambda: ["team-a", "team-b"]  # noqa: E731
    assert (await a.verdict(None, ns)).status == 401
    assert (await a.verdict("nope", ns)).status == 401
    admin = await a.verdict("t-admin", ns)
    assert admin.status == 200 and admin.scope is not None and admin.scope.cluster_wide
    alice = await a.verdict("t-alice", ns)
    assert alice.scope == access.Scope(cluster_wide=False, namespaces=frozenset({"team-a"}))
    bob = await a.verdict("t-bob", ns)
    assert bob.status == 403 and "bob" in bob.message
    # list pods cluster-wide without resourceclaims: per namespace, every namespace allowed
    pods = await a.verdict("t-pods", ns)
    assert pods.scope == access.Scope(cluster_wide=False, namespaces=frozenset({"team-a", "team-b"}))


async def test_verdicts_are_cached_by_digest_for_the_ttl_and_bounded() -> None:
    now = [0.0]
    r = reviewer()
    a = access.Access(r, ttl=10, max_entries=2, clock=lambda: now[0])
    ns = lambda: ["team-a"]  # noqa: E731
    await asyncio.gather(*(a.verdict("t-alice", ns) for _ in range(20)))
    assert r.calls == 1  # concurrent requests share one review
    now[0] = 9.9
    await a.verdict("t-alice", ns)
    assert r.calls == 1
    now[0] = 10.1
    await a.verdict("t-alice", ns)
    assert r.calls == 2
    for token in ("t-bob", "t-admin", "nope"):
        await a.verdict(token, ns)
    assert len(a) == 2
    assert all(b"t-" not in k for k in a._verdicts)  # digests, never the tokens


@pytest.mark.parametrize("header", [None, "", "Basic abc", "Bearer", "Bearer  ", "Bearer a b", "bearer " + "x" * 20000])
def test_malformed_authorization_headers_carry_no_token(header: str | None) -> None:
    assert access.bearer_token(header) is None


def test_bearer_token_is_read() -> None:
    assert access.bearer_token("Bearer abc.def") == "abc.def"
