"""What the threads flavour does its own way, and nothing else (`sqsbatch._async.flavour` is the
asyncio twin, name for name): the client, a sleep, an event any thread may set, units of work,
a handler run against a deadline, and signals. `door.py` and `poller.py` beside it are
generated from the asyncio sources by unasync.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from sqsbatch._botocore import (
    LONG_POLL_SECONDS,
    MARGIN_SECONDS,
    client_config,
    receives_fail_fast,
)
from sqsbatch.handler_tasks import HandlerThread
from sqsbatch.lifecycle import graceful_signals as graceful
from sqsbatch.message import MessageBatch

if TYPE_CHECKING:
    from sqsbatch._sync.door import SyncSqs

__all__ = [
    "HANDLER_IS_ASYNC",
    "BatchHandler",
    "Flag",
    "HandlerRun",
    "Sleep",
    "Slots",
    "counter_lock",
    "default_client",
    "graceful",
    "opened",
    "sleep",
]

HANDLER_IS_ASYNC = False


class BatchHandler(Protocol):
    def __call__(self, batch: MessageBatch, /) -> object: ...


def default_client(
    *,
    max_pool_connections: int = 10,
    long_poll_seconds: float = LONG_POLL_SECONDS,
    margin_seconds: float = MARGIN_SECONDS,
) -> Any:
    """A boto3 SQS client; the endpoint comes from `AWS_ENDPOINT_URL_SQS`/`AWS_ENDPOINT_URL`."""
    import boto3  # noqa: PLC0415 - keeps `import sqsbatch` light for Lambda cold starts

    config = client_config(
        max_pool_connections=max_pool_connections,
        long_poll_seconds=long_poll_seconds,
        margin_seconds=margin_seconds,
    )
    return receives_fail_fast(boto3.session.Session().client("sqs", config=config))


@contextmanager
def opened(
    sqs: SyncSqs,
    max_pool_connections: int,
    *,
    long_poll_seconds: float = LONG_POLL_SECONDS,
    margin_seconds: float = MARGIN_SECONDS,
) -> Iterator[None]:
    """A door without a client gets one, kept for later runs (boto3's needs no closing)."""
    if sqs.client is None:
        sqs.client = default_client(
            max_pool_connections=max_pool_connections,
            long_poll_seconds=long_poll_seconds,
            margin_seconds=margin_seconds,
        )
    yield


def counter_lock() -> AbstractContextManager[object]:
    """Slots count requests from their own threads."""
    return threading.Lock()


Sleep = Callable[[float], None]
sleep: Sleep = time.sleep


class Flag:
    """An event that any thread (or a signal handler, or a handler) may set."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def bind(self) -> None:
        """Unset, for a new run (the asyncio twin makes a fresh event on the running loop)."""
        self._event.clear()

    def unbind(self) -> None:
        pass  # threads need no loop to come back to

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        self._event.clear()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float) -> bool:
        """Wait until set, or `timeout` seconds; whether it is set."""
        return self._event.wait(timeout)


class Slots:
    """The poller's units of work, on a pool of `size` threads; leaving the block waits for every
    one (graceful: receivers deliver, in-flight batches finish and settle)."""

    def __init__(self, size: int) -> None:
        self._pool = ThreadPoolExecutor(size, "sqsbatch-slot")

    def __enter__(self) -> Slots:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(wait=True)

    def start(self, work: Callable[[float | None], None], arg: float | None) -> None:
        self._pool.submit(work, arg)


class HandlerRun:
    """A handler running on a batch, on a thread of its own so that the slot can keep its
    messages hidden and stop waiting at `handler_timeout`."""

    def __init__(self, handler: BatchHandler, batch: MessageBatch) -> None:
        self._thread = HandlerThread(handler, batch)

    def done(self) -> bool:
        return self._thread.done.is_set()

    def wait(self, timeout: float) -> bool:
        """Wait until it is done, or `timeout` seconds; whether it is done."""
        return self._thread.done.wait(timeout)

    def abandon(self, queue: str) -> None:
        """Past `handler_timeout`: a thread cannot be stopped; it runs on, unwaited, and its
        later `ack()`/`retry()` calls are ignored."""

    def failure(self) -> BaseException | None:
        return self._thread.failure
