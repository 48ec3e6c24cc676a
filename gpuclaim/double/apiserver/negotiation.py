"""Content negotiation on `Accept`, the part kube-apiserver does that kubectl relies on.

kubectl asks for a *kind* through media-type parameters (`application/json;as=Table;v=v1;g=meta.k8s.io`,
`application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`) and lists plain `application/json` last
as its fallback. The double answers with the first offer the client lists that it can serve, so a client that
cannot read a Table never gets one.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuclaim.double.apiserver import errors

JSON = "application/json"


@dataclass(frozen=True, slots=True)
class As:
    """A kind asked for through media-type parameters; `content_type` is the header to answer it with."""

    group: str
    version: str
    kind: str

    @property
    def content_type(self) -> str:
        return f"{JSON};g={self.group};v={self.version};as={self.kind}"


TABLE_V1 = As("meta.k8s.io", "v1", "Table")
TABLE_V1BETA1 = As("meta.k8s.io", "v1beta1", "Table")
DISCOVERY_V2 = As("apidiscovery.k8s.io", "v2", "APIGroupDiscoveryList")


def _ranges(accept: str) -> list[tuple[str, dict[str, str]]]:
    out = []
    for item in accept.split(","):
        media, *raw = (part.strip() for part in item.split(";"))
        params = {}
        for param in raw:
            key, _, value = param.partition("=")
            params[key.strip().lower()] = value.strip().strip('"')
        if media:
            out.append((media.lower(), params))
    return out


def choose(accept: str, offers: tuple[As, ...]) -> As | None:
    """The first media range of `accept` the double can serve: one of `offers`, or None for plain JSON.

    A range naming a kind the double does not offer (PartialObjectMetadata, a Table of another version) is
    skipped, as kube-apiserver skips it; when nothing is left, 406 names what was asked for."""
    ranges = _ranges(accept)
    if not ranges:
        return None
    for media, params in ranges:
        if media not in (JSON, "application/*", "*/*"):
            continue  # protobuf, yaml, cbor: the double speaks JSON only
        if "as" not in params:
            return None
        for offer in offers:
            if media == JSON and (params.get("g"), params.get("v"), params["as"]) == (
                    offer.group, offer.version, offer.kind):
                return offer
    raise errors.ApiError(406, f"the double serves only application/json (and, where kubectl asks for them, "
                               f"Tables and aggregated discovery); none of the accepted types is served: {accept}")
