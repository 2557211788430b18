"""Screening: the messages dead-lettered before their handler, and why. Pure: no I/O.

A message received past its deadline (the producer's `ttl_seconds`, the consumer's
`max_message_age` counted from its `timestamp`, the earlier of the two) is dead-lettered with
reason `expired`; one whose body fails `body_model` validation, with reason `invalid_body` and
the first validation error. Neither is handed to the handler, and neither costs an attempt:
their history entry records the failed deliveries before this one. Messages received before
they are due (delay hops) are postponed before any screening, so a retry or delay that ends
past the deadline dead-letters the message when it comes due, not before.

A message is never screened twice for a death it already died: while it sits in the queue it
was dead-lettered to (sqsbatch dead-lettered it after its last redrive, and this is not the
queue it died on: its DLQ, a parking queue), it is not screened for expiry at all (expiry
dead-letters, and it already is), and its body is not validated again when an invalid body is
what it died of (the handler gets the raw body). It reaches the handler, `message.deaths`
telling why it died, instead of being deleted by a consumer reading its DLQ (a DLQ has no DLQ
of its own). Redriven back to its source (or moved back by SQS's move task), it is screened
again as any message is.

With an envelope (`envelope = "sns"` or `"eventbridge"`), the body is unwrapped first
(`_core.unwrap`): the handler, and `body_model`, see the inner message, and `message.envelope`
the envelope's fields. A body that is not the named envelope is dead-lettered with reason
`invalid_body` too (not when that is what it already died of: it reaches the handler raw).

`screen` sorts a receive's deliveries; `close_screened` turns the doomed ones into a `Closing`
that the same settle flows as a handled batch execute (`flows.settle`, `flows.settle_for_lambda`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError

from sqsbatch._core.closing import Closing, plan_closing
from sqsbatch._core.context import QueueContext
from sqsbatch._core.envelope import EXPIRED, INVALID_BODY, Death, Envelope, ErrorInfo
from sqsbatch._core.ledger import Action, ActionKind, LastFailure
from sqsbatch._core.message import MessageBatch, _Delivery, ledger_of
from sqsbatch._core.unwrap import EnvelopeError, EnvelopeKind, unwrap
from sqsbatch.errors import ConfigError

__all__ = [
    "BodyModel",
    "Doomed",
    "Screen",
    "Screened",
    "close_screened",
    "deadline",
    "resting_death",
    "screen",
]

MAX_ERROR_CHARS = 300
"""How much of the first validation error a history entry keeps."""


class BodyModel:
    """`body_model=`: anything pydantic's `TypeAdapter` accepts (a `BaseModel`, a dataclass,
    a `TypedDict`, `list[int]`); a bad one fails here, at construction, in one line."""

    def __init__(self, model: Any) -> None:
        try:
            self.adapter: TypeAdapter[Any] = TypeAdapter(model)
            if not self.adapter.pydantic_complete:  # a forward reference ("Order") never named
                raise TypeError("it names a type that is not defined")
        except Exception as exc:  # pydantic raises several kinds for what it cannot validate
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(
                f"body_model={model!r} is invalid: not a type pydantic can validate ({first})"
            ) from None
        self.model = model

    def validate(self, delivery: _Delivery) -> Any:
        """The validated body; `ValidationError` when it is invalid. A body that arrived as
        text (a foreign producer: SNS, EventBridge) is validated as JSON text (a large payload's,
        fetched); the inner message of an envelope (`_core.unwrap`), as the value it was read as."""
        decoded = delivery.decoded
        if delivery.outer is None and decoded.envelope.content_type == "text":
            return self.adapter.validate_json(decoded.body)
        return self.adapter.validate_python(delivery.body)


@dataclass(frozen=True)
class Screen:
    """What a consumer screens its messages with (neither: nothing is screened)."""

    max_message_age: float | None = None
    body_model: BodyModel | None = None
    envelope: EnvelopeKind | None = None
    """Unwrap every body from this envelope first (`_core.unwrap`)."""

    @property
    def idle(self) -> bool:
        return self.max_message_age is None and self.body_model is None and self.envelope is None


def deadline(delivery: _Delivery, max_message_age: float | None) -> float | None:
    """The earlier of the producer's deadline and `timestamp + max_message_age` (epoch s)."""
    due = delivery.expires_at
    if max_message_age is None:
        return due
    aged = delivery.timestamp.timestamp() + max_message_age
    return aged if due is None else min(due, aged)


@dataclass(frozen=True)
class Doomed:
    delivery: _Delivery
    reason: str
    error: ErrorInfo | None = None


@dataclass
class Screened:
    live: list[_Delivery]
    doomed: list[Doomed] = field(default_factory=list)


def resting_death(envelope: Envelope, queue: str) -> Death | None:
    """The death a message on `queue` died and now rests from there: its last one, when sqsbatch
    dead-lettered it after its last redrive and `queue` (a name) is not the queue it died on.
    None for a live message: never dead-lettered, redriven back since, moved back to the queue
    it died on (SQS's move task keeps the attribute), or moved by SQS's RedrivePolicy alone."""
    if not envelope.died_since_redrive:
        return None
    last = envelope.deaths[-1]
    return None if last.queue == queue else last


def screen(
    deliveries: Sequence[_Delivery], how: Screen, *, wall_now: float, queue: str
) -> Screened:
    """Sort deliveries on `queue` (its name) into those for the handler (bodies validated) and
    those to dead-letter; never for the death a message already died (`resting_death`)."""
    found = Screened([])
    for delivery in deliveries:
        died = resting_death(delivery.envelope, queue)
        if died is None:
            due = deadline(delivery, how.max_message_age)
            if due is not None and due <= wall_now:
                found.doomed.append(Doomed(delivery, EXPIRED))
                continue
        if how.body_model is not None or how.envelope is not None:
            why = _body_error(delivery, how, died is not None and died.reason == INVALID_BODY)
            if why is not None:
                found.doomed.append(Doomed(delivery, INVALID_BODY, ErrorInfo(*why, wall_now)))
                continue
        found.live.append(delivery)
    return found


def _body_error(delivery: _Delivery, how: Screen, rested: bool) -> tuple[str, str] | None:
    """Why the body is invalid (the error's type and message): not the envelope `how` names,
    or not what `body_model` accepts; None when it is valid (unwrapped and validated for the
    handler). `rested`: it already died of an invalid body, so it is not dead-lettered again."""
    if how.envelope is not None:
        try:
            opened = unwrap(how.envelope, delivery.text)
        except EnvelopeError as exc:
            return None if rested else ("EnvelopeError", str(exc)[:MAX_ERROR_CHARS])
        delivery.unwrapped(opened.body, opened.fields)
    if how.body_model is not None and not rested:
        try:
            delivery.validated(how.body_model.validate(delivery))
        except ValidationError as exc:
            return "ValidationError", _first_error(exc)
    return None


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error.get("loc", ())) or "body"
    return f"{where}: {error.get('msg', '')}"[:MAX_ERROR_CHARS]


_KIND = {
    LastFailure.DEAD_LETTER: ActionKind.DEAD_LETTER,
    LastFailure.DROP: ActionKind.DROP,
    LastFailure.LEAVE: ActionKind.LEAVE,
}


def close_screened(
    doomed: Sequence[Doomed], context: QueueContext, *, wall_now: float
) -> tuple[MessageBatch, Closing]:
    """A batch of the doomed messages (never handed to a handler) and its closing: to the DLQ
    (copy, then delete), deleted and logged without one, or left to the RedrivePolicy (hidden
    for `retry_delay`) when the DLQ is unknown."""
    batch = MessageBatch(context.name, [d.delivery for d in doomed])
    ledger_of(batch).seal()
    kind = _KIND[context.last_failure]
    hide = context.config.retry_delay if kind is ActionKind.LEAVE else 0
    actions = [
        Action(i, kind, hide, error=d.error, reason=d.reason, costs_attempt=False)
        for i, d in enumerate(doomed)
    ]
    closing = plan_closing(batch, actions, context, wall_now=wall_now)
    closing.before_handler = True
    return batch, closing
