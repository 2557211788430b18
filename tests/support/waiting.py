"""The one way a test waits for what another thread, task or process does: `wait_for`.

Tests wait for a state, never for a guessed time: they must pass on a loaded machine. The
timeout is only a guard against a hung test, not a claim about speed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

GUARD_SECONDS = 60.0
"""How long a state may take before the test fails: far past any real wait, only a hang."""


def wait_for(
    condition: Callable[[], object],
    what: str = "the state",
    *,
    timeout: float = GUARD_SECONDS,
    interval: float = 0.02,
) -> None:
    """Return once `condition()` is true; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never reached within {timeout:g} s: {what}")
        time.sleep(interval)


def telling(call: Callable[[], None], done: threading.Event) -> Callable[[], None]:
    """`call`, then `done` set: for a test to wait on the event instead of a guessed time
    (a poller's `stop`, wrapped, says when its signal handler ran)."""

    def told() -> None:
        call()
        done.set()

    return told
