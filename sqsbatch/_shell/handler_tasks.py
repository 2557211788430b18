"""Running a handler against a deadline, for every front end and `sqsbatch.testing`.

An `async def` handler runs as a task of its own so that it can be cancelled at
`handler_timeout`; what it raised, or that someone else cancelled it, is read from the finished
task. A sync handler runs on a thread of its own (`HandlerThread`, for `sqsbatch.testing` and
for the Lambda adapter where it cannot stop the handler on the main thread: `handler_alarm`) so
that the caller can stop waiting at the deadline and settle; such a thread cannot be killed and
runs on, unwaited. (The sync poller calls its handler inline on the slot's thread instead, and
its `Watcher` keeps the time: `sqsbatch/_sync/watcher.py`.) `Workers` are the kept daemon
threads of both.
"""

from __future__ import annotations

import _thread
import asyncio
import contextvars
import inspect
import logging
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

from sqsbatch._core.handlers import not_awaited
from sqsbatch.errors import AwaitableReturned

__all__ = [
    "CANCEL_GRACE_SECONDS",
    "Done",
    "HandlerThread",
    "Workers",
    "abandon",
    "called",
    "cancel_handler",
    "handler_failure",
    "run_async_handler",
    "run_in_thread",
    "run_returned",
]

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
        abandon(task, queue, abandoned)
    elif not task.cancelled():
        task.exception()  # retrieved: what it raised while unwinding does not matter now


def abandon(task: asyncio.Task[object], queue: str, abandoned: set[asyncio.Task[object]]) -> None:
    """A timed-out handler that ignores its cancellation: logged, and left to run, unwaited
    (held in `abandoned` until it ends)."""
    log.error("handler for %s ignores cancellation; settling without it", queue)
    abandoned.add(task)
    task.add_done_callback(_forgetting(abandoned))


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
    error = task.exception()
    if error is None and isinstance(raised := task.result(), _Raised):
        return raised.error
    return error


class _Raised:
    """What a handler raised that asyncio would not keep in its task (`called`)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


async def called(handler: Callable[[Any], object], batch: object) -> object:
    """A handler's call as a task runs it: called in the task, and what it returned awaited when
    awaitable (an `async def`, or a sync wrapper returning its coroutine). What it raised, even
    `KeyboardInterrupt` or `SystemExit` (which asyncio would raise out of the event loop), is
    its failure, as on threads (`handler_failure` reads it); a cancellation stays one."""
    try:
        returned = handler(batch)
        if inspect.isawaitable(returned):
            return await returned
        return returned
    except asyncio.CancelledError:
        raise
    except BaseException as exc:  # the batch fails; the loop goes on, as the sync poller's
        return _Raised(exc)


class HandlerThread:
    """A sync handler called on a daemon thread; `done` is set when it returns or raises.

    The threads are kept for the next batch (`_Worker`): handing a call to a waiting thread
    costs less CPU than starting one (docs/performance.md). A handler that never returns keeps
    its thread; the next batch gets another.

    The handler runs in a copy of the caller's context (`contextvars`), as an asyncio task
    does: what the caller made current (the batch's span, `sqsbatch._shell.tracing`) is current
    there.
    """

    def __init__(
        self,
        handler: Callable[[Any], object],
        batch: object,
        *,
        keep_awaitable: bool = False,
    ) -> None:
        self.done = Done()
        self._failure: list[BaseException] = []
        worker = _take()
        context = contextvars.copy_context()

        def call_handler() -> None:
            try:
                returned = context.run(handler, batch)
                if returned is not None and inspect.isawaitable(returned):  # no loop runs it
                    if keep_awaitable:
                        self._failure.append(AwaitableReturned(returned, kept=True))
                    else:
                        self._failure.append(not_awaited(returned))
            except BaseException as exc:  # any failure, SystemExit too, fails the batch
                self._failure.append(exc)
            finally:
                _give_back(worker)
                self.done.set()

        worker.submit(call_handler)

    @property
    def failure(self) -> BaseException | None:
        """What the handler raised, once `done` (None: it returned)."""
        return self._failure[0] if self._failure else None


class Done:
    """A one-shot event, set once by the handler's thread: `threading.Event` on a bare lock,
    which costs less a batch than an `Event`, whose wait builds a `Condition` waiter each time."""

    __slots__ = ("_is_set", "_lock")

    def __init__(self) -> None:
        self._lock = _thread.allocate_lock()
        self._lock.acquire()  # held until `set`: waiting is acquiring it
        self._is_set = False

    def set(self) -> None:
        """Once, from the handler's thread."""
        self._is_set = True
        self._lock.release()

    def is_set(self) -> bool:
        return self._is_set

    def wait(self, timeout: float) -> bool:
        """Wait until set, or `timeout` seconds; whether it is set."""
        if not self._is_set and self._lock.acquire(timeout=min(max(0.0, timeout), _LONGEST)):
            self._lock.release()  # for any later wait
        return self._is_set


_LONGEST = threading.TIMEOUT_MAX


MAX_IDLE_WORKERS = 64
"""Idle handler threads kept for later batches; more end."""


class _Worker:
    """A daemon thread that runs the calls it is handed, one after another."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        thread = threading.Thread(target=self._work, name=name, daemon=True)
        thread.start()

    def submit(self, job: Callable[[], None] | None) -> None:
        self._jobs.put(job)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            job()
            del job  # the batch it holds is not kept (nor freed here, later) until the next


class Workers:
    """Daemon threads kept for later calls (`take` one, hand it a call, `give_back` when the
    call is done); at most `max_idle` wait, more end. A call that never ends keeps its thread."""

    def __init__(self, name: str, max_idle: int = MAX_IDLE_WORKERS) -> None:
        self._name = name
        self._max_idle = max_idle
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        _POOLS.append(self)

    def take(self) -> _Worker:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return _Worker(self._name)

    def give_back(self, worker: _Worker) -> None:
        with self._lock:
            if len(self._idle) < self._max_idle:
                self._idle.append(worker)
                return
        worker.submit(None)  # enough are waiting: this thread ends

    def forget(self) -> None:
        self._idle.clear()  # a forked child has none of its parent's threads


_POOLS: list[Workers] = []
_HANDLER_WORKERS = Workers("sqsbatch-handler")
_take = _HANDLER_WORKERS.take
_give_back = _HANDLER_WORKERS.give_back


def _forget_idle() -> None:
    for pool in _POOLS:
        pool.forget()


os.register_at_fork(after_in_child=_forget_idle)


def run_in_thread(
    handler: Callable[[Any], object],
    batch: object,
    budget: float,
    *,
    keep_awaitable: bool = False,
) -> tuple[bool, BaseException | None]:
    """(timed out, raised) of a sync handler; past `budget` its thread is left running. An
    awaitable it returned fails the batch (`AwaitableReturned`), closed; with `keep_awaitable`
    it is kept on the error for a caller with an event loop to await (`run_returned`)."""
    thread = HandlerThread(handler, batch, keep_awaitable=keep_awaitable)
    if not thread.done.wait(budget):
        return True, None
    return False, thread.failure


async def run_async_handler(
    handler: Callable[[Any], object],
    batch: Any,
    budget: float,
    abandoned: set[asyncio.Task[object]],
) -> tuple[bool, BaseException | None]:
    """(timed out, raised) of an `async def` handler (or a callable returning an awaitable),
    cancelled past `budget`."""
    task: asyncio.Task[object] = asyncio.ensure_future(called(handler, batch))
    done, _ = await asyncio.wait({task}, timeout=budget)
    if not done:
        await cancel_handler(task, batch.queue, abandoned)
        return True, None
    return False, handler_failure(task)


async def run_returned(
    ended: tuple[bool, BaseException | None],
    batch: Any,
    budget: float,
    abandoned: set[asyncio.Task[object]],
) -> tuple[bool, BaseException | None]:
    """`ended` (of `run_in_thread(..., keep_awaitable=True)`), where an awaitable the sync
    handler returned is awaited for what is left of its `budget`, as an `async def` would be."""
    error = ended[1]
    if not isinstance(error, AwaitableReturned) or error.awaitable is None:
        return ended
    returned = error.awaitable
    return await run_async_handler(lambda _: returned, batch, max(0.0, budget), abandoned)
