"""Starting a handler's thread on its caller's CPU (Linux; elsewhere nothing changes).

A thread that is handed work wakes on an idle CPU: the caller that wakes it is still running,
for the microseconds until it blocks to wait for the handler. On a machine of more than one CPU
the handler then works where none of what its caller just made is cached, and on the 2-CPU
machine of 2026-11-26 a Lambda invocation of 10,000 records cost a third to a half more CPU
that way (docs/performance.md). So before waking the thread, `near_caller` narrows the thread's
CPUs to the one its caller runs on, and the thread widens them back itself (`widen`), before it
calls anything: it starts where its caller was and stays there (the scheduler does not move a
running thread off a CPU that has nothing else to run), and whatever it starts, threads or
processes, inherits the CPUs it had, never the narrowed one. Only for a batch large enough
(`NEAR_FROM_MESSAGES`): for a small one the caller's own work after the handler costs more than
the handler saves.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

__all__ = ["NEAR_FROM_MESSAGES", "near_caller", "widen"]

log = logging.getLogger("sqsbatch")

NEAR_FROM_MESSAGES = 1_000
"""The smallest batch whose handler is started near its caller. Below it the move does not pay:
the same 2-CPU machine, Lambda invocations alternating in one process with and without it, CPU
per invocation 1.09-1.11 times at 10 records, 1.03 at 100, 0.98 at 1,000, 0.74-0.97 at 10,000."""

_unknown: list[Callable[[], int] | None] = []
"""`sched_getcpu`, looked up at the first use (ctypes costs milliseconds to import): [] until
then, [None] where there is no such call."""


def near_caller(thread_id: int | None) -> frozenset[int] | None:
    """Narrow the CPUs of thread `thread_id` (a native id) to the calling thread's; the CPUs it
    had, for `widen`, or None when nothing was narrowed (one CPU, or no way to tell which)."""
    current = _getcpu()
    if current is None or not thread_id:  # 0 would be the calling thread itself
        return None
    try:
        had = frozenset(os.sched_getaffinity(thread_id))
        if len(had) < 2 or (cpu := current()) not in had:
            return None
        os.sched_setaffinity(thread_id, {cpu})
    except OSError:  # the thread ended, or a cpuset forbids it: it starts where it may
        return None
    return had


def widen(had: frozenset[int]) -> None:
    """On the narrowed thread itself: give it back the CPUs it had."""
    try:
        os.sched_setaffinity(0, had)
    except OSError:  # a CPU it had went away meanwhile (a cpuset changed): the process's CPUs
        try:
            os.sched_setaffinity(0, os.sched_getaffinity(os.getpid()))
        except OSError:
            log.warning("a handler's thread keeps to one CPU: its CPUs could not be widened")


def _getcpu() -> Callable[[], int] | None:
    if not _unknown:
        _unknown.append(_load_getcpu())
    return _unknown[0]


def _load_getcpu() -> Callable[[], int] | None:
    if not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2:
        return None
    try:
        import ctypes  # noqa: PLC0415 - milliseconds to import, only where it is used

        getcpu: Callable[[], int] = ctypes.CDLL(None, use_errno=True).sched_getcpu
    except (OSError, AttributeError):  # no C library to ask, or one without the call
        return None
    return getcpu
