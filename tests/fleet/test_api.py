"""The fleet app through HTTP (in process): status codes, headers, filters, since, the sign-in cookie.

The RBAC behind the reviews is the apiserver's: tests/e2e/test_fleet.py and tests/realkube/test_realkube_fleet.py
ask the API double and real apiservers."""

from __future__ import annotations

from typing import Any

import orjson
from test_access import reviewer
from test_model import CONFIG, claim, gpu, node, slice_

from gpuclaim.fleet import access, api, model


def make_app() -> tuple[Any, model.FleetIndex]:
    index = model.FleetIndex(CONFIG)
    index.on_event("Node", "ADDED", node("n-0"))
    index.on_event("ResourceSlice", "ADDED", slice_("n-0", [gpu("gpu-0", "r"), gpu("gpu-1", "r")]))
    index.on_event("ResourceClaim", "ADDED", claim("team-a", "a", "n-0", ["gpu-0"], "a-0"))
    index.on_event("ResourceClaim", "ADDED", claim("team-b", "b", "n-0", ["gpu-1"], "b-0"))
    return api.create_app(CONFIG, index=index, access=access.Access(reviewer())), index


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_status_codes_and_headers(aiohttp_client: Any) -> None:
    app, index = make_app()
    client = await aiohttp_client(app)
    r = await client.get("/api/v1/fleet")
    assert r.status == 401 and r.headers["WWW-Authenticate"].startswith("Bearer")
    assert r.headers["Content-Security-Policy"].startswith("default-src 'self'")
    assert (await client.get("/api/v1/fleet", headers=bearer("t-bob"))).status == 403
    r = await client.get("/api/v1/fleet", headers=bearer("t-admin"))
    assert r.status == 200
    body = orjson.loads(await r.read())
    assert body["kind"] == "Fleet" and body["scope"]["clusterWide"]
    assert b"b-0" in await r.read()
    r = await client.get(f"/api/v1/fleet?since={body['revision']}", headers=bearer("t-admin"))
    assert r.status == 304
    index.on_event("ResourceClaim", "DELETED", claim("team-b", "b", "n-0", ["gpu-1"], "b-0"))
    r = await client.get(f"/api/v1/fleet?since={body['revision']}", headers=bearer("t-admin"))
    assert r.status == 200 and orjson.loads(await r.read())["revision"] > body["revision"]
    r = await client.get("/api/v1/fleet?driver=bad_name!", headers=bearer("t-admin"))
    assert r.status == 400 and orjson.loads(await r.read())["parameter"] == "driver"
    assert (await client.get("/healthz")).status == 200


async def test_namespace_viewer_sees_only_their_namespace(aiohttp_client: Any) -> None:
    app, _ = make_app()
    client = await aiohttp_client(app)
    r = await client.get("/api/v1/fleet", headers=bearer("t-alice"))
    raw = await r.read()
    assert r.status == 200 and b"a-0" in raw and b"b-0" not in raw and b"team-b" not in raw
    r = await client.get("/api/v1/fleet?namespace=team-b", headers=bearer("t-alice"))
    assert r.status == 403 and orjson.loads(await r.read())["parameter"] == "namespace"
    # the page says the same to a person, in a page
    r = await client.get("/fleet?namespace=team-b", headers=bearer("t-alice"))
    text = await r.text()
    assert r.status == 403 and r.content_type == "text/html"
    assert "you may not list pods in namespace &#x27;team-b&#x27;" in text and "b-0" not in text
    r = await client.get("/fleet?driver=bad_name!", headers=bearer("t-alice"))
    assert r.status == 400 and r.content_type == "text/html" and "driver: " in await r.text()


async def test_sign_in_sets_a_cookie_the_page_and_api_accept(aiohttp_client: Any) -> None:
    app, _ = make_app()
    client = await aiohttp_client(app)
    r = await client.get("/fleet")
    assert r.status == 401 and "<form" in await r.text()
    r = await client.post("/fleet/login", data={"token": "t-bob"}, allow_redirects=False)
    assert r.status == 403 and api.COOKIE not in r.cookies
    r = await client.post("/fleet/login", data={"token": "t-alice"}, allow_redirects=False)
    assert r.status == 303
    cookie = r.cookies[api.COOKIE]
    assert cookie["httponly"] and cookie["samesite"] == "Strict"
    r = await client.get("/fleet")
    text = await r.text()
    assert r.status == 200 and "n-0" in text and "b-0" not in text
    r = await client.get("/api/v1/fleet")
    assert r.status == 200
    r = await client.post("/fleet/login", data={"token": "t-alice"}, headers={"Origin": "https://evil.example"},
                          allow_redirects=False)
    assert r.status == 403


async def test_static_names_are_checked(aiohttp_client: Any) -> None:
    app, _ = make_app()
    client = await aiohttp_client(app)
    for name in ("..%2fapi.py", "api.py", "x.js", "%2e%2e"):
        r = await client.get(f"/fleet/static/{name}")
        assert r.status == 404, name


async def test_a_fleet_still_being_built_is_503_not_a_long_pause(aiohttp_client: Any) -> None:
    index = model.FleetIndex(CONFIG)
    for i in range(api.MAX_PENDING_NODES + 1):
        index.on_event("ResourceSlice", "ADDED", slice_(f"n-{i}", [gpu("gpu-0", "r")]))
    client = await aiohttp_client(api.create_app(CONFIG, index=index, access=access.Access(reviewer())))
    r = await client.get("/api/v1/fleet", headers=bearer("t-admin"))
    assert r.status == 503 and r.headers["Retry-After"] and "being built" in (await r.json())["message"]
    while index.flush(50):  # what fleet/serve.py's background task does
        pass
    r = await client.get("/api/v1/fleet", headers=bearer("t-admin"))
    assert r.status == 200 and len((await r.json())["nodes"]) == api.MAX_PENDING_NODES + 1


def test_driver_summaries_split_a_node_by_driver() -> None:
    index = model.FleetIndex(CONFIG)
    index.on_event("ResourceSlice", "ADDED", slice_("n-0", [gpu("gpu-0", "r"), gpu("gpu-1", "r")]))
    other = slice_("n-0", [{"name": "nic-0", "attributes": {}}], name="n-0-nic")
    other["spec"]["driver"] = "nic.example.com"
    index.on_event("ResourceSlice", "ADDED", other)
    (entry,) = index.nodes()
    split = entry.driver_summaries()
    assert split["gpu.nvidia.com"]["devices"]["total"] == 2 and split["nic.example.com"]["devices"]["total"] == 1
    assert split["gpu.nvidia.com"]["largestFreeTightGroup"] == 2
