"""Hash-consing of small JSON containers, so that 40,000 devices do not hold 40,000 copies of
`{"string": "NVIDIA H100 80GB HBM3"}` and 20,000 claims from one template one copy of its spec.

Containers with at most `max_width` entries are replaced by a canonical equal object. The key
of a container names its (already canonical) children by identity, so keys stay small however
deep the subtree; each value's type is part of the key because True, 1 and 1.0 are equal and
hash alike in Python but are different JSON. Shared objects must be treated as read-only (the cache hands everything out
read-only anyway). The table is dropped wholesale when it outgrows `max_entries`, which only
costs future sharing, never correctness: nothing retains ids of objects the table released.
"""

from __future__ import annotations

import sys
from typing import Any


class Interner:
    def __init__(self, *, max_width: int = 4, max_entries: int = 400_000, max_string: int = 128) -> None:
        self.max_width = max_width
        self.max_entries = max_entries
        self.max_string = max_string
        self._table: dict[tuple[Any, ...], Any] = {}

    def __len__(self) -> int:
        return len(self._table)

    def share(self, value: Any) -> Any:
        if isinstance(value, str):
            return sys.intern(value) if len(value) <= self.max_string else value
        if isinstance(value, dict):
            for name, child in value.items():
                value[name] = self.share(child)
            if len(value) > self.max_width:
                return value
            key: tuple[Any, ...] = ("d",)
            for k, v in value.items():
                key += (k, type(v), _token(v))
        elif isinstance(value, list):
            for index, child in enumerate(value):
                value[index] = self.share(child)
            if len(value) > self.max_width:
                return value
            key = ("l",)
            for v in value:
                key += (type(v), _token(v))
        else:
            return value
        canonical = self._table.get(key)
        if canonical is None:
            if len(self._table) >= self.max_entries:
                self._table.clear()
            self._table[key] = canonical = value
        return canonical


def _token(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        return id(value)  # already canonical, and kept alive by the table
    return repr(value) if isinstance(value, float) else value  # -0.0 == 0.0 but is different JSON
