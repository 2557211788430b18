"""Lambda's events and partial batch responses: the pure decisions, without SQS."""

from __future__ import annotations

import base64
import random
from dataclasses import replace
from typing import Any

import pytest

from sqsbatch import ConsumerConfig, EventError, Message, MessageBatch
from sqsbatch._core.closing import close_batch
from sqsbatch._core.context import QueueContext
from sqsbatch._core.envelope import ATTRIBUTE, Envelope, decode
from sqsbatch._core.lambda_event import (
    _checked_in_bulk,
    _checked_one_by_one,
    _receive_evidence,
    handler_budget,
    parse_event,
    queue_url_from_arn,
    report,
)
from sqsbatch._core.lambda_records import Arrival, deliveries, record_batch
from sqsbatch._core.ledger import ActionKind, LastFailure, Outcome

ARN = "arn:aws:sqs:eu-west-1:123456789012:orders"
H, D, R, L, X = (
    ActionKind.HIDE,
    ActionKind.DELETE,
    ActionKind.DEAD_LETTER,
    ActionKind.DROP,
    ActionKind.RESEND,
)


def record(index: int = 0, **changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "messageId": f"m{index}",
        "receiptHandle": f"r{index}",
        "body": "hello",
        "attributes": {
            "ApproximateReceiveCount": "2",
            "SentTimestamp": "1700000000000",
            "ApproximateFirstReceiveTimestamp": "1700000001000",
        },
        "messageAttributes": {
            "kind": {"stringValue": "a", "dataType": "String", "stringListValues": []},
            "raw": {"binaryValue": base64.b64encode(b"\x00\x01").decode(), "dataType": "Binary"},
        },
        "eventSource": "aws:sqs",
        "eventSourceARN": ARN,
        "awsRegion": "eu-west-1",
    }
    return base | changes


def test_records_become_received_messages_that_decode_like_a_receive() -> None:
    # Given an event of two records  When it is parsed
    parsed = parse_event({"Records": [record(0), record(1)]})
    # Then the queue URL comes from the ARN and the messages read as a ReceiveMessage answer
    assert parsed.queue_url == "https://sqs.eu-west-1.amazonaws.com/123456789012/orders"
    message = decode(parsed.messages[0])
    assert (message.id, message.body, message.attempts) == ("m0", "hello", 2)
    assert message.attributes == {"kind": "a", "raw": b"\x00\x01"}
    assert parsed.first_receive == 1_700_000_001.0
    assert parsed.message_ids == {"r0": "m0", "r1": "m1"}


@pytest.mark.parametrize(
    ("event", "says"),
    [
        ([], "not a mapping"),
        ({"Records": []}, "no Records"),
        ({"detail": {}}, "no Records"),
        ({"Records": ["x"]}, "record 0 is a str"),
        ({"Records": [record(eventSource="aws:kinesis")]}, "'aws:kinesis', not 'aws:sqs'"),
        ({"Records": [record(messageId="")]}, "record 0 has no messageId"),
        ({"Records": [record(0), record(1, messageId=None)]}, "record 1 has no messageId"),
        ({"Records": [record(eventSourceARN="arn:aws:sns:x:1:t")]}, "not an SQS queue ARN"),
        ({"Records": [record(eventSourceARN=None)]}, "no record has an eventSourceARN"),
    ],
)
def test_a_malformed_event_is_refused_naming_what_is_wrong(event: Any, says: str) -> None:
    with pytest.raises(EventError, match=says):
        parse_event(event)


@pytest.mark.parametrize(
    ("fault", "says"),
    [
        ({"receiptHandle": None}, "record 1 has no receiptHandle"),
        ({"body": None}, "record 1 has no body"),
        ({"eventSourceARN": None}, "record 1 has no eventSourceARN"),
        ({"attributes": {}}, "ApproximateReceiveCount"),
        ({"attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "9" * 20}}, "Sent"),
        ({"attributes": {"ApproximateReceiveCount": 2, "SentTimestamp": "1"}}, "Sent"),
        ({"attributes": {"ApproximateReceiveCount": "1.5", "SentTimestamp": "1"}}, "Sent"),
        ({"attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": ""}}, "Sent"),
        ({"receiptHandle": ""}, "record 1 has no receiptHandle"),
        ({"body": b"bytes"}, "record 1 has no body"),
        ({"messageAttributes": {"a": {"stringValue": "x"}}}, "no dataType"),
        ({"messageAttributes": {"a": {"binaryValue": "@@", "dataType": "B"}}}, "not base64"),
        ({"messageAttributes": ["x"]}, "messageAttributes is not a mapping"),
    ],
)
def test_a_record_malformed_in_itself_is_set_aside_naming_what_is_wrong(
    fault: dict[str, Any], says: str
) -> None:
    # Given an event whose second record is malformed
    records = [record(0), record(1, **fault), record(2)]
    # When parsed
    parsed = parse_event({"Records": records})
    # Then that record alone is set aside, with its reason; the others are kept
    assert [r["messageId"] for r in parsed.records] == ["m0", "m2"]
    [aside] = parsed.set_aside
    assert (aside.index, aside.message_id) == (1, "m1")
    assert says in aside.reason and "\n" not in aside.reason


def test_on_a_fifo_queue_a_record_behind_one_set_aside_of_its_group_is_held_back() -> None:
    fifo = ARN + ".fifo"

    def grouped(i: int, group: str, **fields: Any) -> dict[str, Any]:
        one = record(i, eventSourceARN=fifo, **fields)
        one["attributes"] = {**one["attributes"], "MessageGroupId": group}
        return one

    # Given a FIFO event where record 1 of group a is malformed
    records = [grouped(0, "a"), grouped(1, "a", body=None), grouped(2, "b"), grouped(3, "a")]
    # When parsed
    parsed = parse_event({"Records": records})
    # Then the later record of group a is held back too, group b goes on
    assert [r["messageId"] for r in parsed.records] == ["m0", "m2"]
    assert [(a.message_id, "behind" in a.reason) for a in parsed.set_aside] == [
        ("m1", False),
        ("m3", True),
    ]


def test_records_from_several_queues_are_refused() -> None:
    other = record(1, eventSourceARN=ARN.replace("orders", "invoices"))
    with pytest.raises(EventError, match="2 queues in one event"):
        parse_event({"Records": [record(0), other]})


@pytest.mark.parametrize(
    ("arn", "endpoint", "url"),
    [
        (ARN, None, "https://sqs.eu-west-1.amazonaws.com/123456789012/orders"),
        (ARN, "http://127.0.0.1:5000/", "http://127.0.0.1:5000/123456789012/orders"),
        (
            "arn:aws-cn:sqs:cn-north-1:1:q.fifo",
            None,
            "https://sqs.cn-north-1.amazonaws.com.cn/1/q.fifo",
        ),
    ],
)
def test_queue_url_from_arn(arn: str, endpoint: str | None, url: str) -> None:
    assert queue_url_from_arn(arn, endpoint) == url


@pytest.mark.parametrize(
    ("handler_timeout", "remaining", "budget"),
    [
        (900.0, None, 900.0),  # no context: the setting
        (900.0, 60.0, 55.0),  # 5 s kept back to settle
        (900.0, 3.0, 2.4),  # a short function keeps a fifth back
        (10.0, 60.0, 10.0),  # a shorter handler_timeout holds
        (900.0, 0.0, 0.0),
    ],
)
def test_the_handler_budget_leaves_time_to_settle(
    handler_timeout: float, remaining: float | None, budget: float
) -> None:
    assert handler_budget(handler_timeout, remaining) == pytest.approx(budget)


def test_report_lists_retries_and_unsent_copies_only() -> None:
    # Given: hidden, acked, dead-lettered (sent), dead-lettered (not sent), dropped, re-sent
    kinds = [H, D, R, R, L, X]
    # When the copies of 2 and 5 were accepted
    decided = report(kinds, {2, 5}, [None] * 6, fifo=False)
    # Then only the hidden retry and the unsent copy are reported; Lambda deletes the rest
    assert decided.listed == [0, 3]
    assert decided.delete == []


def test_fifo_never_reports_a_later_message_of_a_failed_group_as_done() -> None:
    # Given a FIFO batch: group a retried first, then acked and dead-lettered; group b all acked
    kinds = [D, H, D, R, D]
    groups = ["a", "a", "a", "a", "b"]
    # When the dead-letter copy was accepted
    decided = report(kinds, {3}, groups, fifo=True)
    # Then everything after the failure in group a is reported, and deleted here when settled
    assert decided.listed == [1, 2, 3]
    assert decided.delete == [2, 3]


# -- reading records lazily, and deciding in bulk: the same answers as one by one -------------


def random_record(rng: random.Random, index: int, *, fifo: bool = False) -> dict[str, Any]:
    """A record of any shape sqsbatch meets: foreign or with sqsbatch's envelope (carried id,
    timestamp, attempts, a due time), user attributes (binary too), a FIFO group."""
    user: dict[str, Any] = {}
    if rng.random() < 0.5:
        envelope = Envelope(
            id=rng.choice([None, f"carried-{index}"]),
            timestamp=rng.choice([None, 1_600_000_000.5]),
            content_type=rng.choice(["json", "text", "bytes"]),
            base_attempts=rng.randrange(3),
            due_at=rng.choice([None, 1_500_000_000.0]),
        )
        user[ATTRIBUTE] = {
            "stringValue": envelope.to_attribute()["StringValue"],
            "dataType": "String",
        }
    elif rng.random() < 0.2:  # someone else's attribute of the same name: theirs
        user[ATTRIBUTE] = {"stringValue": "not ours", "dataType": "String"}
    if rng.random() < 0.5:
        user["kind"] = {"stringValue": "a", "dataType": "String", "stringListValues": []}
    if rng.random() < 0.3:
        user["raw"] = {"binaryValue": base64.b64encode(b"\x00\x01").decode(), "dataType": "Binary"}
    body = rng.choice(['{"n": 1}', "plain text", base64.b64encode(b"\x02").decode(), "[1, 2"])
    attributes = {
        "ApproximateReceiveCount": str(rng.randrange(1, 6)),
        "SentTimestamp": str(1_700_000_000_000 + rng.randrange(10_000)),
    }
    if rng.random() < 0.8:
        attributes["ApproximateFirstReceiveTimestamp"] = str(1_700_000_010_000 + index)
    if fifo:
        attributes["MessageGroupId"] = rng.choice("ab")
    return record(index, body=body, attributes=attributes, messageAttributes=user)


@pytest.mark.parametrize("seed", range(20))
def test_a_record_reads_lazily_as_its_decoding_reads(seed: int) -> None:
    # Given records of every shape
    rng = random.Random(seed)
    records = [random_record(rng, i, fifo=seed % 2 == 0) for i in range(20)]
    # When they are parsed and read as deliveries
    parsed = parse_event({"Records": records})
    lazy = deliveries(parsed, received_at=5.0, hidden_until=35.0)
    # Then every field reads as `decode` of the record in boto3's shape
    for delivery, raw in zip(lazy, parsed.messages, strict=True):
        decoded = decode(raw)
        fields = ("id", "body", "timestamp", "attempts", "attributes", "group_id")
        assert [getattr(delivery, f) for f in fields] == [getattr(decoded, f) for f in fields]
        assert delivery.due_at == decoded.envelope.due_at
        assert delivery.decoded == decoded
        assert (delivery.receipt_handle, delivery.received_at) == (raw["ReceiptHandle"], 5.0)
        assert delivery.item_identifier == raw["MessageId"]
    first = min(_receive_evidence(one["attributes"]) for one in records)
    assert parsed.first_receive == first


@pytest.mark.parametrize(("plain", "held"), [(False, True), (True, True), (True, False)])
@pytest.mark.parametrize("seed", range(20))
def test_a_record_reads_as_a_message_as_its_decoding_reads(
    seed: int, plain: bool, held: bool
) -> None:
    # Given records of every shape (or none with message attributes), parsed (with the bodies
    # the bulk check read, or, as a hand-made event would be, without them)
    rng = random.Random(seed)
    records = [random_record(rng, i, fifo=seed % 2 == 0) for i in range(20)]
    if plain:
        records = [record | {"messageAttributes": {}} for record in records]
    parsed = parse_event({"Records": records})
    assert parsed.plain == plain
    if plain:  # only the bulk check finds an event plain, and it keeps the bodies it read
        assert parsed.bodies == [one["body"] for one in records]
    if not held:
        parsed = replace(parsed, bodies=None)
    # When they become a batch, one message per record
    arrival = Arrival(parsed, now=100.0, wall_now=parsed.first_receive + 30, visibility_timeout=60)
    batch = record_batch("orders", parsed, arrival)
    # Then each is a Message that reads as `decode` of the record in boto3's shape
    for index, (message, raw) in enumerate(zip(batch.messages, parsed.messages, strict=True)):
        decoded = decode(raw)
        assert isinstance(message, Message)
        fields = ("id", "body", "timestamp", "attempts", "attributes")
        assert [getattr(message, f) for f in fields] == [getattr(decoded, f) for f in fields]
        # And the delivery the core reads is made when asked, received when the batch was
        delivery = batch._deliveries[index]
        assert delivery.decoded == decoded
        assert (delivery.receipt_handle, delivery.group_id) == (
            raw["ReceiptHandle"],
            decoded.group_id,
        )
        assert (delivery.received_at, delivery.hidden_until) == (70.0, 130.0)


@pytest.mark.parametrize("seed", range(10))
def test_the_bulk_check_finds_what_the_record_by_record_check_finds(seed: int) -> None:
    # Given well-formed events without message attributes (the bulk check's case)
    rng = random.Random(seed)
    records = [random_record(rng, i) | {"messageAttributes": {}} for i in range(30)]
    for i, one in enumerate(records):  # Lambda's records always tell their first receive
        one["attributes"]["ApproximateFirstReceiveTimestamp"] = str(1_700_000_010_000 - i)
    # When checked in bulk and one by one
    bulk = _checked_in_bulk(records)
    # Then both find the same queue and first receive
    assert bulk is not None
    queue, good, set_aside = _checked_one_by_one(records)
    assert (good, set_aside) == (list(range(30)), [])
    assert bulk == (queue, True, [one["body"] for one in records])
    first = min(_receive_evidence(one["attributes"]) for one in records)
    assert parse_event({"Records": records}).first_receive == first
    # And a record the bulk check cannot vouch for gets a closer look, and its one-line error
    broken = rng.randrange(30)
    records[broken] = record(broken, body=None)
    assert _checked_in_bulk(records) is None
    [aside] = parse_event({"Records": records}).set_aside
    assert aside.reason == f"record {broken} has no body (a string)"


def random_calls(rng: random.Random, batch: MessageBatch) -> None:
    """What a handler may do: per-message and batch calls, in any order, or nothing."""
    for _ in range(rng.choice([0, 0, 1, 3, 10])):
        if rng.random() < 0.15:
            if rng.random() < 0.5:
                batch.ack_all()
            else:
                batch.retry_all(rng.choice([None, 0, 60, 50_000]))
        else:
            message = rng.choice(batch.messages)
            if rng.random() < 0.5:
                message.ack()
            else:
                message.retry(rng.choice([None, 0, 60, 50_000]))


@pytest.mark.parametrize("seed", range(60))
def test_lambda_plans_the_same_actions_as_the_pollers_without_the_acks(seed: int) -> None:
    # Given random batches (FIFO or not), random handler calls and outcomes, last attempts too
    rng = random.Random(seed)
    fifo = rng.random() < 0.4
    records = [random_record(rng, i, fifo=fifo) for i in range(rng.randrange(1, 25))]
    config = ConsumerConfig(max_retries=rng.choice([0, 1, 3]), retry_delay=rng.choice([0, 30]))
    outcome = rng.choice(list(Outcome))
    last_failure = rng.choice(list(LastFailure))
    plans = []
    for acks_free in (False, True):
        parsed = parse_event({"Records": records})
        batch = MessageBatch("orders", deliveries(parsed, received_at=0.0, hidden_until=30.0))
        random_calls(random.Random(seed), batch)
        # When each plans the settlement: the pollers with acks, Lambda without
        plans.append(
            close_batch(
                batch,
                outcome,
                RuntimeError("boom"),
                QueueContext(
                    "orders",
                    "https://sqs/1/orders",
                    "https://sqs/1/dlq" if last_failure is LastFailure.DEAD_LETTER else None,
                    config,
                    last_failure,
                    fifo,
                ),
                now=10.0,
                wall_now=1_700_000_100.0,
                acks_free=acks_free,
            )
        )
    full, lean = plans
    # Then every message ends the same way, and only the acks' deletes are left out
    assert lean.kinds == full.kinds
    assert lean.entries.first == full.entries.first
    assert lean.entries.delete_after_send == full.entries.delete_after_send
    assert lean.entries.refused == full.entries.refused
    acked = {f"d{i}" for i, kind in enumerate(full.kinds) if kind is ActionKind.DELETE}
    kept = [e for e in full.entries.always_delete if e.key not in acked]
    if fifo:  # an ack behind a failure of its group is deleted here: acks keep their entries
        kept = full.entries.always_delete
        if len(acked) == len(full.kinds):  # unless all are acked (then no failure to be behind)
            assert lean.entries.always_delete in (kept, [])
            kept = lean.entries.always_delete
    assert lean.entries.always_delete == kept
    # And Lambda's report is the same whichever plan it reads
    sent = {int(key[1:]) for key in full.entries.delete_after_send}
    groups = [d.group_id for d in batch._deliveries]
    assert report(lean.kinds, sent, groups, fifo=fifo) == report(
        full.kinds, sent, groups, fifo=fifo
    )
