"""A cluster dump directory (``--cluster DIR``, as ``kubectl get -o yaml`` writes it) read as objects: the file
side of what `gpuclaim audit` and the offline extender view read, kept out of the pure model (`gpuclaim.dra`
does no I/O)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path as FilePath

import yaml

from gpuclaim.dra.api import Located, iter_objects

__all__ = ["DUMP_SUFFIXES", "DumpError", "read_dump"]

DUMP_SUFFIXES = (".yaml", ".yml", ".json")


class DumpError(ValueError):
    """A dump directory or one of its files cannot be read; the message names which and why, on one line."""


def read_dump(directory: FilePath) -> Iterator[tuple[FilePath, Located]]:
    """The objects of a cluster dump (``--cluster DIR``, as ``kubectl get -o yaml`` writes it): every .yaml, .yml
    or .json file below `directory` in sorted order, each file's documents as :func:`iter_objects` yields them,
    with the file they came from. Raises :class:`DumpError` for a missing or empty directory or a file that is not
    YAML."""
    if not directory.is_dir():
        raise DumpError(f"--cluster {directory}: not a directory")
    files = sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix in DUMP_SUFFIXES)
    if not files:
        raise DumpError(f"--cluster {directory}: no .yaml, .yml or .json files")
    for path in files:
        try:
            documents = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise DumpError(f"{path}: {' '.join(str(exc).split())}") from None
        for located in iter_objects(documents):
            yield path, located
