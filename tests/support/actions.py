"""`actions_of`: the core's `actions_for` with the settings most tests of it do not vary."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqsbatch._core.ledger import Action, Decision, Delivered, LastFailure, actions_for

SETTINGS: dict[str, Any] = {
    "max_retries": 3,
    "retry_delay": 0,
    "last_failure": LastFailure.DEAD_LETTER,
    "failure": ("E", "boom"),
    "now": 0.0,
    "wall_now": 1e9,
}
"""Three retries, no retry delay, a known DLQ, a failure `E: boom`, at time 0 (wall: 1e9)."""


def actions_of(
    messages: Sequence[Delivered], decisions: Sequence[Decision], **settings: Any
) -> list[Action]:
    """The actions for `decisions` on `messages`, `settings` on top of `SETTINGS`."""
    return actions_for(messages, decisions, **{**SETTINGS, **settings})
