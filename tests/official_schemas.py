"""Every object gpuclaim emits is checked against the official OpenAPI schemas of each Kubernetes minor it supports.

The schemas are kubernetes-validate's (strict: an unknown field is an error). The check goes through the API
double's cached validator (`gpuclaim.double.apiserver.schemas`): `kubernetes_validate.validate` re-reads the
schema files on every call (~13 ms), four minors at a time would slow the property tests tenfold, and
tests/e2e_double/test_double.py holds the cached validator to kubernetes-validate's verdicts on every minor.
"""

from __future__ import annotations

from typing import Any

from gpuclaim.double.apiserver import schemas
from gpuclaim.dra import versions

#: "1.34" .. "1.37": 1.34 is past end of life but still modelled, and what gpuclaim emits must stay valid there
MINORS: tuple[str, ...] = versions.SUPPORTED


def assert_valid(obj: dict[str, Any]) -> None:
    """Raise SchemaError naming the minor and the field when `obj` is invalid for any supported minor."""
    for minor in MINORS:
        try:
            schemas.validate(obj, minor)
        except schemas.SchemaError as exc:
            raise schemas.SchemaError(exc.field, f"Kubernetes {minor}: {exc.message}") from None
