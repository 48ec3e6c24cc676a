"""Pure work on big request bodies, off the event loop: one worker thread per process, for the webhook's big pods.

A big body's decoding (and whatever else is linear in it) would stop every other request and probe of the loop
for tens of ms; in the thread it only competes for the GIL, and with `chunked_json` decoding in short steps the
loop gets it back every switch interval. One thread, not a pool: big bodies wait for each other, so a flood of
them costs the other requests one thread's share of the GIL, never all of it, and their decoded objects exist
one at a time.

The extender does not use it: its big bodies are only decoded, and a loop that reads 50 bodies at once while a
worker holds the GIL waits for it at every read and write; it decodes them on the loop in slices, one body at a
time (`extender.handlers`, measured in docs/hardening.md).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

__all__ = ["BIG_BODY_BYTES", "off_loop"]

#: a request body above this is decoded in the worker thread, in steps (`chunked_json`); below it one orjson call
#: on the loop is shorter than the hand-off
BIG_BODY_BYTES = 256 * 1024

_BIG_POOL: concurrent.futures.ThreadPoolExecutor | None = None


async def off_loop(fn: Any, *args: Any) -> Any:
    """`fn(*args)` in the worker thread for big bodies (pure work only: decoding, converting, encoding)."""
    global _BIG_POOL
    if _BIG_POOL is None:
        _BIG_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpuclaim-big-body")
    return await asyncio.get_running_loop().run_in_executor(_BIG_POOL, fn, *args)
