"""The double's object store: versioned objects, a bounded event history and live watchers.

One global resourceVersion counter orders every write, as etcd's revision does. History keeps the
last `history_size` events; a watch asking for a version older than what history still holds gets
410 Expired, exactly the signal a real client must handle by relisting.
"""

from __future__ import annotations

import asyncio
import collections
import copy
import random
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gpuclaim.double.apiserver import celcheck, defaults, errors, schemas
from gpuclaim.double.apiserver.admission import Admission, AdmissionAttributes
from gpuclaim.double.apiserver.resources import ResourceType

Obj = dict[str, Any]
ObjFilter = Callable[[Mapping[str, Any]], bool]
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's SimpleNameGenerator alphabet
_DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


@dataclass(slots=True)
class Event:
    rv: int
    resource: str
    type: str  # ADDED | MODIFIED | DELETED
    obj: Obj
    old: Obj | None


@dataclass(eq=False)
class Watcher:
    resource: ResourceType
    namespace: str | None
    matches: ObjFilter
    queue: asyncio.Queue[tuple[str, Obj]] = field(default_factory=asyncio.Queue)

    def offer(self, event: Event) -> None:
        kind = _visible_type(self, event)
        if kind is not None:
            self.queue.put_nowait((kind, event.obj))


def _in_scope(watcher: Watcher, obj: Obj | None) -> bool:
    if obj is None:
        return False
    if watcher.namespace is not None and obj["metadata"].get("namespace") != watcher.namespace:
        return False
    return watcher.matches(obj)


def _visible_type(watcher: Watcher, event: Event) -> str | None:
    """An update moving an object into or out of a selector is an ADDED or DELETED for that watcher."""
    if event.resource != watcher.resource.key:
        return None
    now, before = _in_scope(watcher, event.obj), _in_scope(watcher, event.old)
    if event.type == "MODIFIED":
        if now and before:
            return "MODIFIED"
        return "ADDED" if now else ("DELETED" if before else None)
    return event.type if now else None


def _now(clock: Callable[[], float]) -> str:
    return datetime.fromtimestamp(clock(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Store:
    def __init__(self, *, history_size: int = 1000, clock: Callable[[], float] | None = None,
                 rng: random.Random | None = None, validate: bool = True,
                 admission: Admission | None = None) -> None:
        import time

        self.rv = 1
        self.clock = clock or time.time
        self.rng = rng or random.Random(0)
        self.validate = validate
        # the hook point: every write passes mutating admission, then schema validation, then validating admission
        self.admission = admission
        # the CEL environment the apiserver compiles new DRA selectors in (create_app sets it from the version
        # the double plays); None: selectors are not compiled
        self.new_expressions: Callable[[], Any] | None = None
        # the minor whose official schemas written objects are checked against (the app sets the one it plays)
        self.schema_minor: Callable[[], str] = lambda: schemas.NEWEST_MINOR
        self._objects: dict[str, dict[tuple[str, str], Obj]] = collections.defaultdict(dict)
        self._history: collections.deque[Event] = collections.deque(maxlen=history_size)
        self._compacted_rv = 0
        self._watchers: set[Watcher] = set()
        for name in _DEFAULT_NAMESPACES:
            self._put(_namespace_type(), "", {"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": name, "creationTimestamp": _now(self.clock)},
                                              "status": {"phase": "Active"}})

    # ---- reads ---------------------------------------------------------------------------------------------
    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        obj = self._objects[rt.key].get((namespace if rt.namespaced else "", name))
        if obj is None:
            raise errors.not_found(rt.plural, name, rt.group)
        return obj

    def list(self, rt: ResourceType, namespace: str | None, matches: ObjFilter) -> tuple[list[Obj], int]:
        items = [o for (ns, _), o in sorted(self._objects[rt.key].items())
                 if (namespace is None or ns == namespace) and matches(o)]
        return items, self.rv

    def count(self, rt: ResourceType) -> int:
        return len(self._objects[rt.key])

    # ---- watch ---------------------------------------------------------------------------------------------
    def watch(self, rt: ResourceType, namespace: str | None, matches: ObjFilter, since: str) -> Watcher:
        """Register a watcher; `since` "" or "0" starts with ADDED for every current object."""
        watcher = Watcher(rt, namespace, matches)
        if since in ("", "0"):
            for obj in self.list(rt, namespace, matches)[0]:
                watcher.queue.put_nowait(("ADDED", obj))
        else:
            try:
                start = int(since)
            except ValueError:
                raise errors.ApiError(400, f"invalid resource version: {since!r}") from None
            if start < self._compacted_rv:
                raise errors.expired(f"too old resource version: {start} ({self._compacted_rv})")
            for event in self._history:
                if event.rv > start:
                    watcher.offer(event)
        self._watchers.add(watcher)
        return watcher

    def unwatch(self, watcher: Watcher) -> None:
        self._watchers.discard(watcher)

    def close_watches(self) -> int:
        """Fault injection: end every watch stream (consumers see a closed connection)."""
        closed = list(self._watchers)
        for watcher in closed:
            watcher.queue.put_nowait(("CLOSE", {}))
        return len(closed)

    def compact(self) -> None:
        """Forget all history: every watch resuming from an older version will get 410."""
        self._history.clear()
        self._compacted_rv = self.rv

    # ---- writes --------------------------------------------------------------------------------------------
    async def create(self, rt: ResourceType, namespace: str, body: Obj, *, dry_run: bool = False) -> Obj:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.ApiError(400, "metadata: must be an object")
        self._check_type(rt, obj)
        if rt.namespaced:
            if meta.get("namespace") not in (None, "", namespace):
                raise errors.ApiError(400, "the namespace of the provided object does not match the namespace "
                                           "sent on the request")
            meta["namespace"] = namespace
            if not dry_run and ("", namespace) not in self._objects[_namespace_type().key]:
                raise errors.not_found("namespaces", namespace, "")
        else:
            meta.pop("namespace", None)
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise errors.invalid(rt.kind, "", rt.group, "metadata.name",
                                     "Required value: name or generateName is required")
            meta["name"] = meta["generateName"] + "".join(self.rng.choice(_NAME_CHARS) for _ in range(5))
        for key in ("resourceVersion", "uid", "creationTimestamp", "deletionTimestamp", "generation"):
            meta.pop(key, None)
        if rt.status_subresource and rt.kind not in ("Node", "Namespace"):
            obj.pop("status", None)  # PrepareForCreate: status is written through the status subresource
        meta["uid"] = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        meta["creationTimestamp"] = _now(self.clock)
        if "spec" in obj:
            meta["generation"] = 1
        defaults.apply(rt.kind, obj)
        obj = await self._admit("CREATE", rt, namespace, obj, None, dry_run)
        if rt.kind == "Pod":
            # the pod strategy's PrepareForCreate; qosClass too there, which kubectl computes itself when absent
            obj["status"] = {"phase": "Pending"}
        if self._key(rt, obj) in self._objects[rt.key]:
            raise errors.already_exists(rt.plural, meta["name"], rt.group)
        if dry_run:
            return obj
        return self._put(rt, "ADDED", obj)

    def restore(self, obj: Obj) -> Obj:
        """Preload an object as if it had been in etcd already (status kept); still schema-validated."""
        from gpuclaim.double.apiserver.resources import BY_KIND

        rt = BY_KIND.get((str(obj.get("apiVersion")), str(obj.get("kind"))))
        if rt is None:
            raise errors.ApiError(400, f"the double does not serve {obj.get('apiVersion')}/{obj.get('kind')}")
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if rt.namespaced:
            meta.setdefault("namespace", "default")
        meta.setdefault("uid", str(uuid.UUID(int=self.rng.getrandbits(128), version=4)))
        meta.setdefault("creationTimestamp", _now(self.clock))
        defaults.apply(rt.kind, obj)
        self._validate(rt, obj)
        return self._put(rt, "ADDED", obj)

    async def update(self, rt: ResourceType, namespace: str, name: str, body: Obj, *,
                     subresource: str | None = None, dry_run: bool = False) -> Obj:
        old = self.get(rt, namespace, name)
        new = copy.deepcopy(body)
        self._check_type(rt, new)
        meta = new.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.ApiError(400, "metadata: must be an object")
        if meta.get("name", name) != name:
            raise errors.ApiError(400, "the name of the object does not match the name on the URL")
        wanted_rv = meta.get("resourceVersion")
        if wanted_rv not in (None, "") and wanted_rv != old["metadata"]["resourceVersion"]:
            raise errors.conflict(rt.plural, name, rt.group)
        if subresource == "status":
            status = new.get("status")
            new = copy.deepcopy(old)
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
        elif rt.status_subresource:
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        meta = new["metadata"]
        for key in ("uid", "creationTimestamp", "deletionTimestamp", "generation", "namespace", "name"):
            if key in old["metadata"]:
                meta[key] = old["metadata"][key]
            else:
                meta.pop(key, None)
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        defaults.apply(rt.kind, new)
        if rt.immutable_spec and new.get("spec") != old.get("spec"):
            raise errors.invalid(rt.kind, name, rt.group, "spec", "Invalid value: field is immutable")
        if new.get("spec") != old.get("spec") and "generation" in meta:
            meta["generation"] = int(meta["generation"]) + 1
        new = await self._admit("UPDATE", rt, namespace, new, old, dry_run)
        if new == old or dry_run:
            return new  # a no-op write does not bump resourceVersion or emit an event, as in etcd3
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return self._remove(rt, new)
        return self._put(rt, "MODIFIED", new, old=old)

    async def delete(self, rt: ResourceType, namespace: str, name: str, *, dry_run: bool = False,
                     precondition_rv: str | None = None, precondition_uid: str | None = None) -> Obj:
        """DeleteOptions.preconditions as kube-apiserver checks them: the uid first, then the resourceVersion; a
        mismatch is 409 Conflict naming both values (a recreated or changed object survives)."""
        old = self.get(rt, namespace, name)
        meta = old["metadata"]
        if precondition_uid is not None and precondition_uid != meta.get("uid"):
            raise errors.precondition_failed(
                rt.kind, rt.plural, name, rt.group, f"the UID in the precondition ({precondition_uid}) does not match "
                f"the UID in record ({meta.get('uid')}). The object might have been deleted and then recreated")
        if precondition_rv is not None and precondition_rv != meta["resourceVersion"]:
            raise errors.precondition_failed(
                rt.kind, rt.plural, name, rt.group, f"the ResourceVersion in the precondition ({precondition_rv}) does "
                f"not match the ResourceVersion in record ({meta['resourceVersion']}). The object might have been "
                "modified")
        await self._admit("DELETE", rt, namespace, old, old, dry_run)
        if dry_run:
            return old
        if old["metadata"].get("finalizers"):
            if old["metadata"].get("deletionTimestamp"):
                return old
            new = copy.deepcopy(old)
            new["metadata"]["deletionTimestamp"] = _now(self.clock)
            return self._put(rt, "MODIFIED", new, old=old)
        return self._remove(rt, old)

    # ---- internals -----------------------------------------------------------------------------------------
    @staticmethod
    def _key(rt: ResourceType, obj: Obj) -> tuple[str, str]:
        meta = obj["metadata"]
        return (meta.get("namespace", "") if rt.namespaced else "", meta["name"])

    @staticmethod
    def _check_type(rt: ResourceType, obj: Obj) -> None:
        obj.setdefault("apiVersion", rt.api_version)
        obj.setdefault("kind", rt.kind)
        if obj["apiVersion"] != rt.api_version or obj["kind"] != rt.kind:
            raise errors.ApiError(400, f"the API version in the data ({obj['apiVersion']}) and kind "
                                       f"({obj['kind']}) do not match the endpoint ({rt.api_version}, {rt.kind})")

    def _validate(self, rt: ResourceType, obj: Obj) -> None:
        if not self.validate:
            return
        try:
            schemas.validate(obj, self.schema_minor())
        except schemas.SchemaError as exc:
            raise errors.invalid(rt.kind, obj["metadata"].get("name", ""), rt.group, exc.field, exc.message) from None

    def _compile_selectors(self, rt: ResourceType, obj: Obj, old: Obj | None) -> None:
        if self.new_expressions is None or rt.kind not in celcheck.KINDS or not self.validate:
            return
        found = celcheck.first_error(obj, old, self.new_expressions())
        if found is not None:
            raise errors.invalid(rt.kind, obj["metadata"].get("name", ""), rt.group, found[0], found[1])

    async def _admit(self, operation: str, rt: ResourceType, namespace: str, obj: Obj, old: Obj | None,
                     dry_run: bool) -> Obj:
        attrs = AdmissionAttributes(operation=operation, resource=rt, namespace=namespace if rt.namespaced else "",
                                    name=obj["metadata"].get("name", ""), obj=obj, old=old, dry_run=dry_run)
        if self.admission is not None and operation != "DELETE":
            attrs.obj = await self.admission.mutate(attrs)
        if operation != "DELETE":
            self._validate(rt, attrs.obj)
            self._compile_selectors(rt, attrs.obj, old)
        if self.admission is not None:
            await self.admission.validate(attrs)
        return attrs.obj

    def _record(self, event: Event) -> None:
        if self._history.maxlen is not None and len(self._history) == self._history.maxlen:
            self._compacted_rv = self._history[0].rv
        self._history.append(event)
        for watcher in self._watchers:
            watcher.offer(event)

    def _put(self, rt: ResourceType, kind: str, obj: Obj, *, old: Obj | None = None) -> Obj:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self._objects[rt.key][self._key(rt, obj)] = obj
        self._record(Event(self.rv, rt.key, kind, obj, old))
        return obj

    def _remove(self, rt: ResourceType, obj: Obj) -> Obj:
        self.rv += 1
        del self._objects[rt.key][self._key(rt, obj)]
        gone = copy.deepcopy(obj)
        gone["metadata"]["resourceVersion"] = str(self.rv)
        self._record(Event(self.rv, rt.key, "DELETED", gone, obj))
        return gone


def _namespace_type() -> ResourceType:
    from gpuclaim.double.apiserver.resources import BY_KEY

    return BY_KEY["/v1/namespaces"]
