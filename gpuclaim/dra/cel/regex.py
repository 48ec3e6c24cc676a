"""RE2 patterns on Python's ``re``: translate what differs, refuse what RE2 would refuse.

Kubernetes CEL regexes are RE2. Python's engine accepts constructs RE2 does not (backreferences,
look-around, atomic groups, possessive quantifiers): those are refused here, so a selector that the
apiserver rejects is not accepted by gpuclaim. ``\\z`` (RE2's end of text) maps to Python's ``\\Z``
and POSIX classes (``[[:digit:]]``) to their ASCII sets.
"""

from __future__ import annotations

import re
from functools import lru_cache

_POSIX = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7F", "blank": "\\t ", "cntrl": "\\x00-\\x1F\\x7F",
    "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~", "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ", "upper": "A-Z", "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f",
}
_UNSUPPORTED = (
    (re.compile(r"\(\?[=!]"), "look-ahead is not supported"),
    (re.compile(r"\(\?<[=!]"), "look-behind is not supported"),
    (re.compile(r"\(\?>"), "atomic groups are not supported"),
    (re.compile(r"\\[1-9]"), "backreferences are not supported"),
    (re.compile(r"[*+?}]\+"), "possessive quantifiers are not supported"),
    (re.compile(r"\\Z"), "\\Z is not supported"),
)


@lru_cache(maxsize=256)
def compile_re2(pattern: str) -> re.Pattern[str]:
    """Compile an RE2 pattern; raise ``re.error`` for one RE2 refuses (cached: patterns repeat)."""
    scrubbed = re.sub(r"\\\\", "", pattern)  # an escaped backslash never starts a construct
    for probe, why in _UNSUPPORTED:
        if probe.search(scrubbed):
            raise re.error(why)
    translated = pattern.replace("(?<", "(?P<").replace("(?P<=", "(?<=").replace("(?P<!", "(?<!")
    translated = re.sub(r"(?<!\\)\\z", r"\\Z", translated)
    translated = re.sub(r"\[:(\^?)(\w+):\]", lambda m: _posix(m.group(1), m.group(2)), translated)
    return re.compile(translated)


def _posix(neg: str, name: str) -> str:
    if name not in _POSIX:
        raise re.error(f"invalid character class range: [:{name}:]")
    if neg:
        raise re.error("negated POSIX classes are not supported")
    return _POSIX[name]
