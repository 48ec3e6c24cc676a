"""Run the double on a loopback port (TLS by default), write its kubeconfig, preload manifests."""

from __future__ import annotations

import base64
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml
from aiohttp import web

from gpuclaim.double import tls as selfsigned
from gpuclaim.double.apiserver import errors
from gpuclaim.double.apiserver.app import FAULTS, SETTINGS, STORE, Settings, create_app
from gpuclaim.double.apiserver.faults import Faults
from gpuclaim.double.apiserver.resources import BY_KEY
from gpuclaim.double.apiserver.store import Store


@dataclass
class RunningDouble:
    """A started double: `url`, `kubeconfig`, and the in-process `store` and `faults` for tests."""

    runner: web.AppRunner
    url: str
    kubeconfig: Path
    ca_pem: bytes | None
    app: web.Application

    @property
    def store(self) -> Store:
        return self.app[STORE]

    @property
    def faults(self) -> Faults:
        return self.app[FAULTS]

    @property
    def settings(self) -> Settings:
        return self.app[SETTINGS]

    async def close(self) -> None:
        self.store.close_watches()
        await self.runner.cleanup()


def write_kubeconfig(path: Path, *, url: str, ca_pem: bytes | None) -> Path:
    cluster: dict[str, Any] = {"server": url}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "double",
        "clusters": [{"name": "double", "cluster": cluster}],
        # the double does not authenticate; a token is there so clients exercise their auth header path
        "users": [{"name": "double", "user": {"token": "double-token"}}],
        "contexts": [{"name": "double", "context": {"cluster": "double", "user": "double"}}],
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _documents(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".json":
        docs: list[Any] = [orjson.loads(path.read_bytes())]
    else:
        docs = list(yaml.load_all(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    out: list[dict[str, Any]] = []
    for doc in docs:
        if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List") and "items" in doc:
            item_kind = str(doc["kind"])[: -len("List")]
            for item in doc["items"]:
                if item_kind and item_kind != "":  # typed lists leave kind/apiVersion off their items
                    item.setdefault("kind", item_kind)
                    item.setdefault("apiVersion", doc.get("apiVersion"))
                out.append(item)
        elif isinstance(doc, dict):
            out.append(doc)
    return out


def load_directory(store: Store, directory: Path) -> int:
    """Preload every object in DIR's *.yaml/*.yml/*.json (Lists expanded), namespaces first."""
    objects: list[dict[str, Any]] = []
    for path in sorted(directory.iterdir()):
        if path.suffix in (".yaml", ".yml", ".json") and path.is_file():
            try:
                objects.extend(_documents(path))
            except (yaml.YAMLError, orjson.JSONDecodeError) as exc:
                raise errors.ApiError(400, f"{path}: not valid YAML/JSON: {exc}") from None
    objects.sort(key=lambda o: o.get("kind") != "Namespace")
    namespaces = {o["metadata"]["name"] for o in objects if o.get("kind") == "Namespace"}
    namespaces |= {o["metadata"]["name"] for o in store.list(BY_KEY["/v1/namespaces"], None, lambda _: True)[0]}
    for obj in objects:
        namespace = obj.get("metadata", {}).get("namespace")
        if namespace and namespace not in namespaces and obj.get("kind") != "Namespace":
            namespaces.add(namespace)
            store.restore({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        try:
            store.restore(obj)
        except errors.ApiError as exc:
            name = obj.get("metadata", {}).get("name")
            raise errors.ApiError(exc.code, f"{obj.get('kind')} {name!r}: {exc.message}") from None
    return len(objects)


async def serve(*, host: str = "127.0.0.1", port: int = 0, store: Store | None = None,
                workdir: Path, tls: bool = True, tls_cert: Path | None = None, tls_key: Path | None = None,
                tls_ca: Path | None = None, settings: Settings | None = None) -> RunningDouble:
    """Start the double in the running loop; `port=0` picks a free port."""
    app = create_app(store, settings=settings)
    ssl_context = None
    ca_pem = None
    if tls:
        if tls_cert is None or tls_key is None:
            files = selfsigned.issue(workdir / "tls", hosts=(host, "localhost"))
            tls_cert, tls_key, ca_pem = files.cert_path, files.key_path, files.ca_pem
        else:
            ca_pem = (tls_ca or tls_cert).read_bytes()
        ssl_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ssl_context.load_cert_chain(tls_cert, tls_key)
    runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
    await site.start()
    bound = site.port  # the bound port when port 0 asked for one
    url = f"{'https' if tls else 'http'}://{host}:{bound}"
    kubeconfig = write_kubeconfig(workdir / "kubeconfig", url=url, ca_pem=ca_pem)
    return RunningDouble(runner, url, kubeconfig, ca_pem, app)
