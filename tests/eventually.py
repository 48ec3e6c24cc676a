"""`eventually`: poll a condition fed by watch events (the cluster cache, the extender's live view) until it holds.

A uniquely named module in tests/ (on sys.path through tests/conftest.py), so test folders import it by name."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def eventually(check: Callable[[], bool], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)
