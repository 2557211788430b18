"""Which dead-letter reasons a redrive brings back. Pure: no I/O.

A message's reason is its last death's (`sqsbatch._core.envelope.death_reason`):
`retries_exhausted`, `expired`, `invalid_body`, the text a handler gave `dead_letter()` (category
`requested`), or `moved_by_sqs` when SQS's RedrivePolicy moved it. By default every reason is
brought back but `expired` and `invalid_body`: those would die again (the deadline has passed;
the body will not become valid). They stay in the DLQ (the daemon: or go to the parking queue)
and are reported as `kept`.

`reasons` names categories (`requested`: whatever a handler gave), `requested:TEXT` for one
handler's exact text, or `all`. Anything else is refused in one line naming the nearest valid
value: a typo would otherwise keep, and hide, every message of the DLQ.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqsbatch._core.envelope import EXPIRED, INVALID_BODY
from sqsbatch._core.reasons import CATEGORIES, REQUESTED, category
from sqsbatch.config import did_you_mean
from sqsbatch.errors import ConfigError

__all__ = ["ACCEPTED", "ALL", "BRING_BACK_DEFAULT", "DEFAULT_KEPT", "Reasons"]

ALL = "all"
"""`reasons = ["all"]`: bring back every reason."""
DEFAULT_KEPT = frozenset({EXPIRED, INVALID_BODY})
ONE_TEXT = REQUESTED + ":"
"""`requested:TEXT`: the messages a handler dead-lettered with exactly TEXT."""
ACCEPTED = ", ".join(CATEGORIES) + f", {ONE_TEXT}TEXT (one reason a handler gave) or {ALL}"


@dataclass(frozen=True)
class Reasons:
    """`chosen=None`: every reason but `DEFAULT_KEPT`; else exactly these (`all`: any)."""

    chosen: frozenset[str] | None = None

    @classmethod
    def of(cls, values: Iterable[str] | None) -> Reasons:
        """From the `reasons` setting; an empty, blank or unknown entry is one clear error."""
        if values is None:
            return cls()
        chosen = frozenset(values)
        if not chosen or any(not isinstance(v, str) or not v.strip() for v in chosen):
            raise ConfigError(
                f"reasons={sorted(chosen, key=str)!r} is invalid: give reasons to bring back "
                f"(accepted: {ACCEPTED})"
            )
        for value in sorted(chosen):
            if value not in (*CATEGORIES, ALL) and not _one_text(value):
                nearest = did_you_mean(value, (*CATEGORIES, ALL))
                nearest = nearest or f" (did you mean {ONE_TEXT + value.strip()!r}?)"
                raise ConfigError(
                    f"reasons: {value!r} is not a reason{nearest} (accepted: {ACCEPTED})"
                )
        return cls(chosen)

    def brings_back(self, reason: str) -> bool:
        if self.chosen is None:
            return reason not in DEFAULT_KEPT
        if ALL in self.chosen or category(reason) in self.chosen:
            return True
        return category(reason) == REQUESTED and ONE_TEXT + reason in self.chosen

    def kept(self) -> list[str]:
        """The categories not (all) brought back, for a report: by default `expired`,
        `invalid_body`."""
        chosen = self.chosen
        if chosen is None:
            return sorted(DEFAULT_KEPT)
        if ALL in chosen:
            return []
        return [c for c in CATEGORIES if c not in chosen]


def _one_text(value: str) -> bool:
    return value.startswith(ONE_TEXT) and bool(value[len(ONE_TEXT) :].strip())


BRING_BACK_DEFAULT = Reasons()
