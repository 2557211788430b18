"""What the daemon and the manual move report: counters, per-message rows, log lines."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from redrive.plan import MoveRow
from sqsbatch._shell.lifecycle import Counters

__all__ = ["MoveReport", "RedriveStats", "event", "event_line"]


@dataclass
class RedriveStats(Counters):
    """The daemon's counters; safe to read from any thread.

    `moved`/`parked` count messages SQS accepted at their destination; `delayed` those hidden in
    the DLQ until they are due (or until the rate limit allows them); `exhausted`, `kept`
    (a reason not brought back: `reasons`) and `unroutable` count reports of messages that
    stay in the DLQ (a message is reported again every `hold_seconds` while it stays); `failed`
    counts messages for which SQS refused a call (a refused send leaves the message in the DLQ
    for a later pass; a refused delete after an accepted send leaves a duplicate, never a loss).
    """

    moved: int = 0
    delayed: int = 0
    exhausted: int = 0
    parked: int = 0
    unroutable: int = 0
    kept: int = 0
    failed: int = 0


@dataclass
class MoveReport:
    """The outcome of `move_now`: counts and one row per message looked at.

    `moved` counts the messages moved (in a dry run: that would be moved); `skipped` those not
    selected; `kept` those selected whose reason is not moved (`reasons`: by default `expired`
    and `invalid_body`), which stay in the DLQ; `failed` those that could not go (refused, or
    no source known). Messages received past the limit are released without a row.
    """

    moved: int = 0
    skipped: int = 0
    failed: int = 0
    dry_run: bool = False
    kept: int = 0
    rows: list[MoveRow] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "moved": self.moved,
            "skipped": self.skipped,
            "failed": self.failed,
            "kept": self.kept,
            "dry_run": self.dry_run,
            "rows": [row.as_dict() for row in self.rows],
        }


def event_line(fields_: Mapping[str, Any]) -> str:
    """One structured log line, `key=value` pairs; values with spaces or quotes are quoted."""
    parts = []
    for key, value in fields_.items():
        if value is None:
            continue
        text = value if isinstance(value, str) else json.dumps(value)
        if not text or any(c in text for c in ' "=\\'):
            text = json.dumps(text)
        parts.append(f"{key}={text}")
    return " ".join(parts)


def event(level: int, fields_: Mapping[str, Any]) -> None:
    """Log one action on the `redrive` logger: the line, and the fields for JSON formatters."""
    logging.getLogger("redrive").log(level, "%s", event_line(fields_), extra={"redrive": fields_})
