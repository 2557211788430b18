"""Which dead-letter reasons the daemon brings back. Pure: no I/O.

A message's reason is its last death's (`sqsbatch.envelope.death_reason`): `retries_exhausted`,
`expired`, `invalid_body`, the text a handler gave `dead_letter()`, or `moved_by_sqs` when
SQS's RedrivePolicy moved it. By default every reason is brought back but `expired` and
`invalid_body`: those would die again (the deadline has passed; the body will not become
valid). They stay in the DLQ (or go to the parking queue) and are reported as `kept`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqsbatch.envelope import EXPIRED, INVALID_BODY
from sqsbatch.errors import ConfigError

__all__ = ["ALL", "BRING_BACK_DEFAULT", "DEFAULT_KEPT", "Reasons"]

ALL = "all"
"""`reasons = ["all"]`: bring back every reason."""
DEFAULT_KEPT = frozenset({EXPIRED, INVALID_BODY})


@dataclass(frozen=True)
class Reasons:
    """`chosen=None`: every reason but `DEFAULT_KEPT`; else exactly these (`all`: any)."""

    chosen: frozenset[str] | None = None

    @classmethod
    def of(cls, values: Iterable[str] | None) -> Reasons:
        """From the `reasons` setting; an empty or blank entry is one clear error."""
        if values is None:
            return cls()
        chosen = frozenset(values)
        if not chosen or any(not isinstance(v, str) or not v.strip() for v in chosen):
            raise ConfigError(
                f"reasons={sorted(chosen, key=str)!r} is invalid: give reasons to bring back "
                "(retries_exhausted, moved_by_sqs, expired, invalid_body, a handler's text) or all"
            )
        return cls(chosen)

    def brings_back(self, reason: str) -> bool:
        if self.chosen is None:
            return reason not in DEFAULT_KEPT
        return ALL in self.chosen or reason in self.chosen


BRING_BACK_DEFAULT = Reasons()
