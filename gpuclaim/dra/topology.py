"""Where each device sits (NVLink domain, PCIe root, NUMA node, MIG parent, ...) and how local a set of devices is.

Sources, from the ``extender`` config section (DESIGN.md decision 6: NVLink is not in today's ResourceSlices):

- ``topologyAttributes``: any device attribute, fully qualified, with a weight (pcieRoot 2, numaNode 1,
  parentUUID 1 by default). ``gpu.nvidia.com/parentUUID`` stands for "the MIG parent" of every driver: a
  device whose own ``uuid`` is another device's ``parentUUID`` counts as that parent.
- ``productFacts``: a product name prefix (read from the device's ``<driver>/productName``) with
  ``nvlinkDomain: node`` puts every such GPU of the node into one NVLink domain (NVSwitch boards);
  ``none`` says the product has no NVLink (each GPU alone).
- ``nvlinkAnnotation`` on the Node: NVLink groups an admin or agent wrote, groups separated by ``;``, devices
  by ``,``, each a device name or ``driver/pool/device``, e.g. ``gpu-0,gpu-1,gpu-2,gpu-3;gpu-4,gpu-5,gpu-6,gpu-7``.
  It overrides product facts for the devices it names.

Locality of a group of n >= 2 devices for one source: the fraction of the n*(n-1)/2 device pairs that share a
value (1 = all in one domain, 0 = all apart). A source no device of the group has is left out, so a fleet
that does not publish NUMA is not penalised for it; a device without a value that others have is alone.
The group's locality is the weighted mean over the sources present.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from gpuclaim.dra.api import Device, DeviceID
from gpuclaim.dra.config import ExtenderConfig

NVLINK = "nvlink"
NVLINK_WEIGHT = 3.0  # the strongest link: above pcieRoot's default 2
PARENT_SUFFIX = "/parentUUID"


@dataclass(frozen=True, slots=True)
class Source:
    name: str  # an attribute name, or "nvlink"
    weight: float


@dataclass(frozen=True, slots=True)
class Locality:
    value: float  # 0..1, weighted over the sources present
    per_source: tuple[tuple[str, float], ...]  # (source, pair fraction) for the sources present


class NodeTopology:
    """Topology keys of one node's devices, computed once per node state."""

    def __init__(self, *, config: ExtenderConfig, devices: Sequence[tuple[DeviceID, Device]],
                 annotations: Mapping[str, str] | None = None) -> None:
        self.sources = tuple(Source(a.name, a.weight) for a in config.topology_attributes if a.weight > 0)
        self.sources += (Source(NVLINK, NVLINK_WEIGHT),)
        self.keys: dict[DeviceID, tuple[Hashable | None, ...]] = {}
        parents = _parent_uuids(devices)
        groups = parse_nvlink_groups((annotations or {}).get(config.nvlink_annotation, ""))
        for dev_id, device in devices:
            row: list[Hashable | None] = []
            for source in self.sources:
                if source.name == NVLINK:
                    row.append(_nvlink_key(dev_id, device, groups, config))
                elif source.name.endswith(PARENT_SUFFIX):
                    row.append(_parent_key(device, source.name, parents))
                else:
                    row.append(device.attributes.get(source.name))
            self.keys[dev_id] = tuple(row)

    def locality(self, group: Sequence[DeviceID]) -> Locality | None:
        """None when the group has fewer than two devices or no source knows any of them."""
        n = len(group)
        if n < 2:
            return None
        pairs = n * (n - 1) / 2
        total = weights = 0.0
        per: list[tuple[str, float]] = []
        for k, source in enumerate(self.sources):
            values = [self.keys[d][k] if d in self.keys else None for d in group]
            present = [v for v in values if v is not None]
            if not present:
                continue
            shared = sum(c * (c - 1) / 2 for c in Counter(present).values())
            fraction = shared / pairs
            per.append((source.name, fraction))
            total += source.weight * fraction
            weights += source.weight
        if weights == 0:
            return None
        return Locality(value=total / weights, per_source=tuple(per))

    def unit(self, dev_id: DeviceID) -> Hashable:
        """The whole unit a device belongs to for fragmentation: its MIG parent, else its group under the
        heaviest attribute source it has (e.g. its PCIe root), else the device itself."""
        keys = self.keys.get(dev_id)
        if keys is not None:
            ranked = sorted(range(len(self.sources)), key=lambda k: -self.sources[k].weight)
            for k in ranked:
                if self.sources[k].name.endswith(PARENT_SUFFIX) and keys[k] is not None:
                    return ("parent", dev_id.driver, keys[k])
            for k in ranked:
                name = self.sources[k].name
                if name != NVLINK and keys[k] is not None:
                    return ("attr", name, keys[k])
        return ("device", dev_id)


def parse_nvlink_groups(text: str) -> list[frozenset[str]]:
    """``a,b;c,d`` -> [{a, b}, {c, d}]; blanks ignored. Names are device names or ``driver/pool/device``."""
    out = []
    for part in text.split(";"):
        names = frozenset(n.strip() for n in part.split(",") if n.strip())
        if names:
            out.append(names)
    return out


def _nvlink_key(dev_id: DeviceID, device: Device, groups: list[frozenset[str]],
                config: ExtenderConfig) -> Hashable | None:
    for i, group in enumerate(groups):
        if dev_id.device in group or str(dev_id) in group:
            return ("annotation", i)
    product = device.attributes.get(f"{device.driver}/productName")
    if isinstance(product, str):
        for fact in config.product_facts:
            if product.startswith(fact.product_name):
                if fact.nvlink_domain == "node":
                    return ("node", device.driver)
                return ("alone", dev_id)
    return None


def _parent_uuids(devices: Sequence[tuple[DeviceID, Device]]) -> set[str]:
    out: set[str] = set()
    for _, device in devices:
        for name, value in device.attributes.items():
            if name.endswith(PARENT_SUFFIX) and isinstance(value, str):
                out.add(value)
    return out


def _parent_key(device: Device, name: str, parents: set[str]) -> Hashable | None:
    value = device.attributes.get(name)
    if value is None:
        value = device.attributes.get(f"{device.driver}{PARENT_SUFFIX}")
    if value is not None:
        return value
    own = device.attributes.get(f"{device.driver}/uuid")
    if isinstance(own, str) and own in parents:
        return own  # the full GPU a MIG layout is carved from
    return None
