"""Ctrl-C during a one-shot move (`sqsbatch redrive DLQ`): never a lost report.

The first SIGINT/SIGTERM asks the move to stop after the batch under way (its sends and its
deletes), so what was moved is known and printed as usual, then the command exits 128 + the
signal (130 for Ctrl-C). A second one stops at once: the line says how many were moved before
it, and that the messages of the batch under way may be in both queues (never lost).
"""

from __future__ import annotations

import signal
from contextlib import ExitStack
from typing import TYPE_CHECKING

import typer

from sqsbatch._shell.lifecycle import graceful_signals
from sqsbatch.cli.common import say

if TYPE_CHECKING:
    from redrive import MoveRow

__all__ = ["Interrupt"]

SHOWN_IDS = 5
"""How many moved ids the line of an immediate stop names."""


class Interrupt:
    """The signals of one move: `with interrupt:` around it, `asked` for the move to read
    between batches, `rows` as they are settled, and `exit()` once its report is printed."""

    def __init__(self) -> None:
        self.signal: signal.Signals | None = None
        self.rows: list[MoveRow] = []
        self._stack = ExitStack()

    def asked(self) -> bool:
        """Whether a signal asked the move to stop (after the batch under way)."""
        return self.signal is not None

    def __enter__(self) -> Interrupt:
        self._stack.enter_context(graceful_signals(self._on_signal))
        return self

    def __exit__(self, kind: object, error: BaseException | None, trace: object) -> None:
        self._stack.close()
        if isinstance(error, KeyboardInterrupt) and self.signal is not None:
            moved = [row.id for row in self.rows if row.action == "moved"]
            shown = ", ".join(moved[:SHOWN_IDS]) + (
                f" and {len(moved) - SHOWN_IDS} more" if len(moved) > SHOWN_IDS else ""
            )
            say(
                f"{self.signal.name} again: stopped at once; moved {len(moved)} message(s) before"
                + (f" ({shown})" if moved else "")
                + "; the batch under way may be in both queues (never lost), the rest stay",
                "warning",
            )
            raise typer.Exit(128 + self.signal) from None

    def exit(self, dlq: str) -> None:
        """After the report: a move stopped by a signal says so and exits 128 + the signal."""
        if self.signal is None:
            return
        say(f"{self.signal.name}: stopped early; the messages not looked at stay in {dlq}")
        raise typer.Exit(128 + self.signal)

    def _on_signal(self, sig: signal.Signals) -> None:
        if self.signal is not None:
            raise KeyboardInterrupt  # the second one: at once
        self.signal = sig
        again = "Ctrl-C" if sig is signal.SIGINT else sig.name
        say(f"{sig.name}: stopping after the batch under way. {again} again stops at once.")
