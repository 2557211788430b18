"""What every long-running loop shares: thread-safe counters and graceful SIGTERM/SIGINT.

Used by the sync and async pollers and by the redrive daemon.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields

__all__ = ["ConsumerStats", "Counters", "graceful_loop_signals", "graceful_signals"]


@dataclass
class Counters:
    """Integer counters (declared as fields by subclasses); safe to update from any thread."""

    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, counts: Mapping[str, int]) -> None:
        """Add `counts`; a breakdown (`dead_lettered:expired`) is for the metrics, not here."""
        values = vars(self)
        with self._lock:
            for name, value in counts.items():
                if value and ":" not in name:
                    values[name] += value

    def as_dict(self) -> dict[str, int]:
        with self._lock:
            return {f.name: getattr(self, f.name) for f in fields(self) if f.name[0] != "_"}


@contextmanager
def graceful_signals(on_signal: Callable[[signal.Signals], None]) -> Iterator[None]:
    """Call `on_signal` on SIGTERM/SIGINT inside the block (main thread only), then restore
    the previous handlers. The first signal asks the loop to stop; it never interrupts a call."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

    def handler(signum: int, frame: object) -> None:
        on_signal(signal.Signals(signum))

    for sig in previous:
        signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def answer_signals(on_signal: Callable[[signal.Signals], None]) -> None:
    """Call `on_signal` on SIGTERM/SIGINT from now on, for the rest of the process (main thread
    only): a command winding down after its first signal still answers a second one."""
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, frame: on_signal(signal.Signals(signum)))


@contextmanager
def graceful_loop_signals(on_signal: Callable[[signal.Signals], None]) -> Iterator[None]:
    """`graceful_signals` for an asyncio loop: the handlers run on the running event loop."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    loop = asyncio.get_running_loop()
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    for sig in previous:
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        yield
    finally:
        for sig, old in previous.items():
            loop.remove_signal_handler(sig)
            signal.signal(sig, old)


@dataclass
class ConsumerStats(Counters):
    """Counters a consumer keeps; safe to read from any thread."""

    received: int = 0
    batches: int = 0
    acked: int = 0
    retried: int = 0
    dead_lettered: int = 0
    dropped: int = 0
    left_to_redrive_policy: int = 0
    postponed: int = 0
    expired_receipts: int = 0
    settle_failures: int = 0
    receive_errors: int = 0
    handler_errors: int = 0
    handler_timeouts: int = 0
    circuit_open: int = 0
    paused_seconds: int = 0
    payloads_fetched: int = 0
    """Large payloads read from S3 (one `GetObject` each; docs/payloads.md)."""
    payloads_unread: int = 0
    """Large payloads S3 would not give: their messages left for SQS to deliver again."""
    payloads_deleted: int = 0
    """Objects of acked messages deleted from S3."""
