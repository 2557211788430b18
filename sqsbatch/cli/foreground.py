"""A poller run in the foreground of `sqsbatch consume`: two-step Ctrl-C and live counters.

The poller runs on its own thread (where the library installs no signal handlers), so that the
main thread can answer signals at once:

- the first SIGINT/SIGTERM says on stderr what the stop waits for (the messages in flight, the
  current long poll) and asks the poller to stop gracefully; the command then exits 0;
- a second one ends the process at once, with exit code 128 + the signal (130 for Ctrl-C): the
  messages in flight are not settled, SQS delivers them again after their visibility timeout.

On a terminal the main thread also shows the poller's counters, live, on stderr.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from rich.live import Live
from rich.panel import Panel
from rich.table import Table

from sqsbatch._shell.lifecycle import answer_signals, graceful_signals
from sqsbatch.cli.common import err, say, stderr_line

__all__ = ["Foreground", "in_flight"]

SETTLED = (
    "acked",
    "retried",
    "dead_lettered",
    "dropped",
    "left_to_redrive_policy",
    "settle_failures",
    "expired_receipts",
    "payloads_unread",
)
"""The counters of messages that are no longer in a handler's hands."""
_SHOW_CURSOR = "\x1b[?25h"  # rich's live view hides it; an immediate exit must give it back


def in_flight(stats: Mapping[str, int]) -> int:
    """Messages received and not settled yet (being handled, or being settled)."""
    return max(0, stats.get("received", 0) - sum(stats.get(name, 0) for name in SETTLED))


@dataclass
class Foreground:
    """Runs `work` (a poller's blocking run) on a thread until it returns.

    `stop` asks the poller to stop gracefully (thread-safe); `stats` reads its counters.
    """

    work: Callable[[], object]
    stop: Callable[[], None]
    stats: Callable[[], dict[str, int]]
    title: str
    poll_seconds: int
    visibility_timeout: int
    live: bool = False
    _signal: signal.Signals | None = field(default=None, init=False)
    _in_flight: int = field(default=0, init=False)
    _failure: list[BaseException] = field(default_factory=list, init=False)

    def run(self) -> None:
        """Run the poller; re-raise what it raised."""
        thread = threading.Thread(target=self._work, name="sqsbatch-poller", daemon=True)
        with graceful_signals(self._on_signal), self._view():
            thread.start()
            self._watch(thread)
        if self._signal is not None:  # winding down after a stop: a second signal still ends it
            answer_signals(self._on_signal)
        if self._failure:
            raise self._failure[0]

    def _work(self) -> None:
        try:
            self.work()
        except BaseException as exc:  # handed to the main thread, which reports it
            self._failure.append(exc)

    def _watch(self, thread: threading.Thread) -> None:
        announced = False
        while thread.is_alive():
            thread.join(0.1)
            self._in_flight = in_flight(self.stats())
            if self._signal is not None:
                self.stop()  # again: a stop asked before the poller started must not be lost
                if not announced:
                    say(self._stopping_line(self._signal))
                    announced = True

    def _stopping_line(self, sig: signal.Signals) -> str:
        again = "Ctrl-C" if sig is signal.SIGINT else sig.name
        return (
            f"{sig.name}: stopping: no new receives; waiting for {self._in_flight} message(s) "
            f"in flight to finish and settle and for the current long poll (up to "
            f"{self.poll_seconds} s). {again} again stops at once."
        )

    def _on_signal(self, sig: signal.Signals) -> None:
        if self._signal is None:
            self._signal = sig  # the main loop says so and stops the poller
            self.stop()
            return
        line = stderr_line(self._again_line(sig), "warning")
        os.write(2, ((_SHOW_CURSOR + "\n" if self.live else "") + line).encode())
        os._exit(128 + sig)

    def _again_line(self, sig: signal.Signals) -> str:
        return (
            f"{sig.name} again: stopped at once; {self._in_flight} message(s) "
            f"in flight were not settled: SQS delivers them again when their visibility "
            f"timeout ends ({self.visibility_timeout} s after their receive or last heartbeat)"
        )

    @contextmanager
    def _view(self) -> Iterator[None]:
        if not self.live:
            yield
            return
        started = time.monotonic()
        with Live(
            get_renderable=lambda: self._panel(time.monotonic() - started),
            console=err,
            refresh_per_second=4,
            transient=True,
        ):
            yield

    def _panel(self, elapsed: float) -> Panel:
        stats = self.stats()
        table = Table.grid(padding=(0, 2))
        table.add_column(justify="right")
        table.add_column()
        for label, value in (
            ("received", stats.get("received", 0)),
            ("acked", stats.get("acked", 0)),
            ("retried", stats.get("retried", 0)),
            ("dead-lettered", stats.get("dead_lettered", 0)),
            ("in flight", in_flight(stats)),
            ("handler errors", stats.get("handler_errors", 0)),
        ):
            table.add_row(f"[bold]{value}[/]", label)
        state = "stopping" if self._signal is not None else "Ctrl-C stops"
        return Panel(table, title=f"{self.title} · {elapsed:.0f}s · {state}", title_align="left")
