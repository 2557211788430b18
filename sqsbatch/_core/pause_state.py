"""A queue's pause, as two queue tags: what to write, and what a reader concludes. No I/O, no clock.

    sqsbatch:paused-until    `2026-11-27T03:00:00Z` (UTC, whole seconds) or `indefinitely`
    sqsbatch:paused-reason   the operator's words, or "" (always written: one `TagQueue` sets both)

A queue is paused while `sqsbatch:paused-until` is present and, when it names a time, that time
is still ahead: an expired pause is not a pause, so nobody has to come back and untag it.
`resume` removes both tags (one `UntagQueue`). A value nobody can read (a hand-edited tag) is
read as paused, indefinitely, with the `problem` named: holding back is the safe side, and the
reader says why.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from sqsbatch._core.flows import Flow, Line, Request
from sqsbatch.errors import SqsBatchError

__all__ = [
    "MAX_PAUSE_SECONDS",
    "REASON_TAG",
    "UNTIL_TAG",
    "PauseCheck",
    "PauseState",
    "check_pause",
    "next_check",
    "parse_duration",
    "pause_tags",
    "read_pause",
]

UNTIL_TAG: Final = "sqsbatch:paused-until"
REASON_TAG: Final = "sqsbatch:paused-reason"
INDEFINITELY: Final = "indefinitely"
MAX_PAUSE_SECONDS: Final = 1_209_600
"""14 days, SQS's longest retention: a longer pause outlives every message it holds back."""
MAX_REASON: Final = 256
"""SQS's longest tag value."""
_REASON_CHARS = re.compile(r"[\w\s.:/=+\-@]*")
"""What AWS accepts in a tag value everywhere: letters, digits, spaces and `_ . : / = + - @`."""
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
_DURATION = re.compile(r"(\d+)([smhd])")


@dataclass(frozen=True)
class PauseState:
    """What a queue's tags say at `now`: paused or not, until when (epoch seconds; None while
    paused indefinitely), why, and a `problem` when a tag could not be read."""

    paused: bool
    until: float | None = None
    reason: str | None = None
    problem: str | None = None

    def until_text(self) -> str:
        """`2026-11-27T03:00:00Z`, `indefinitely`, or "" when not paused."""
        if not self.paused:
            return ""
        return INDEFINITELY if self.until is None else _iso(self.until)


def pause_tags(until: float | None, reason: str | None) -> dict[str, str]:
    """The tags of a pause until `until` (epoch seconds; None: until resumed), for one
    `TagQueue`. A reason AWS would refuse as a tag value is a one-line `ValueError`."""
    text = reason or ""
    if len(text) > MAX_REASON:
        raise ValueError(f"reason is {len(text)} characters long: a queue tag holds {MAX_REASON}")
    if not _REASON_CHARS.fullmatch(text):
        bad = next(char for char in text if not _REASON_CHARS.fullmatch(char))
        raise ValueError(
            f"reason holds {bad!r}: a queue tag takes letters, digits, spaces and _ . : / = + - @"
        )
    return {UNTIL_TAG: INDEFINITELY if until is None else _iso(until), REASON_TAG: text}


def read_pause(tags: dict[str, str], now: float) -> PauseState:
    """Whether the queue with these tags is paused at `now` (epoch seconds)."""
    value = tags.get(UNTIL_TAG)
    if value is None:
        return PauseState(paused=False)
    reason = tags.get(REASON_TAG) or None
    if value == INDEFINITELY:
        return PauseState(paused=True, reason=reason)
    try:
        until = datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        problem = f"{UNTIL_TAG}={value!r} is neither a UTC time (2026-11-27T03:00:00Z) nor "
        problem += f"{INDEFINITELY!r}: read as paused until resumed"
        return PauseState(paused=True, reason=reason, problem=problem)
    if until <= now:
        return PauseState(paused=False)
    return PauseState(paused=True, until=until, reason=reason)


@dataclass(frozen=True)
class PauseCheck:
    """What one check concluded: the state to act on, and a line to log (a tag nobody can read,
    or a check that failed and kept the last state)."""

    state: PauseState
    line: Line | None = None


def check_pause(queue_url: str, now: float, *, last: PauseState | None = None) -> Flow[PauseCheck]:
    """One `ListQueueTags`: whether the queue is paused at `now`. With `last` (a poller's
    periodic check) a failed call keeps `last` and says so in a WARNING line; without it (a
    one-off question) the error is raised."""
    try:
        answer = yield Request("list_queue_tags", {"QueueUrl": queue_url})
    except SqsBatchError as exc:
        if last is None:
            raise
        kept = "paused" if last.paused else "not paused"
        return PauseCheck(last, (logging.WARNING, f"pause check failed, still {kept}: {exc}"))
    state = read_pause(dict(answer.get("Tags") or {}), now)
    line = None if state.problem is None else (logging.WARNING, state.problem)
    return PauseCheck(state, line)


def next_check(state: PauseState, now: float, every: float) -> float:
    """When a poller should read the tags again: after `every` seconds (`pause_check_seconds`),
    or when the pause it read ends, whichever comes first (an expiry needs no call to notice)."""
    due = now + every
    if state.paused and state.until is not None:
        return min(due, state.until)
    return due


def parse_duration(text: str) -> int:
    """`90s`, `15m`, `2h`, `1d`, `1h30m`, or bare seconds (`90`): whole seconds, 1 s to 14 days.
    Anything else is a one-line `ValueError` naming the text."""
    spelled = text.strip().lower()
    if spelled.isdigit():
        seconds = int(spelled)
    elif spelled and _DURATION.sub("", spelled) == "":
        seconds = sum(int(n) * _UNITS[unit] for n, unit in _DURATION.findall(spelled))
    else:
        raise ValueError(f"duration {text!r} is invalid: write it as 90s, 15m, 2h, 1d or 1h30m")
    if not 1 <= seconds <= MAX_PAUSE_SECONDS:
        raise ValueError(
            f"duration {text!r} is invalid: from 1s to 14d (SQS keeps a message 14 days at most)"
        )
    return seconds


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
