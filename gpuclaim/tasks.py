"""Background tasks owned by a block or an object: started with it, cancelled and awaited when it ends, so none
outlives the server, reloader or cache that started it (and none is left to log "Task was destroyed")."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine, Iterable
from typing import Any

__all__ = ["running", "stop_all"]


@contextlib.asynccontextmanager
async def running(work: Coroutine[Any, Any, None], name: str) -> AsyncIterator[asyncio.Task[None]]:
    """`work` as a task that lives as long as the block: cancelled, and awaited, when the block ends."""
    task = asyncio.create_task(work, name=name)
    try:
        yield task
    finally:
        await stop_all((task,))


async def stop_all(tasks: Iterable[asyncio.Task[Any]]) -> None:
    """Cancel every task first, then await each: none waits for another's cancellation to start its own."""
    tasks = list(tasks)
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task
