"""Messages dead-lettered before their handler (issue 12): deadlines and typed bodies, table-tested
on the pure core and on the `receive` flow over a scripted client, without SQS."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from sqsbatch import ConsumerConfig
from sqsbatch._core.context import QueueContext
from sqsbatch._core.envelope import ATTRIBUTE, Death, Envelope, decode
from sqsbatch._core.intake import ReceiveErrors, Screening, receive
from sqsbatch._core.ledger import ActionKind, LastFailure
from sqsbatch._core.message import _Delivery
from sqsbatch._core.screening import BodyModel, Screen, close_screened, deadline, screen
from sqsbatch.errors import ConfigError
from tests.core.test_flows import DLQ, URL, WALL, ScriptedSqs, drive

SENT = 1_700_000_000.0
"""Every message here was sent at this wall time (`SentTimestamp`)."""


def raw(index: int, body: str = "1", *, attempts: int = 1, **envelope: Any) -> dict[str, Any]:
    user = {ATTRIBUTE: dict(Envelope(**envelope).to_attribute())} if envelope else {}
    return {
        "MessageId": f"m{index}",
        "ReceiptHandle": f"r{index}",
        "Body": body,
        "Attributes": {"ApproximateReceiveCount": str(attempts), "SentTimestamp": "1700000000000"},
        "MessageAttributes": user,
    }


def delivery(index: int = 0, body: str = "1", **envelope: Any) -> _Delivery:
    return _Delivery(decode(raw(index, body, **envelope)), f"r{index}", 0.0, 30.0)


@pytest.mark.parametrize(
    ("expires_at", "max_age", "expected"),
    [
        (None, None, None),
        (SENT + 60, None, SENT + 60),
        (None, 30.0, SENT + 30),
        (SENT + 60, 30.0, SENT + 30),  # the earlier wins
        (SENT + 10, 30.0, SENT + 10),
    ],
)
def test_the_deadline_is_the_earlier_of_ttl_and_max_message_age(
    expires_at: float | None, max_age: float | None, expected: float | None
) -> None:
    found = delivery(content_type="json", expires_at=expires_at) if expires_at else delivery()
    assert deadline(found, max_age) == expected


@pytest.mark.parametrize(("now", "expired"), [(SENT + 59.9, False), (SENT + 60, True)])
def test_a_message_is_expired_from_its_deadline_on(now: float, expired: bool) -> None:
    screened = screen(
        [delivery(content_type="json", expires_at=SENT + 60)],
        Screen(),
        wall_now=now,
        queue="orders",
    )
    assert [d.reason for d in screened.doomed] == (["expired"] if expired else [])
    assert len(screened.live) == (0 if expired else 1)


class Order(BaseModel):
    id: int


def died(
    reason: str, *, redrives: int = 0, on: str = "orders", at_redrive: int | None = None
) -> dict[str, Any]:
    """The envelope fields of a message sqsbatch dead-lettered once, on `on`, for `reason`;
    `at_redrive`: its dead count when it was last redriven, as a redrive records it."""
    death = Death(reason=reason, queue=on, attempts=0, at=SENT + 1)
    fields = {"deaths": (death,), "dead_count": 1, "redrives": redrives}
    return fields | {"dead_count_at_redrive": at_redrive}


VALID, INVALID = '{"id":1}', '{"id":"x"}'


@pytest.mark.parametrize(
    ("body", "history", "queue", "expected"),
    [
        # never dead-lettered: screened as always
        (VALID, {}, "orders-dlq", "expired"),
        (INVALID, {}, "orders-dlq", "expired"),  # expiry is screened first
        # resting in the queue it was dead-lettered to: not screened for the death it died,
        # nor for expiry at all (expiry dead-letters, and it already is)
        (VALID, died("expired"), "orders-dlq", None),
        (INVALID, died("invalid_body"), "orders-dlq", None),
        (VALID, died("retries_exhausted"), "orders-dlq", None),
        (VALID, died("tenant gone"), "orders-parking", None),
        # a new death is a new death: a body the DLQ's consumer cannot validate
        (INVALID, died("expired"), "orders-dlq", "invalid_body"),
        (INVALID, died("retries_exhausted"), "orders-dlq", "invalid_body"),
        # back at its source: redriven (one more redrive), or moved back as it was
        (VALID, died("expired", redrives=1), "orders", "expired"),
        (VALID, died("expired"), "orders", "expired"),
        (INVALID, died("invalid_body", redrives=1), "orders", "expired"),
        # SQS's RedrivePolicy moved it (no death), it was redriven, then sqsbatch dead-lettered
        # it: as many deaths as redrives, yet it died since its last redrive, and rests
        (VALID, died("expired", redrives=1, at_redrive=0), "orders-dlq", None),
        (INVALID, died("invalid_body", redrives=1, at_redrive=0), "orders-dlq", None),
        # ... and redriven once more since that death, it is live again at its source
        (VALID, died("expired", redrives=2, at_redrive=1), "orders", "expired"),
    ],
)
def test_a_message_is_never_screened_again_for_the_death_it_died(
    body: str, history: dict[str, Any], queue: str, expected: str | None
) -> None:
    # Given a message past its producer's deadline and its consumer's max_message_age
    found = delivery(0, body, content_type="json", expires_at=SENT + 5, **history)
    how = Screen(max_message_age=10, body_model=BodyModel(Order))
    # When a consumer of `queue` screens it
    screened = screen([found], how, wall_now=SENT + 60, queue=queue)
    # Then it dies again only for a death it has not died where it rests
    assert [d.reason for d in screened.doomed] == ([expected] if expected else [])
    if expected is None:
        assert [d.deaths for d in screened.live] == [history["deaths"]]


@dataclass
class Point:
    x: int


@pytest.mark.parametrize(
    ("model", "body", "content_type", "expected"),
    [
        (Order, '{"id":7}', "json", Order(id=7)),
        (Order, '{"id":"7"}', "json", Order(id=7)),  # pydantic's lax mode
        (Order, '{"id":7}', None, Order(id=7)),  # foreign text is validated as JSON text
        (list[int], "[1,2]", "json", [1, 2]),
        (Point, '{"x":1}', "json", Point(1)),
        (str, '"hi"', "text", "hi"),  # text bodies are JSON text, whatever the model
    ],
)
def test_a_valid_body_reaches_the_handler_validated(
    model: Any, body: str, content_type: str | None, expected: Any
) -> None:
    found = delivery(0, body, content_type=content_type) if content_type else delivery(0, body)
    screened = screen([found], Screen(body_model=BodyModel(model)), wall_now=SENT, queue="orders")
    assert [d.body for d in screened.live] == [expected]
    assert found.decoded.raw_body == body  # a re-sent copy keeps the body as it came


@pytest.mark.parametrize(
    ("model", "body", "error"),
    [
        (Order, '{"id":"x"}', "id: Input should be a valid integer"),
        (Order, "{}", "id: Field required"),
        (Order, "not json", "body: Invalid JSON"),
        (list[int], '["a"]', "0: Input should be a valid integer"),
    ],
)
def test_an_invalid_body_is_doomed_with_its_first_error(model: Any, body: str, error: str) -> None:
    found = delivery(0, body) if body == "not json" else delivery(0, body, content_type="json")
    screened = screen([found], Screen(body_model=BodyModel(model)), wall_now=WALL, queue="orders")
    [doomed] = screened.doomed
    assert doomed.reason == "invalid_body" and screened.live == []
    assert doomed.error is not None and doomed.error.type == "ValidationError"
    assert doomed.error.message.startswith(error)


@pytest.mark.parametrize("model", [42, "Order", object(), print])
def test_a_bad_body_model_fails_at_construction_in_one_line(model: Any) -> None:
    with pytest.raises(ConfigError, match=r"^body_model=.* is invalid: not a type pydantic") as e:
        BodyModel(model)
    assert "\n" not in str(e.value)


def context(last_failure: LastFailure = LastFailure.DEAD_LETTER) -> QueueContext:
    config = ConsumerConfig(max_retries=3, retry_delay=30, max_message_age=60)
    dlq = DLQ if last_failure is LastFailure.DEAD_LETTER else None
    return QueueContext("orders", URL, dlq, config, last_failure, False)


@pytest.mark.parametrize(
    ("last_failure", "kind", "delay"),
    [
        (LastFailure.DEAD_LETTER, ActionKind.DEAD_LETTER, 0),
        (LastFailure.DROP, ActionKind.DROP, 0),
        (LastFailure.LEAVE, ActionKind.LEAVE, 30),
    ],
)
def test_doomed_messages_go_where_the_queue_sends_its_dead(
    last_failure: LastFailure, kind: ActionKind, delay: int
) -> None:
    doomed = screen(
        [delivery()], Screen(max_message_age=60), wall_now=SENT + 61, queue="orders"
    ).doomed
    _, closing = close_screened(doomed, context(last_failure), wall_now=WALL)
    assert closing.kinds == [kind] and closing.reasons == {0: "expired"}
    if kind is ActionKind.LEAVE:
        assert closing.entries.first[0].params["VisibilityTimeout"] == delay


def receiving(
    *messages: dict[str, Any], now: float, screen: Screen | None = None
) -> tuple[Any, ScriptedSqs]:
    client = ScriptedSqs(receive_message=[lambda params: {"Messages": list(messages)}])
    how = screen if screen is not None else Screen(max_message_age=60, body_model=BodyModel(Order))
    flow = receive(
        "orders",
        URL,
        asked=10,
        wait_seconds=0,
        visibility=30,
        received_at=0.0,
        wall_clock=lambda: now,
        errors=ReceiveErrors(),
        random=_Low(),
        screening=Screening(context(), how),
    )
    return drive(client, flow)[0], client


class _Low:
    def uniform(self, a: float, b: float) -> float:
        return a


def test_receive_dead_letters_the_expired_and_the_invalid_and_delivers_the_rest() -> None:
    # Given: m0 fine, m1 past its producer's deadline, m2 with an invalid body, m3 too old
    received, client = receiving(
        raw(0, '{"id":1}', content_type="json", expires_at=SENT + 100),
        raw(1, '{"id":1}', attempts=3, content_type="json", expires_at=SENT + 5),
        raw(2, '{"id":"x"}', content_type="json"),
        raw(3, '{"id":1}', content_type="json", timestamp=SENT - 50),
        now=SENT + 30,
    )
    # Then only m0 is delivered, validated; the others are copied to the DLQ, then deleted
    assert [d.id for d in received.deliveries] == ["m0"]
    assert received.deliveries[0].body == Order(id=1)
    assert [op for op, _ in client.calls] == [
        "receive_message",
        "send_message_batch",
        "delete_message_batch",
    ]
    sent = client.calls[1][1]["Entries"]
    deaths = [json.loads(e["MessageAttributes"][ATTRIBUTE]["StringValue"])["dh"] for e in sent]
    assert [(d[0]["r"], d[0]["a"]) for d in deaths] == [
        ("expired", 2),  # delivered 3 times: the two before this one failed, this one is free
        ("invalid_body", 0),
        ("expired", 0),
    ]
    assert received.counts == {
        "received": 4,
        "dead_lettered": 3,
        "dead_lettered:expired": 2,
        "dead_lettered:invalid_body": 1,
    }
    level, line = received.line
    assert (level, line) == (
        logging.WARNING,
        "orders: 3 messages dead-lettered before the handler to orders-dlq: expired (m1, m3), "
        "invalid_body (m2)",
    )


@pytest.mark.parametrize("expired", [False, True])
def test_without_max_message_age_or_body_model_only_a_producers_deadline_screens(
    expired: bool,
) -> None:
    # Given a consumer that screens nothing of its own, and foreign messages (no attribute)
    foreign = [raw(0, "a"), raw(1, "b")]
    ours = [raw(2, "1", content_type="json", expires_at=SENT + 5)] if expired else []
    # When a receive brings them (with, or without, one of ours past its producer's deadline)
    received, client = receiving(*foreign, *ours, now=SENT + 30, screen=Screen())
    # Then the foreign ones are delivered, and only the expired one of ours is dead-lettered
    assert [d.id for d in received.deliveries] == ["m0", "m1"]
    calls = ["receive_message", "send_message_batch", "delete_message_batch"]
    assert [op for op, _ in client.calls] == (calls if expired else calls[:1])
    assert received.counts.get("dead_lettered:expired", 0) == int(expired)


def test_a_hop_received_early_is_postponed_even_past_its_deadline() -> None:
    # Given a delay hop not due yet, whose deadline passes before it is due
    early = raw(0, '{"id":1}', content_type="json", due_at=SENT + 500, expires_at=SENT + 200)
    received, client = receiving(early, now=SENT + 100)
    # Then it is re-sent for the rest of its delay: it dies when it comes due, not before
    assert received.deliveries == [] and received.counts["postponed"] == 1
    [send] = client.calls[1][1]["Entries"]
    assert (
        client.calls[1][1]["QueueUrl"] == URL
        and "dh" not in send["MessageAttributes"][ATTRIBUTE]["StringValue"]
    )
    # and once due, it is received past its deadline and dead-lettered
    late = raw(0, '{"id":1}', content_type="json", due_at=SENT + 500, expires_at=SENT + 200)
    received, client = receiving(late, now=SENT + 501)
    assert received.deliveries == [] and received.counts["dead_lettered"] == 1
    assert client.calls[1][1]["QueueUrl"] == DLQ


def test_max_message_age_of_zero_or_past_14_days_is_refused_in_one_line() -> None:
    for value in (0, -1, 1_209_601):
        with pytest.raises(ConfigError, match=r"^max_message_age=.* is invalid") as raised:
            ConsumerConfig(max_message_age=value)
        assert "\n" not in str(raised.value)
    assert ConsumerConfig(max_message_age=1).max_message_age == 1
