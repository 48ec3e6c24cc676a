"""MIG devices for an A100-SXM4-40GB, constructed (no public dump of a v25.12 MIG slice exists).

Built from the NVIDIA driver's MIG schema as ../shared/reference/attribute-schemas.md records it for v25.12:
a MIG device carries its parent GPU's attributes plus `parentUUID` and `profile`, with `type: mig`; capacity
`multiprocessors, copyEngines, decoders, encoders, jpegEngines, ofaEngines, memory` and `memorySlice<N>: 1` for
each memory slice its placement covers; its name is `gpu-<minor>-mig-<profile without dots>-<giProfileID>-<start>`.
The profile table is the A100-40GB one of NVIDIA's MIG user guide (`nvidia-smi mig -lgip`): profile id, SMs,
engines, memory, and the placements the GPU allows. When a GPU is in MIG mode the driver publishes its MIG
devices and not the whole GPU (publishing both is the double-allocation bug of dra-driver-nvidia-gpu#719).
"""

from __future__ import annotations

import copy
import hashlib
import uuid
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Profile:
    name: str  # e.g. 1g.5gb
    gi_profile_id: int
    multiprocessors: int
    copy_engines: int
    decoders: int
    jpeg_engines: int
    ofa_engines: int
    memory: str  # as the driver publishes it (Mi)
    slices: int  # memory slices covered (size of the placement)


#: NVIDIA A100-SXM4-40GB (MIG user guide, "A100 MIG profiles"; 8 memory slices, 7 compute slices)
A100_40GB = {
    "1g.5gb": Profile("1g.5gb", 19, 14, 1, 0, 0, 0, "4864Mi", 1),
    "2g.10gb": Profile("2g.10gb", 14, 28, 2, 1, 0, 0, "9856Mi", 2),
    "3g.20gb": Profile("3g.20gb", 9, 42, 3, 2, 0, 0, "19968Mi", 4),
    "4g.20gb": Profile("4g.20gb", 5, 56, 4, 2, 0, 0, "19968Mi", 4),
    "7g.40gb": Profile("7g.40gb", 0, 98, 7, 5, 1, 1, "40192Mi", 8),
}

#: one valid mixed geometry (7 compute slices, 8 memory slices): 1g + 1g + 2g + 3g
DEMO_LAYOUT: tuple[tuple[str, int], ...] = (("1g.5gb", 0), ("1g.5gb", 1), ("2g.10gb", 2), ("3g.20gb", 4))


def _mig_uuid(parent_uuid: str, profile: str, start: int) -> str:
    digest = hashlib.sha256(f"{parent_uuid}/{profile}/{start}".encode()).digest()
    return "MIG-" + str(uuid.UUID(bytes=digest[:16], version=4))


def mig_devices(gpu: Obj, layout: tuple[tuple[str, int], ...] = DEMO_LAYOUT) -> list[Obj]:
    """The MIG devices replacing the whole-GPU device `gpu` (a ResourceSlice device of type gpu)."""
    attrs = gpu["attributes"]
    minor = int(gpu["name"].removeprefix("gpu-"))
    parent_uuid = attrs["uuid"]["string"]
    out = []
    for profile_name, start in layout:
        profile = A100_40GB[profile_name]
        if start + profile.slices > 8:
            raise ValueError(f"{profile_name} at placement {start} runs past the 8 memory slices")
        device_attrs = copy.deepcopy(attrs)
        device_attrs["type"] = {"string": "mig"}
        device_attrs["uuid"] = {"string": _mig_uuid(parent_uuid, profile_name, start)}
        device_attrs["parentUUID"] = {"string": parent_uuid}
        device_attrs["profile"] = {"string": profile_name}
        capacity: Obj = {
            "multiprocessors": {"value": str(profile.multiprocessors)},
            "copyEngines": {"value": str(profile.copy_engines)},
            "decoders": {"value": str(profile.decoders)},
            "encoders": {"value": "0"},
            "jpegEngines": {"value": str(profile.jpeg_engines)},
            "ofaEngines": {"value": str(profile.ofa_engines)},
            "memory": {"value": profile.memory},
        }
        for index in range(start, start + profile.slices):
            capacity[f"memorySlice{index}"] = {"value": "1"}
        name = f"gpu-{minor}-mig-{profile_name.replace('.', '')}-{profile.gi_profile_id}-{start}"
        out.append({"name": name, "attributes": device_attrs, "capacity": capacity})
    return out
