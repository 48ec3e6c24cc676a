"""Which DRA CEL environment an expression is compiled in: the libraries and ``device`` fields it declares.

kube-apiserver compiles a new or changed selector in the NewExpressions environment at its compatibility version
(the binary's minor - 1), honouring feature gates; kube-scheduler compiles in the StoredExpressions environment,
which carries every library of its binary and ignores the gates (k8s.io/apiserver ``pkg/cel/environment``,
``base.go`` and ``environment.go``; k8s.io/dynamic-resource-allocation ``cel/compile.go``). What each Kubernetes
version's two environments contain is ``gpuclaim.dra.versions``' business; this is only the description the
checker reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["new", "stored"]


@dataclass(frozen=True, slots=True)
class Environment:
    """One DRA CEL environment.

    ``ext_lists``: cel-go's ``ext.Lists`` version (0: absent; 3 adds slice, flatten, distinct, reverse, sort,
    sortBy, lists.range). ``allow_multiple_allocations``: ``device.allowMultipleAllocations`` is declared.
    ``includes``: ``<list>.includes(<value>)``. ``list_attributes``: attributes may hold lists.
    ``compatibility``: the Kubernetes minor whose library set this is (for messages). ``cel_go``: the minor of
    the cel-go the binary runs (26: v0.26, 29: v0.29), whose interpreter decides some run-time answers: v0.29's
    ``or()``/``orValue()`` refuse a receiver that is not an optional, v0.26's return it.
    """

    kind: Kind
    compatibility: int
    ext_lists: int
    allow_multiple_allocations: bool
    includes: bool = False
    list_attributes: bool = False
    cel_go: int = 26

    @property
    def label(self) -> str:
        what = "kube-apiserver's new-expression" if self.kind == "new" else "kube-scheduler's stored-expression"
        return f"{what} CEL environment (libraries of 1.{self.compatibility})"


#: kube-apiserver 1.34's NewExpressions environment (compatibility 1.33: no ext.Lists, no
#: allowMultipleAllocations with DRAConsumableCapacity off), what ``mode="new"`` has always meant
NEW_1_34 = Environment("new", 33, ext_lists=0, allow_multiple_allocations=False)
#: kube-scheduler 1.34's StoredExpressions environment, what ``mode="stored"`` has always meant
STORED_1_34 = Environment("stored", 34, ext_lists=3, allow_multiple_allocations=True)
