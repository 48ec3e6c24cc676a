"""CEL regular expressions with Kubernetes' semantics: RE2 (google-re2), linear time in the input.

kube-apiserver and kube-scheduler run cel-go, whose ``matches``, ``find`` and ``findAll`` use Go's
``regexp`` package: RE2 syntax, repeat counts up to 1000, no backreferences or look-around, and no
exponential backtracking (``"aaaa…!".matches("^(a+)+$")`` is linear). google-re2 is the same engine
family; where Go's dialect is narrower than RE2's C++ one (``\\C``, "any byte", which Go refuses) the
pattern is refused here as well. Compiled patterns are cached: selectors repeat.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import re2  # untyped: pyproject.toml [[tool.mypy.overrides]] skips it

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # the error comes back as an exception; RE2's own log line is noise


class RegexError(ValueError):
    """A pattern Go's regexp (and so the apiserver) refuses."""


def _go_refuses(pattern: str) -> str | None:
    """Constructs RE2 (C++) accepts and Go's regexp does not."""
    i = 0
    while i < len(pattern):
        if pattern[i] == "\\" and i + 1 < len(pattern):
            if pattern[i + 1] == "C":
                return "invalid escape sequence: `\\C`"
            i += 2
            continue
        i += 1
    return None


@lru_cache(maxsize=512)
def compile_re2(pattern: str) -> Any:
    """Compile an RE2 pattern; raise :class:`RegexError` for one Go's regexp refuses."""
    why = _go_refuses(pattern)
    if why is not None:
        raise RegexError(why)
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        raise RegexError(detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)) from None


def matches(text: str, pattern: str) -> bool:
    return compile_re2(pattern).search(text) is not None


def find(text: str, pattern: str) -> str:
    m = compile_re2(pattern).search(text)
    return "" if m is None else str(m.group(0))


def find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    """Go's ``FindAllString(text, limit)``: leftmost-first matches, an empty match right after the previous
    match is skipped (not returned), as Go does."""
    if limit == 0:
        return []
    regexp = compile_re2(pattern)
    out: list[str] = []
    pos, prev_end = 0, -1
    while pos <= len(text) and (limit < 0 or len(out) < limit):
        m = regexp.search(text, pos)
        if m is None:
            break
        start, end = m.span()
        accept = True
        if end == pos:  # an empty match at pos
            accept = start != prev_end  # never right after the previous match
            pos += 1
        else:
            pos = end
        prev_end = end
        if accept:
            out.append(text[start:end])
    return out
