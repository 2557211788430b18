"""What the asyncio flavour does its own way, and nothing else (`sqsbatch._sync.flavour` is the
threads twin, name for name): the client, a sleep, an event any thread may set, units of work,
a handler run against a deadline, and signals. The door and the poller beside it are written
once on top of these, and unasync makes their sync twins.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext, suppress
from typing import Any, ParamSpec, Protocol, TypeVar

from sqsbatch._core.closing import SETTLES_OUT_PER_SLOT
from sqsbatch._core.heartbeat import Watch
from sqsbatch._core.message import MessageBatch, deliveries_of
from sqsbatch._shell.botocore import (
    LONG_POLL_SECONDS,
    MARGIN_SECONDS,
    checks_answers,
    client_config,
    receives_fail_fast,
)
from sqsbatch._shell.handler_tasks import (
    CANCEL_GRACE_SECONDS,
    abandon,
    called,
    handler_failure,
)
from sqsbatch._shell.lifecycle import graceful_loop_signals as graceful
from sqsbatch._shell.retries import retries_soon

__all__ = [
    "HANDLER_IS_ASYNC",
    "OVERLAP_IS_FREE",
    "AsyncBatchHandler",
    "Behind",
    "Flag",
    "HandlerRun",
    "Sleep",
    "Slots",
    "counter_lock",
    "default_client",
    "graceful",
    "opened",
    "outside",
    "sleep",
]

HANDLER_IS_ASYNC = True
OVERLAP_IS_FREE = True
"""Whether a slot's settle calls cost nothing more sent beside its next receive (`Behind`):
tasks send requests side by side for free."""

log = logging.getLogger("sqsbatch")

P = ParamSpec("P")
T = TypeVar("T")


class AsyncBatchHandler(Protocol):
    def __call__(self, batch: MessageBatch, /) -> Awaitable[object]: ...


def default_client(
    *,
    max_pool_connections: int = 10,
    long_poll_seconds: float = LONG_POLL_SECONDS,
    margin_seconds: float = MARGIN_SECONDS,
    validate: bool = True,
) -> Any:
    """An aioboto3 SQS client, to enter with `async with`; the endpoint comes from
    `AWS_ENDPOINT_URL_SQS`/`AWS_ENDPOINT_URL`. The pool must hold every concurrent long poll."""
    import aioboto3  # noqa: PLC0415 - keeps `import sqsbatch` light for Lambda cold starts

    config = client_config(
        max_pool_connections=max_pool_connections,
        long_poll_seconds=long_poll_seconds,
        margin_seconds=margin_seconds,
        validate=validate,
    )
    return aioboto3.Session().client("sqs", config=config)


class Door(Protocol):
    """What `opened` needs of a door: the client it calls through, None until one is made."""

    client: Any


@asynccontextmanager
async def opened(
    sqs: Door,
    max_pool_connections: int,
    *,
    long_poll_seconds: float = LONG_POLL_SECONDS,
    margin_seconds: float = MARGIN_SECONDS,
) -> AsyncIterator[None]:
    """A door without a client gets one for the block (aiobotocore's must be closed); it
    skips botocore's client-side validation, as the poller builds every request itself
    (`client_config`)."""
    if sqs.client is not None:
        yield
        return
    async with default_client(
        max_pool_connections=max_pool_connections,
        long_poll_seconds=long_poll_seconds,
        margin_seconds=margin_seconds,
        validate=False,
    ) as client:
        sqs.client = checks_answers(receives_fail_fast(retries_soon(client)))
        try:
            yield
        finally:
            sqs.client = None


def counter_lock() -> AbstractContextManager[object]:
    """One event loop, one thread: counting needs no lock."""
    return nullcontext()


Sleep = Callable[[float], Awaitable[None]]
sleep: Sleep = asyncio.sleep


async def outside(call: Callable[[], T]) -> T:
    """A blocking call elsewhere (a store, S3), in a worker thread: the loop keeps running."""
    return await asyncio.to_thread(call)


class Flag:
    """An event that any thread (or a signal handler, or a handler) may set; the loop that
    `bind`s it waits on it."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    def bind(self) -> None:
        """A fresh, unset event on the running loop (an asyncio event belongs to one loop)."""
        self._loop = asyncio.get_running_loop()
        self._event = asyncio.Event()

    def unbind(self) -> None:
        self._loop = None

    def set(self) -> None:
        loop = self._loop
        if loop is None or _in_loop(loop):
            self._event.set()
        else:
            loop.call_soon_threadsafe(self._event.set)

    def clear(self) -> None:
        self._event.clear()

    def is_set(self) -> bool:
        return self._event.is_set()

    async def wait(self, timeout: float) -> bool:
        """Wait until set, or `timeout` seconds; whether it is set. (`asyncio.timeout`, not
        `wait_for`: no task of its own per wait, which the loop does twice a batch.)"""
        if self._event.is_set():
            return True
        with suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._event.wait()
        return self._event.is_set()


def _in_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


class Slots:
    """The poller's units of work, one task each; leaving the block waits for every one
    (graceful: receivers deliver, in-flight batches finish and settle)."""

    def __init__(self, size: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> Slots:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._tasks:
            await asyncio.wait(self._tasks)

    def start(
        self, work: Callable[[float | None], Coroutine[Any, Any, None]], arg: float | None
    ) -> None:
        task = asyncio.create_task(work(arg))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


class Behind:
    """A slot's settle calls, behind its next receives when `overlap` says so
    (`sqsbatch._core.closing.settles_behind`): `start` sends them as a task of their own and
    returns, and the slot receives again meanwhile. Up to `depth` batches' settles may be out at
    once (`SETTLES_OUT_PER_SLOT`: one answered late holds no slot); then `start` waits for the
    oldest. A settle in the slot (`overlap` false) first waits for every one out, and so does
    `wait`, which the slot calls before it ends: leaving `Slots` still waits for every batch to
    settle."""

    def __init__(self, depth: int = SETTLES_OUT_PER_SLOT) -> None:
        self._depth = depth
        self._out: deque[asyncio.Task[None]] = deque()

    async def start(
        self,
        overlap: bool,
        settle: Callable[P, Coroutine[Any, Any, None]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> None:
        if not overlap:
            await self.wait()
            await settle(*args, **kwargs)
            return
        await self._make_room()
        self._out.append(asyncio.create_task(settle(*args, **kwargs)))

    async def _make_room(self) -> None:
        """Forget the settles done; while `depth` are still out, wait for the oldest."""
        out = self._out
        while True:
            for task in [task for task in out if task.done()]:
                out.remove(task)
                task.result()  # a bug of ours in it is raised in the slot, as when awaited
            if len(out) < self._depth:
                return
            await out.popleft()

    async def wait(self) -> None:
        """The settle calls still out, if any, are done (a cancellation of the slot cancels
        them: the messages reappear after their visibility, as when the slot settles itself)."""
        out, self._out = self._out, deque()
        try:
            for task in out:
                await task
        except asyncio.CancelledError:
            for task in out:
                task.cancel()
            raise


_ABANDONED: set[asyncio.Task[object]] = set()
"""Timed-out handlers that ignore their cancellation, held until they end."""


class HandlerRun:
    """A handler running on a batch, as a task of its own (so that it can be cancelled, in a
    copy of the slot's context, as the threads twin's runs). The slot awaits its end, while one
    timer keeps time for it: it keeps the batch's messages hidden (`heartbeat`, a task of its
    own that the batch's settlement waits for) and, past `handler_timeout`, cancels the handler.
    One that has not unwound `CANCEL_GRACE_SECONDS` later runs on, unwaited (its later calls are
    ignored), and the slot settles the batch as timed out. `give_up` is for the threads twin,
    whose watcher settles the batch itself: here the slot always does (`taken()` is False)."""

    def __init__(
        self,
        handler: AsyncBatchHandler,
        batch: MessageBatch,
        watch: Watch,
        heartbeat: Callable[[], Awaitable[None]],
        give_up: Callable[[], Awaitable[None]],
        *,
        clock: Callable[[], float],
    ) -> None:
        self._handler, self._batch, self._watch = handler, batch, watch
        self._heartbeat, self._clock = heartbeat, clock
        self._timer: asyncio.TimerHandle | None = None
        self._beat: asyncio.Task[None] | None = None
        self._timed_out = False

    async def run(self) -> None:
        """Run the handler until it ends, or until its deadline and grace are over."""
        loop = self._loop = asyncio.get_running_loop()
        self._ended = loop.create_future()
        self._task: asyncio.Task[object] = loop.create_task(called(self._handler, self._batch))
        self._task.add_done_callback(self._end)
        self._arm(self._watch.wake_at(deliveries_of(self._batch)))
        try:
            await self._ended
        finally:
            if self._timer is not None:
                self._timer.cancel()
            self._task.remove_done_callback(self._end)
        if self._beat is not None:  # a heartbeat under way: it ends before the batch settles
            await self._beat

    def timed_out(self) -> bool:
        return self._timed_out

    def failure(self) -> BaseException | None:
        """What the handler raised (a cancellation by someone else counts); None past the
        deadline (what it raised while unwinding does not matter then)."""
        if not self._timed_out:
            return handler_failure(self._task)
        if self._task.done() and not self._task.cancelled():
            self._task.exception()  # retrieved, so asyncio does not log it as never retrieved
        return None

    def taken(self) -> bool:
        """Whether something else settled the batch without the slot: never, here."""
        return False

    def _end(self, _: object = None) -> None:
        if not self._ended.done():
            self._ended.set_result(None)

    def _arm(self, at: float) -> None:
        self._timer = self._loop.call_later(max(0.0, at - self._clock()), self._due)

    def _due(self) -> None:
        """The timer: a heartbeat, the deadline (cancel the handler), or the grace's end."""
        self._timer = None
        if self._ended.done():
            return
        if self._timed_out:  # the grace is over: settle without it
            abandon(self._task, self._batch.queue, _ABANDONED)
            self._end()
        elif self._watch.timed_out(self._clock()):
            self._timed_out = True
            self._task.cancel()
            self._timer = self._loop.call_later(CANCEL_GRACE_SECONDS, self._due)
        else:
            self._beat = self._loop.create_task(self._beating())

    async def _beating(self) -> None:
        try:
            await self._heartbeat()
            at = self._watch.wake_at(deliveries_of(self._batch))
        except Exception:  # a bug of ours: no more heartbeats, the deadline still holds
            log.exception("a heartbeat of %s failed", self._batch.queue)
            at = self._watch.deadline
        finally:
            self._beat = None
        if not self._ended.done():
            self._arm(at)
