"""Intake, written once (`sqsbatch._core.intake`): a receive's messages and a Lambda event's
records go through the same steps, driven by the sync door over a scripted client, no SQS.

Each case runs on both kinds of `Arrivals`: "receive" (`Answer`, both pollers) and "event"
(`EventRecords`, the Lambda adapter, `for_lambda=True`).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from sqsbatch._core.envelope import ATTRIBUTE, Envelope
from sqsbatch._core.intake import (
    Arrivals,
    ReceiveErrors,
    Screening,
    Taken,
    intake,
    receive_messages,
)
from sqsbatch._core.lambda_event import parse_event
from sqsbatch._core.lambda_records import Arrival, EventRecords
from sqsbatch._core.receiving import Answer
from sqsbatch._core.screening import BodyModel, Screen
from sqsbatch.errors import QueueNotFound, SqsError
from tests.core.test_flows import URL, WALL, ScriptedSqs, answer, client_error, context, drive
from tests.support.front_ends import record

ARN = "arn:aws:sqs:eu-west-1:1:orders"
FRONT_ENDS = ["receive", "event"]


class Order(BaseModel):
    id: int


def message(index: int, body: str = '{"id":1}', **envelope: Any) -> dict[str, Any]:
    """A message as `ReceiveMessage` returns it; `envelope`: sqsbatch's attribute (id `m<i>`)."""
    user = {}
    if envelope:
        attribute = Envelope(id=f"m{index}", content_type="json", **envelope).to_attribute()
        user = {ATTRIBUTE: dict(attribute)}
    sent = str(int(WALL * 1000) - 1000)
    return {
        "MessageId": f"m{index}",
        "ReceiptHandle": f"r{index}",
        "MD5OfBody": "",
        "Body": body,
        "Attributes": {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": sent,
            "ApproximateFirstReceiveTimestamp": sent,
        },
        "MessageAttributes": user,
    }


def arrivals(front_end: str, *messages: dict[str, Any]) -> Arrivals[Any]:
    """The messages as one kind of front end takes them in."""
    if front_end == "receive":
        return Answer(list(messages), queue_url=URL, received_at=100.0, visibility=35)
    parsed = parse_event({"Records": [record(m, ARN) for m in messages]})
    arrival = Arrival(parsed, now=100.0, wall_now=WALL, visibility_timeout=35)
    return EventRecords("orders", parsed, arrival)


def take(
    front_end: str, client: ScriptedSqs, taking: Arrivals[Any], screen: Screen | None = None
) -> Taken[Any]:
    screening = None if screen is None else Screening(context(), screen)
    flow = intake(taking, screening, wall_clock=lambda: WALL, for_lambda=front_end == "event")
    taken: Taken[Any] = drive(client, flow)[0]
    return taken


def ids(taken: Taken[Any]) -> list[str]:
    """The ids of what goes to the handler: a poller's deliveries, a Lambda batch's messages."""
    handed = taken.batch if isinstance(taken.batch, list) else taken.batch.messages
    return [item.id for item in handed]


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_every_front_end_postpones_screens_and_dead_letters_the_same(front_end: str) -> None:
    # Given m0 fine, m1 a hop due in 500 s, m2 past its producer's deadline, m3 an invalid body
    taking = arrivals(
        front_end,
        message(0),
        message(1, due_at=WALL + 500),
        message(2, expires_at=WALL - 1),
        message(3, '{"id":"x"}'),
    )
    client = ScriptedSqs()
    # When they are taken in, screened with `body_model`
    taken = take(front_end, client, taking, Screen(body_model=BodyModel(Order)))
    # Then only m0 goes to the handler, m1 is re-sent, m2 and m3 are dead-lettered
    assert ids(taken) == ["m0"]
    assert (taken.early, list(taken.unsent), list(taken.refused)) == (1, [], [])
    assert [(d.delivery.id, d.reason) for d in taken.doomed] == [
        ("m2", "expired"),
        ("m3", "invalid_body"),
    ]
    assert taken.counts == {
        "postponed": 1,
        "dead_lettered": 2,
        "dead_lettered:expired": 1,
        "dead_lettered:invalid_body": 1,
    }
    # (a poller deletes the originals; Lambda deletes what it is not told about)
    deleted = [
        ("delete_message_batch", "orders", ["m1"]),
        ("delete_message_batch", "orders", ["m2", "m3"]),
    ]
    assert client.asked() == [
        ("send_message_batch", "orders", ["m1"]),
        *(deleted[:1] if front_end == "receive" else []),
        ("send_message_batch", "orders-dlq", ["m2", "m3"]),
        *(deleted[1:] if front_end == "receive" else []),
    ]
    assert taken.line is not None and "expired" in taken.line[1]


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_an_early_hop_whose_re_send_sqs_refused_stays_and_is_never_deleted(front_end: str) -> None:
    # Given a hop due in 500 s, whose re-send SQS refuses
    taking = arrivals(front_end, message(0), message(1, due_at=WALL + 500))
    client = ScriptedSqs(send_message_batch=[answer({"m1": ("AccessDenied", True)})])
    # When taken in
    taken = take(front_end, client, taking)
    # Then it is not handed over and not deleted: it comes back (Lambda: reported)
    assert ids(taken) == ["m0"]
    assert [d.id for d in taken.unsent] == ["m1"] and taken.counts == {"postponed": 0}
    assert [op for op, _ in client.calls] == ["send_message_batch"]


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_a_dead_letter_copy_sqs_refused_is_never_deleted(front_end: str) -> None:
    # Given m1 past its deadline, whose copy to the DLQ SQS refuses
    taking = arrivals(front_end, message(0), message(1, expires_at=WALL - 1))
    client = ScriptedSqs(send_message_batch=[answer({"m1": ("AccessDenied", True)})])
    # When taken in
    taken = take(front_end, client, taking, Screen())
    # Then it is not deleted: a poller leaves it hidden, Lambda is told to keep it
    assert ids(taken) == ["m0"]
    assert [op for op, _ in client.calls] == ["send_message_batch"]
    assert [d.id for d in taken.refused] == (["m1"] if front_end == "event" else [])
    assert taken.line is not None and "AccessDenied" in taken.line[1]


def test_a_lambda_event_no_step_applies_to_costs_no_call_and_no_delivery() -> None:
    # Given a plain event (no sqsbatch attribute) and nothing to screen with
    taking = arrivals("event", message(0), message(1))
    client = ScriptedSqs()
    # When taken in
    taken = take("event", client, taking, Screen())
    # Then nothing is asked of SQS, and no message has made its delivery (read lazily)
    assert client.calls == [] and taken.counts == {}
    assert [m.body for m in taken.batch.messages] == ['{"id":1}'] * 2
    assert not any(hasattr(m, "_made") for m in taken.batch.messages)


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_without_screening_a_producers_deadline_is_not_read(front_end: str) -> None:
    # Given m1 past its producer's deadline, and a receive with no screening at all
    taking = arrivals(front_end, message(0), message(1, expires_at=WALL - 1))
    client = ScriptedSqs()
    # When taken in  Then both go to the handler
    assert ids(take(front_end, client, taking)) == ["m0", "m1"] and client.calls == []


# -- receiving, and the failures every loop decides the same way --------------------------------


def test_receive_messages_returns_them_as_sqs_did_and_raises_naming_the_queue() -> None:
    answered = ScriptedSqs(receive_message=[lambda params: {"Messages": [message(0)]}])
    flow = receive_messages(URL, asked=10, wait_seconds=2, visibility=30)
    got, _ = drive(answered, flow)
    assert [m["MessageId"] for m in got] == ["m0"]
    assert answered.calls[0][1]["VisibilityTimeout"] == 30
    assert json.dumps(answered.calls[0][1]["MessageAttributeNames"]) == '["All"]'
    missing = ScriptedSqs(receive_message=[client_error("AWS.SimpleQueueService.NonExistentQueue")])
    flow = receive_messages(URL, asked=10, wait_seconds=2, visibility=30, queue="orders-dlq")
    with pytest.raises(QueueNotFound, match=r"\(orders-dlq\)"):
        drive(missing, flow)


class Bound:
    def __init__(self, high: bool) -> None:
        self.high = high

    def uniform(self, a: float, b: float) -> float:
        return b if self.high else a


def test_the_redrive_daemons_pauses_start_at_its_own_base_and_grow() -> None:
    errors = ReceiveErrors(base_seconds=0.5)
    slow = SqsError("SQS error ThrottlingException (orders): slow", code="ThrottlingException")
    pauses = [errors.after(slow, Bound(high=True)) for _ in range(3)]
    assert pauses == pytest.approx([0.5, 1.0, 2.0]) and errors.failures == 3
    assert errors.after(slow, Bound(high=False)) == pytest.approx(2.0)  # half the 4th step
    gone = QueueNotFound("queue does not exist (orders)", code="NonExistentQueue")
    assert errors.after(gone, Bound(high=True)) is None and errors.failures == 4
