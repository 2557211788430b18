"""A sync handler on the main thread, stopped at its deadline by SIGALRM (the Lambda adapter).

Lambda's runtime calls the function on the process's main thread, one invocation at a time. So
`run_sync_handler` calls a sync handler right there, with no thread to hand the batch to and
back: it arms `ITIMER_REAL` for the handler's budget, and at the deadline the SIGALRM handler
raises `HandlerTimeout` into the handler at the Python line it is on; the batch is then settled
as timed out (explicit acks hold, the rest is retried). A handler that catches it and goes on
gets it again every `GRACE_SECONDS` until it ends; whatever it does after the deadline, its
batch counts as timed out.

The interrupt never lands in sqsbatch's own code: when SIGALRM comes while sqsbatch code runs
(a `message.ack()`, the ledger, a body decoded on first read, a `Producer` call the handler
made), the signal handler raises nothing and tries again `DEFER_SECONDS` later, so a call into
sqsbatch ends whole, or is not made. The same holds for `logging`, which the adapter uses right
after the handler: a log call is never cut between taking its handler's lock and letting go.
The timer is disarmed, and the previous SIGALRM handler put back, before any of sqsbatch's code
runs after the handler.

Only where that is sound; elsewhere the handler runs on a thread of its own as before
(`handler_tasks.run_in_thread`: the caller stops waiting at the deadline, the thread runs on):
not on the main thread, SIGALRM not at its default (the application uses it), `ITIMER_REAL`
already armed, or no `setitimer` (Windows).
"""

from __future__ import annotations

import contextvars
import importlib
import inspect
import logging
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from sqsbatch._core.handlers import not_awaited
from sqsbatch._shell.handler_tasks import CANCEL_GRACE_SECONDS, run_in_thread
from sqsbatch.errors import AwaitableReturned, HandlerTimeout

__all__ = ["DEFER_SECONDS", "GRACE_SECONDS", "can_interrupt", "run_sync_handler"]

GRACE_SECONDS = CANCEL_GRACE_SECONDS
"""A handler that goes on after `HandlerTimeout` gets it again this often."""

DEFER_SECONDS = 0.01
"""An interrupt that came while sqsbatch's own code ran is tried again this much later."""

_SQSBATCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # sqsbatch/
_OURS = (_SQSBATCH + os.sep, os.path.dirname(os.path.abspath(logging.__file__)) + os.sep)
"""Where sqsbatch's code is (the whole package), and `logging`'s: frames of files under them are
not interrupted."""

_HAS_TIMER = hasattr(signal, "setitimer") and hasattr(signal, "SIGALRM")

try:  # the C functions under `signal`'s: a tenth of the CPU (no enum made for each answer)
    _raw: Any = importlib.import_module("_signal")
except ImportError:  # an interpreter without it: `signal`'s own, the same answers as ints
    _raw = signal
_DEFAULT = int(signal.SIG_DFL)


class _Alarm:
    """The one armed deadline (the main thread runs one handler at a time)."""

    __slots__ = ("armed", "fired")

    def __init__(self) -> None:
        self.armed = False
        """While the handler runs: the signal handler may interrupt it."""
        self.fired = False
        """The deadline came while the handler ran."""


_alarm = _Alarm()


def can_interrupt() -> bool:
    """Whether a handler called here can be stopped by SIGALRM: on the main thread, with
    SIGALRM at its default and `ITIMER_REAL` unarmed (nobody else uses them)."""
    return (
        _HAS_TIMER
        and threading.current_thread() is threading.main_thread()
        and _raw.getsignal(signal.SIGALRM) == _DEFAULT
        and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    )


def run_sync_handler(
    handler: Callable[[Any], object],
    batch: object,
    budget: float,
    *,
    keep_awaitable: bool = False,
) -> tuple[bool, BaseException | None]:
    """(timed out, raised) of a sync handler given `budget` seconds: called here and interrupted
    at the deadline where it can be (`can_interrupt`), else on a thread (`run_in_thread`). An
    awaitable it returned fails the batch (`AwaitableReturned`; kept with `keep_awaitable`).
    With no time left it is not called (a thread would be left behind, its calls ignored)."""
    if budget <= 0:
        return True, None
    if not _take_alarm(budget):
        return run_in_thread(handler, batch, budget, keep_awaitable=keep_awaitable)
    return _run_inline(handler, batch, keep_awaitable)


def _take_alarm(budget: float) -> bool:
    """Install the SIGALRM handler and arm `ITIMER_REAL` for `budget` seconds, when nobody else
    uses them and this is the main thread (`can_interrupt`, in fewer calls); whether it did."""
    if not _HAS_TIMER or _raw.getsignal(signal.SIGALRM) != _DEFAULT:
        return False
    try:
        _raw.signal(signal.SIGALRM, _on_alarm)
    except ValueError:  # not the main thread
        return False
    alarm = _alarm
    alarm.fired = False
    alarm.armed = True
    was = signal.setitimer(signal.ITIMER_REAL, budget, GRACE_SECONDS)
    if was != (0.0, 0.0):  # the application's own timer (a watchdog that ends the process)
        alarm.armed = False
        signal.setitimer(signal.ITIMER_REAL, *was)
        _raw.signal(signal.SIGALRM, _DEFAULT)
        return False
    return True


def _run_inline(
    handler: Callable[[Any], object], batch: object, keep_awaitable: bool
) -> tuple[bool, BaseException | None]:
    """The handler on this thread, in a copy of the context (as a thread or a task runs it),
    with the alarm `_take_alarm` armed; SIGALRM put back as it was after."""
    alarm = _alarm
    try:
        try:
            returned = contextvars.copy_context().run(handler, batch)
        except BaseException as exc:  # any failure, SystemExit too, fails the batch
            return (True, None) if alarm.fired else (False, exc)
        timed_out = alarm.fired
    finally:
        alarm.armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        _pending_signals_run()
        _raw.signal(signal.SIGALRM, _DEFAULT)
    if returned is None or not inspect.isawaitable(returned):
        return timed_out, None
    if keep_awaitable and not timed_out:  # a caller with an event loop awaits it
        return False, AwaitableReturned(returned, kept=True)
    return timed_out, None if timed_out else not_awaited(returned)


def _pending_signals_run() -> None:
    """Nothing: a Python call, at whose start a SIGALRM already delivered runs its handler
    (disarmed: it does nothing) before the default disposition is put back."""


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    """SIGALRM while a handler runs: `HandlerTimeout` raised into it, unless sqsbatch's own
    code is running (then again in `DEFER_SECONDS`)."""
    alarm = _alarm
    if not alarm.armed:  # after the handler ended: the caller disarms the timer next
        return
    alarm.fired = True
    if _in_sqsbatch(frame):
        signal.setitimer(signal.ITIMER_REAL, DEFER_SECONDS, GRACE_SECONDS)
        return
    raise HandlerTimeout(
        "sqsbatch: the handler's time is up (handler_timeout, or the function's time left)"
    )


def _in_sqsbatch(frame: FrameType | None) -> bool:
    """Whether sqsbatch's own code is running: a frame of a file of sqsbatch's between `frame`
    and the handler's caller (`_run_inline`), or that caller itself (the handler has not
    started, or has ended). When the caller is not found, counted as ours (nothing raised)."""
    if frame is None or frame.f_code is _RUN_CODE:
        return True
    while frame is not None:
        code = frame.f_code
        if code is _RUN_CODE:  # up to the handler's caller, every frame was the handler's own
            return False
        if code.co_filename.startswith(_OURS):
            return True
        frame = frame.f_back
    return True


_RUN_CODE = _run_inline.__code__
