"""Intake's fetch step (`sqsbatch._core.fetching`): large payloads read from S3 before the
handler, on both kinds of arrivals, with a store in memory (the S3 calls are `Outside` calls:
the real store runs on moto in tests/front_ends/test_payloads_consumers.py)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from sqsbatch._core.closing import close_batch
from sqsbatch._core.entries import copy_of
from sqsbatch._core.envelope import ATTRIBUTE, Death, Envelope, carry
from sqsbatch._core.fetching import FetchedDelivery, acked_pointers, delete_acked
from sqsbatch._core.flows import Settled
from sqsbatch._core.intake import Screening, Taken, intake
from sqsbatch._core.ledger import ActionKind, Outcome
from sqsbatch._core.message import MessageBatch, deliveries_of
from sqsbatch._core.payloads import pointer_body, size_attribute
from sqsbatch._core.screening import BodyModel, Screen
from sqsbatch._core.unwrap import wrap
from sqsbatch.errors import PayloadError, PayloadMissing
from tests.core.test_flows import WALL, ScriptedSqs, context, drive
from tests.core.test_intake import FRONT_ENDS, arrivals, ids, message

BUCKET = "payloads"


class Store:
    """S3 in memory: `objects` by key; `failing`: keys S3 will not give now."""

    def __init__(self, *, keep: bool = False, **objects: str) -> None:
        self.objects = {key: text.encode() for key, text in objects.items()}
        self.failing: set[str] = set()
        self.gets: list[str] = []
        self.deleted: list[list[tuple[str, str]]] = []
        self._keep = keep

    @property
    def keep(self) -> bool:
        return self._keep

    def get(self, bucket: str, key: str) -> bytes:
        self.gets.append(key)
        if key in self.failing:
            raise PayloadError(f"GetObject s3://{bucket}/{key} failed: SlowDown")
        if key not in self.objects:
            raise PayloadMissing(bucket, key)
        return self.objects[key]

    def delete(self, objects: Sequence[tuple[str, str]]) -> list[str]:
        self.deleted.append(list(objects))
        return []


def pointer(index: int, key: str, *, group: str | None = None, **envelope: Any) -> dict[str, Any]:
    """A message as AWS's extended client sends it (`envelope`: sqsbatch's attribute too)."""
    raw = message(index, pointer_body(BUCKET, key), **envelope)
    raw["MessageAttributes"]["ExtendedPayloadSize"] = dict(size_attribute(9))
    raw["MessageAttributes"]["Region"] = {"DataType": "String", "StringValue": "eu"}
    if group is not None:
        raw["Attributes"]["MessageGroupId"] = group
    return raw


def take(
    front_end: str,
    store: Store,
    *messages: dict[str, Any],
    screen: Screen | None = None,
    fifo: bool = False,
    client: ScriptedSqs | None = None,
) -> Taken[Any]:
    screening = Screening(context(fifo=fifo), screen or Screen(), payloads=store)
    flow = intake(
        arrivals(front_end, *messages),
        screening,
        wall_clock=lambda: WALL,
        for_lambda=front_end == "event",
    )
    taken: Taken[Any] = drive(client or ScriptedSqs(), flow)[0]
    return taken


def handed(taken: Taken[Any]) -> list[Any]:
    return taken.batch if isinstance(taken.batch, list) else list(deliveries_of(taken.batch))


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_a_pointer_reaches_the_handler_with_its_payload(front_end: str) -> None:
    # Given a pointer to a JSON text in S3 beside a plain message
    store = Store(k1='{"id": 7}')
    client = ScriptedSqs()
    taken = take(front_end, store, message(0), pointer(1, "k1"), client=client)
    # Then both reach the handler, the pointer's body being its payload (one GetObject)
    assert ids(taken) == ["m0", "m1"]
    fetched = handed(taken)[1]
    assert fetched.body == '{"id": 7}'  # a foreign message's body is text, as it came
    assert set(fetched.attributes) == {"Region"}  # the size attribute is not the handler's
    assert store.gets == ["k1"]
    assert taken.counts == {"payloads_fetched": 1}
    assert client.calls == []  # no SQS call
    # And a copy of it (a retry past the ceiling, the DLQ, a hop) carries the pointer
    decoded = fetched.decoded
    copy = copy_of(decoded, carry(decoded))
    assert copy.body == pointer_body(BUCKET, "k1")
    assert copy.attributes["ExtendedPayloadSize"] == size_attribute(9)


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_no_pointer_costs_no_s3_call(front_end: str) -> None:
    store = Store()
    taken = take(front_end, store, message(0), message(1, '{"id":2}', due_at=WALL - 5))
    assert ids(taken) == ["m0", "m1"] and store.gets == []
    assert not any(isinstance(d, FetchedDelivery) for d in handed(taken))


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_sqsbatch_s_own_json_payload_is_decoded_and_validated(front_end: str) -> None:
    class Order(BaseModel):
        id: int

    # Given sqsbatch's producer's pointer (its envelope says JSON) and AWS's (text)
    store = Store(k1='{"id": 1}', k2='{"id": 2}', k3='{"id": "x"}')
    taken = take(
        front_end,
        store,
        pointer(1, "k1", base_attempts=0),
        pointer(2, "k2"),
        pointer(3, "k3"),
        screen=Screen(body_model=BodyModel(Order)),
    )
    # Then body_model validates the payloads, not the pointers
    assert [d.body for d in handed(taken)] == [Order(id=1), Order(id=2)]
    assert [(d.delivery.id, d.reason) for d in taken.doomed] == [("m3", "invalid_body")]


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_a_missing_object_is_dead_lettered_with_its_pointer(front_end: str) -> None:
    client = ScriptedSqs()
    taken = take(front_end, Store(), pointer(1, "gone"), message(2), client=client)
    assert ids(taken) == ["m2"]
    assert [(d.delivery.id, d.reason) for d in taken.doomed] == [("m1", "payload_missing")]
    assert taken.counts["dead_lettered:payload_missing"] == 1
    op, params = client.calls[0]
    assert op == "send_message_batch" and params["QueueUrl"].endswith("orders-dlq")
    entry = params["Entries"][0]
    assert entry["MessageBody"] == pointer_body(BUCKET, "gone")
    assert entry["MessageAttributes"]["ExtendedPayloadSize"] == size_attribute(9)
    died = Envelope.from_attribute(entry["MessageAttributes"][ATTRIBUTE]["StringValue"])
    assert died is not None and died.deaths[-1].reason == "payload_missing"


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_a_message_that_died_of_its_missing_payload_reaches_its_dlq_s_handler(
    front_end: str,
) -> None:
    # Given the message resting in the DLQ (not "orders") it was dead-lettered to
    death = Death("payload_missing", "orders-source", 1, WALL - 10)
    resting = pointer(1, "gone", deaths=(death,), dead_count=1)
    taken = take(front_end, Store(), resting)
    # Then it is not dead-lettered again: its handler gets it as it came
    assert ids(taken) == ["m1"] and list(taken.doomed) == []
    assert handed(taken)[0].decoded.raw_body == pointer_body(BUCKET, "gone")


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_s3_unreachable_leaves_the_message_for_sqs(front_end: str) -> None:
    store = Store(k1="a", k2="b")
    store.failing.add("k1")
    client = ScriptedSqs()
    taken = take(front_end, store, pointer(1, "k1"), pointer(2, "k2"), client=client)
    # Then the unread one is neither handed over nor settled (Lambda reports it)
    assert ids(taken) == ["m2"]
    assert [d.id for d in taken.unread] == ["m1"]
    assert list(taken.doomed) == [] and client.calls == []
    assert taken.counts == {"payloads_fetched": 1, "payloads_unread": 1}
    assert taken.line is not None and taken.line[0] == logging.WARNING
    assert "m1 left for SQS" in taken.line[1] and "SlowDown" in taken.line[1]


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_fifo_a_group_s_later_message_waits_for_its_unread_one(front_end: str) -> None:
    store = Store(k2="b", k3="c")
    store.failing.add("k1")
    later = message(2)
    later["Attributes"]["MessageGroupId"] = "g"
    taken = take(
        front_end, store, pointer(1, "k1", group="g"), later, pointer(3, "k3", group="h"), fifo=True
    )
    assert ids(taken) == ["m3"]
    assert [d.id for d in taken.unread] == ["m1", "m2"]


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_a_marked_message_that_is_no_pointer_is_an_invalid_body(front_end: str) -> None:
    bad = message(1, "not a pointer")
    bad["MessageAttributes"]["SQSLargePayloadSize"] = dict(size_attribute(3))
    taken = take(front_end, Store(), bad)
    assert [(d.delivery.id, d.reason) for d in taken.doomed] == [("m1", "invalid_body")]
    error = taken.doomed[0].error
    assert error is not None and "SQSLargePayloadSize is set but the body is not JSON" in str(
        error.message
    )


# -- after the settle ------------------------------------------------------------------------------


def fetched_batch(store: Store, count: int) -> MessageBatch:
    taken = take("receive", store, *(pointer(i, f"k{i}") for i in range(count)))
    return MessageBatch("orders", taken.batch)


def test_only_acked_messages_whose_delete_sqs_accepted_lose_their_payload() -> None:
    store = Store(k0="x", k1="x", k2="x", k3="x", k4="x")
    batch = fetched_batch(store, 5)
    batch.messages[0].ack()
    batch.messages[1].ack()
    batch.messages[2].retry()
    batch.messages[3].dead_letter("bad")
    batch.messages[4].ack()
    closing = close_batch(batch, Outcome.RETURNED, None, context(), now=0.0, wall_now=WALL)
    kinds = closing.kinds
    assert kinds[:4] == [
        ActionKind.DELETE,
        ActionKind.DELETE,
        ActionKind.HIDE,
        ActionKind.DEAD_LETTER,
    ]
    settled = Settled({}, [], undeleted={4})  # SQS refused m4's delete: it may come back
    assert [p.key for p in acked_pointers(batch, kinds, settled)] == ["k0", "k1"]
    done = drive(ScriptedSqs(), delete_acked(settled, batch, kinds, store))[0]
    assert store.deleted == [[(BUCKET, "k0"), (BUCKET, "k1")]]  # one call for the batch
    assert done.counts["payloads_deleted"] == 2
    # Lambda: what it will retry (listed) keeps its payload too
    assert [p.key for p in acked_pointers(batch, kinds, Settled({}, [], [1]))] == ["k0", "k4"]


def test_keep_payloads_deletes_nothing() -> None:
    store = Store(keep=True, k0="x")
    batch = fetched_batch(store, 1)
    batch.ack_all()
    closing = close_batch(batch, Outcome.RETURNED, None, context(), now=0.0, wall_now=WALL)
    drive(ScriptedSqs(), delete_acked(Settled({}, []), batch, closing.kinds, store))
    assert store.deleted == []


def test_a_failed_delete_of_objects_is_a_line_not_an_error() -> None:
    class Refusing(Store):
        def delete(self, objects: Sequence[tuple[str, str]]) -> list[str]:
            raise PayloadError("DeleteObjects s3://payloads failed: AccessDenied")

    store = Refusing(k0="x")
    batch = fetched_batch(store, 1)
    batch.ack_all()
    closing = close_batch(batch, Outcome.RETURNED, None, context(), now=0.0, wall_now=WALL)
    done = drive(ScriptedSqs(), delete_acked(Settled({}, []), batch, closing.kinds, store))[0]
    assert done.counts["payloads_deleted"] == 0
    assert done.lines[0][0] == logging.WARNING and "AccessDenied" in done.lines[0][1]


def test_the_payload_is_json_text_when_sqsbatch_sent_json() -> None:
    store = Store(k1=json.dumps({"rows": [1, 2]}))
    taken = take("receive", store, pointer(1, "k1", base_attempts=0))
    assert handed(taken)[0].body == {"rows": [1, 2]}


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_an_envelope_is_unwrapped_from_the_payload_not_from_its_pointer(front_end: str) -> None:
    # Given an SNS notification offloaded to S3, on a queue whose consumer unwraps SNS
    notification = wrap("sns", {"order": 7}, message_id="sns-1", sent_at=WALL)
    store = Store(k1=notification)
    taken = take(front_end, store, pointer(1, "k1"), screen=Screen(envelope="sns"))
    # Then the handler gets the notification's message; a re-send would still copy the pointer
    [fetched] = handed(taken)
    assert fetched.body == {"order": 7} and fetched.outer["Type"] == "Notification"
    assert json.loads(fetched.raw_body)[0].endswith("PayloadS3Pointer")
