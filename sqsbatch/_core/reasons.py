"""Dead-letter reasons by category, for `--filter reason:...` and the `reasons` of a redrive.

A message's reason on a DLQ (`sqsbatch._core.envelope.death_reason`) is one of sqsbatch's own
(`retries_exhausted`, `expired`, `invalid_body`, `payload_missing`), `moved_by_sqs` (SQS's
RedrivePolicy moved it), or the text a handler gave `dead_letter(reason)`, whose category is
`requested`.
"""

from __future__ import annotations

from sqsbatch._core.envelope import (
    EXPIRED,
    INVALID_BODY,
    MOVED_BY_SQS,
    PAYLOAD_MISSING,
    RETRIES_EXHAUSTED,
)

__all__ = ["CATEGORIES", "REQUESTED", "category", "matches"]

REQUESTED = "requested"
"""The category of every reason a handler gave (`message.dead_letter(reason)`)."""
CATEGORIES = (RETRIES_EXHAUSTED, EXPIRED, INVALID_BODY, PAYLOAD_MISSING, REQUESTED, MOVED_BY_SQS)


def category(reason: str) -> str:
    """`reason` itself for one of sqsbatch's or SQS's; `requested` for a handler's text."""
    return reason if reason in CATEGORIES and reason != REQUESTED else REQUESTED


def matches(reason: str, wanted: str) -> bool:
    """`wanted` (a category, or a handler's exact text) describes `reason`."""
    return reason == wanted or (wanted == REQUESTED and category(reason) == REQUESTED)
