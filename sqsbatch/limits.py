"""SQS's hard limits, as one value the decision code takes as a parameter.

The defaults are the real ceilings; tests shrink them to seconds to exercise delay hops and the
visibility ceiling quickly.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SQS_LIMITS", "SqsLimits"]


@dataclass(frozen=True)
class SqsLimits:
    max_send_delay_seconds: int = 900
    """`DelaySeconds` on a send; longer delays travel in hops."""
    visibility_ceiling_seconds: int = 43_200
    """A message cannot stay hidden past 12 hours counted from its receive."""
    max_entries: int = 10
    """Entries in one batch call, and messages in one `ReceiveMessage`."""
    max_payload_bytes: int = 1_048_576
    """One message, and one `SendMessageBatch` call, body plus attributes."""
    max_wait_seconds: int = 20
    """The longest long poll."""
    max_attributes: int = 10
    """Message attributes per message; sqsbatch uses one of them."""


SQS_LIMITS = SqsLimits()
