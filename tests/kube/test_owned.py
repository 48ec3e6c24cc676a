"""kube.owned: the count of gpuclaim's own objects per namespace, from watch events (issue 22, item 6)."""

from __future__ import annotations

from typing import Any

from gpuclaim.kube.owned import OwnedCount

LABELS = {"app.kubernetes.io/managed-by": "gpuclaim"}


def _obj(name: str, namespace: str = "ml", labels: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "labels": LABELS if labels is None else labels,
                         **meta}}


def test_only_gpuclaims_own_objects_are_counted_per_namespace_and_deletes_uncount() -> None:
    owned = OwnedCount()
    template, shared = _obj("gpuclaim-0123456789abcdef"), _obj("gpuclaim-shared-chat-0123456789abcdef")
    for obj in (template, shared, _obj("gpuclaim-x", namespace="other")):
        owned.on_object(None, obj)
    # a claim the resourceclaim controller made from gpuclaim's template: labelled, but its pod's
    owned.on_object(None, _obj("gpuclaim-pod-gpuclaim-abcde", ownerReferences=[{"kind": "Pod", "uid": "u"}]))
    owned.on_object(None, _obj("gpuclaim-hand-made", labels={}))  # not labelled: someone else's
    owned.on_object(None, _obj("mine", labels=LABELS))  # not gpuclaim's name
    assert (owned.count("ml"), owned.count("other"), owned.count("none")) == (2, 1, 0)
    owned.on_object(template, {**template, "metadata": {**template["metadata"], "resourceVersion": "2"}})
    assert owned.count("ml") == 2
    owned.on_object(template, None)
    owned.on_object(shared, None)
    assert owned.count("ml") == 0
