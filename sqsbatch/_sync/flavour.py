"""What the threads flavour does its own way, and nothing else (`sqsbatch._async.flavour` is the
asyncio twin, name for name): the client, a sleep, an event any thread may set, units of work,
a handler run against a deadline, and signals. `door.py` and `consumer.py` beside it are
generated from the asyncio sources by unasync.
"""

from __future__ import annotations

import contextvars
import inspect
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, ParamSpec, Protocol, TypeVar

from sqsbatch._core.closing import SETTLES_OUT_PER_SLOT
from sqsbatch._core.handlers import not_awaited
from sqsbatch._core.heartbeat import Watch
from sqsbatch._core.message import MessageBatch, deliveries_of
from sqsbatch._shell.botocore import (
    LONG_POLL_SECONDS,
    MARGIN_SECONDS,
    checks_answers,
    client_config,
    receives_fail_fast,
)
from sqsbatch._shell.handler_tasks import Workers
from sqsbatch._shell.lifecycle import graceful_signals as graceful
from sqsbatch._shell.retries import retries_soon
from sqsbatch._sync.watcher import Watcher

__all__ = [
    "HANDLER_IS_ASYNC",
    "OVERLAP_IS_FREE",
    "BatchHandler",
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

HANDLER_IS_ASYNC = False
OVERLAP_IS_FREE = False
"""Whether a slot's settle calls cost nothing more sent beside its next receive (`Behind`): not
on threads, where a second thread costs more in the GIL than it saves on a fast endpoint."""

log = logging.getLogger("sqsbatch")

P = ParamSpec("P")
T = TypeVar("T")


class BatchHandler(Protocol):
    def __call__(self, batch: MessageBatch, /) -> object: ...


def default_client(
    *,
    max_pool_connections: int = 10,
    long_poll_seconds: float = LONG_POLL_SECONDS,
    margin_seconds: float = MARGIN_SECONDS,
    validate: bool = True,
) -> Any:
    """A boto3 SQS client; the endpoint comes from `AWS_ENDPOINT_URL_SQS`/`AWS_ENDPOINT_URL`."""
    import boto3  # noqa: PLC0415 - keeps `import sqsbatch` light for Lambda cold starts

    config = client_config(
        max_pool_connections=max_pool_connections,
        long_poll_seconds=long_poll_seconds,
        margin_seconds=margin_seconds,
        validate=validate,
    )
    client = boto3.session.Session().client("sqs", config=config)
    return checks_answers(receives_fail_fast(retries_soon(client)))


class Door(Protocol):
    """What `opened` needs of a door: the client it calls through, None until one is made."""

    client: Any


@contextmanager
def opened(
    sqs: Door,
    max_pool_connections: int,
    *,
    long_poll_seconds: float = LONG_POLL_SECONDS,
    margin_seconds: float = MARGIN_SECONDS,
) -> Iterator[None]:
    """A door without a client gets one, kept for later runs (boto3's needs no closing); it
    skips botocore's client-side validation, as the poller builds every request itself
    (`client_config`)."""
    if sqs.client is None:
        sqs.client = default_client(
            max_pool_connections=max_pool_connections,
            long_poll_seconds=long_poll_seconds,
            margin_seconds=margin_seconds,
            validate=False,
        )
    yield


def counter_lock() -> AbstractContextManager[object]:
    """Slots count requests from their own threads."""
    return threading.Lock()


Sleep = Callable[[float], None]
sleep: Sleep = time.sleep


def outside(call: Callable[[], T]) -> T:
    """A call elsewhere (a store, S3), on this thread."""
    return call()


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
    """The poller's units of work, each on a kept daemon thread, and the `Watcher` that keeps
    time for their handlers. Leaving the block waits for every unit (graceful: receivers deliver,
    in-flight batches finish and settle) but one released early: past `handler_timeout`, the
    watcher settles a batch without its handler and releases the unit, whose thread runs on,
    unwaited, in the handler. The loop may then start another unit (`Receivers`, not this,
    bounds the slots in use), so more threads than `size` can exist for a while."""

    def __init__(self, size: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.watcher = Watcher(clock)
        self._cond = threading.Condition(threading.Lock())
        self._running = 0

    def __enter__(self) -> Slots:
        return self

    def __exit__(self, *exc: object) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._running == 0)
        self.watcher.stop()

    def start(self, work: Callable[[float | None], None], arg: float | None) -> None:
        unit = _Unit(self)
        with self._cond:
            self._running += 1
        worker = _SLOT_WORKERS.take()

        def run_unit() -> None:
            _here.unit = unit
            try:
                work(arg)
            except BaseException:  # a bug of ours: the unit ends, its worker does not
                log.exception("a slot's unit of work failed")
            finally:
                _here.unit = None
                unit.release()
                _SLOT_WORKERS.give_back(worker)

        worker.submit(run_unit)

    def _release(self, unit: _Unit) -> None:
        with self._cond:
            if unit.released:
                return
            unit.released = True
            self._running -= 1
            if self._running == 0:
                self._cond.notify_all()


class _Unit:
    """One unit of work of `Slots`, counted until it ends or is released (given up)."""

    __slots__ = ("released", "slots")

    def __init__(self, slots: Slots) -> None:
        self.slots = slots
        self.released = False

    def release(self) -> None:
        self.slots._release(self)


class Behind:
    """A slot's settle calls, behind its next receives when `overlap` says so
    (`sqsbatch._core.closing.settles_behind`): `start` hands them to a kept thread of their own
    (in a copy of the slot's context) and returns, and the slot receives again meanwhile. Up to
    `depth` batches' settles may be out at once (`SETTLES_OUT_PER_SLOT`: one answered late holds
    no slot); then `start` waits for the oldest. A settle in the slot (`overlap` false) first
    waits for every one out, and so does `wait`, which the slot calls before it ends: leaving
    `Slots` still waits for every batch to settle."""

    def __init__(self, depth: int = SETTLES_OUT_PER_SLOT) -> None:
        self._depth = depth
        self._out: deque[threading.Event] = deque()

    def start(
        self, overlap: bool, settle: Callable[P, None], *args: P.args, **kwargs: P.kwargs
    ) -> None:
        if not overlap:
            self.wait()
            settle(*args, **kwargs)
            return
        self._make_room()
        done = threading.Event()
        self._out.append(done)
        worker = _SETTLE_WORKERS.take()
        context = contextvars.copy_context()

        def run() -> None:
            try:
                context.run(settle, *args, **kwargs)
            except BaseException:  # a bug of ours: the messages reappear after their visibility
                log.exception("a settle behind the next receive failed")
            finally:
                _SETTLE_WORKERS.give_back(worker)
                done.set()

        worker.submit(run)

    def _make_room(self) -> None:
        """Forget the settles done; while `depth` are still out, wait for the oldest."""
        out = self._out
        while True:
            for done in [done for done in out if done.is_set()]:
                out.remove(done)
            if len(out) < self._depth:
                return
            out.popleft().wait()

    def wait(self) -> None:
        """The settle calls still out, if any, are done."""
        out, self._out = self._out, deque()
        for done in out:
            done.wait()


_SETTLE_WORKERS = Workers("sqsbatch-settle")
_SLOT_WORKERS = Workers("sqsbatch-slot")
_here = threading.local()
"""`unit`: the `_Unit` that the current thread runs (None between units)."""


class HandlerRun:
    """A handler running on a batch, inline on the slot's own thread, in a copy of its context
    (`contextvars`, as a task would: the batch's span is current, the handler's own changes do
    not leak into the slot's). Meanwhile the poller's `Watcher` keeps its messages hidden
    (`heartbeat`) and, past `handler_timeout`, gives up on it: the batch is settled as timed
    out without it (`give_up`) and the slot's unit released, while the handler runs on,
    unwaited (a thread cannot be stopped; its later `ack()`/`retry()` calls are ignored).
    `taken()` says whether the watcher settled the batch (else `timed_out()` is False)."""

    def __init__(
        self,
        handler: BatchHandler,
        batch: MessageBatch,
        watch: Watch,
        heartbeat: Callable[[], None],
        give_up: Callable[[], None],
        *,
        clock: Callable[[], float],
    ) -> None:
        self._handler, self._batch, self._watch = handler, batch, watch
        self._heartbeat, self._give_up, self._clock = heartbeat, give_up, clock
        self._failure: BaseException | None = None
        self._taken = False

    def run(self) -> None:
        """Run the handler to its end; past the deadline the watcher settles without it."""
        unit: _Unit | None = getattr(_here, "unit", None)
        if unit is None:
            raise RuntimeError("a sync HandlerRun runs in a unit of work of Slots")
        watcher, watch, clock = unit.slots.watcher, self._watch, self._clock
        batch, heartbeat, give_up = self._batch, self._heartbeat, self._give_up
        deliveries = deliveries_of(batch)

        def due() -> float | None:  # on a watcher's thread, while the handler runs
            if watch.timed_out(clock()):
                try:
                    give_up()
                finally:
                    unit.release()
                return None
            try:
                heartbeat()
            except Exception:  # a bug of ours: no more heartbeats, the deadline still holds
                log.exception("a heartbeat of %s failed", batch.queue)
                return watch.deadline
            return watch.wake_at(deliveries)

        ticket = watcher.arm(watch.wake_at(deliveries), due)
        del due
        try:
            returned = contextvars.copy_context().run(self._handler, batch)
            if returned is not None and inspect.isawaitable(returned):  # no loop to run it
                self._failure = not_awaited(returned)
        except BaseException as exc:  # any failure, SystemExit too, fails the batch
            self._failure = exc
        self._taken = not watcher.disarm(ticket)

    def timed_out(self) -> bool:
        """Never seen by the slot: past the deadline the watcher takes the batch (`taken`)."""
        return False

    def failure(self) -> BaseException | None:
        return self._failure

    def taken(self) -> bool:
        """Whether the watcher gave up on the handler and settled the batch without it."""
        return self._taken
