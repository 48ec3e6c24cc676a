"""The one way the conversion writes text into a CEL expression: :func:`string_literal`.

Every string the conversion puts into a selector it emits (a MIG profile, a GPU product name, a family)
goes through here, so nothing a pod's author wrote can end a literal and add CEL of its own (issue 14,
finding 5: `nvidia.com/mig-x'||true||'x'=='x` once became `profile == 'x'||true||'x'=='x'`).
Numbers are written by `int_literal`, which only accepts a Python int. Pure (no I/O): `dra.config` fills
`{suffix}` in mapping selectors with it, `webhook.convert.gfd` writes node-label values with it.
"""

from __future__ import annotations

import re

_PLAIN = re.compile(r"[A-Za-z0-9 ._+/-]*")  # nothing to escape

# CEL string escapes (cel-spec "String and Bytes Values"): backslash, both quotes, and the control characters
_ESCAPES = {"\\": "\\\\", "'": "\\'", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\a": "\\a", "\b": "\\b",
            "\f": "\\f", "\v": "\\v"}


def _escape(char: str) -> str:
    known = _ESCAPES.get(char)
    if known is not None:
        return known
    code = ord(char)
    if code < 0x20 or code == 0x7F or 0xD800 <= code <= 0xDFFF:
        return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
    return char


def string_literal(text: str) -> str:
    """`text` as a single-quoted CEL string literal that evaluates to exactly `text`."""
    if _PLAIN.fullmatch(text):  # the common case
        return f"'{text}'"
    return "'" + "".join(_escape(c) for c in text) + "'"


def int_literal(value: int) -> str:
    if type(value) is not int:
        raise TypeError(f"not an int: {value!r}")
    return str(value)


def fill_suffix(template: str, suffix: str) -> str:
    """A mapping selector with `{suffix}` filled in: a quoted `'{suffix}'` / `"{suffix}"` becomes the literal,
    a `{suffix}` inside a longer literal its escaped content (valid in either quote style)."""
    literal = string_literal(suffix)
    return (template.replace("'{suffix}'", literal).replace('"{suffix}"', literal)
            .replace("{suffix}", literal[1:-1]))
