"""Handler tasks of the async front ends (poller, Lambda adapter, `sqsbatch.testing`).

A handler runs as a task of its own so that it can be cancelled at `handler_timeout`; what it
raised, or that someone else cancelled it, is read from the finished task.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

__all__ = ["CANCEL_GRACE_SECONDS", "awaited", "cancel_handler", "handler_failure"]

log = logging.getLogger("sqsbatch")

CANCEL_GRACE_SECONDS = 1.0
"""How long a timed-out handler gets to unwind after its cancellation before settlement goes on."""


async def cancel_handler(
    task: asyncio.Task[object], queue: str, abandoned: set[asyncio.Task[object]]
) -> None:
    """Cancel a timed-out handler; one that ignores cancellation is left to run, unwaited
    (held in `abandoned` until it ends). Its later `ack()`/`retry()` calls are ignored."""
    task.cancel()
    await asyncio.wait({task}, timeout=CANCEL_GRACE_SECONDS)
    if not task.done():
        log.error("handler for %s ignores cancellation; settling without it", queue)
        abandoned.add(task)
        task.add_done_callback(_forgetting(abandoned))
    elif not task.cancelled():
        task.exception()  # retrieved: what it raised while unwinding does not matter now


def _forgetting(
    abandoned: set[asyncio.Task[object]],
) -> Callable[[asyncio.Task[object]], None]:
    def done(task: asyncio.Task[object]) -> None:
        abandoned.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved, so asyncio does not log it as never retrieved

    return done


def handler_failure(task: asyncio.Task[object]) -> BaseException | None:
    """What a finished handler task raised (a cancellation by someone else counts)."""
    if task.cancelled():  # by someone else than the timeout: the batch did not complete
        return asyncio.CancelledError("the handler was cancelled")
    return task.exception()


async def awaited(awaitable: Awaitable[object]) -> object:
    return await awaitable
