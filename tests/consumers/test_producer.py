"""Producer against moto's server: bodies, batches, delays and refusals (SPEC 3, 4)."""

from __future__ import annotations

from typing import Any

import pytest

from sqsbatch import (
    Consumer,
    ConsumerConfig,
    FifoError,
    MessageBatch,
    MessageError,
    MessageSendRequest,
    Producer,
    SendError,
    create_queue,
)
from sqsbatch.limits import SqsLimits
from tests.support.faults import Faulty
from tests.support.sqs_helpers import drain


def consume_all(sqs: Any, name: str) -> list[Any]:
    got: list[Any] = []

    def handler(batch: MessageBatch) -> None:
        got.extend(batch.messages)

    Consumer(
        name, handler, ConsumerConfig(max_batch_size=100, max_batch_timeout=0.3), client=sqs
    ).run_until_idle(1)
    return got


def test_bodies_come_back_as_the_type_they_were_sent(sqs: Any, name: str) -> None:
    create_queue(name, client=sqs)
    producer = Producer(name, client=sqs)
    sent = {
        producer.send({"a": 1}): {"a": 1},
        producer.send("text"): "text",
        producer.send(b"\x00\x01"): b"\x00\x01",
        producer.send("42", content_type="json"): "42",
        producer.send([1, "x"], attributes={"tenant": "t1", "n": 3}): [1, "x"],
    }
    got = {m.id: m for m in consume_all(sqs, name)}
    assert {i: m.body for i, m in got.items()} == sent
    assert all(type(got[i].body) is type(body) for i, body in sent.items())
    tagged = next(m for m in got.values() if m.attributes)
    assert tagged.attributes == {"tenant": "t1", "n": "3"}


def test_attributes_in_boto3s_own_shape_are_accepted_beside_plain_values(
    sqs: Any, name: str
) -> None:
    # Given attributes copied from boto3 code, mixed with plain values
    create_queue(name, client=sqs)
    attributes: dict[str, Any] = {
        "count": {"DataType": "Number", "StringValue": "1"},
        "kind": {"DataType": "String.order", "StringValue": "paid"},
        "blob": {"DataType": "Binary", "BinaryValue": b"\x00\xff"},
        "plain": "yes",
    }
    # When they are sent, one message and in a batch
    Producer(name, client=sqs).send("x", attributes=attributes)
    Producer(name, client=sqs).send_batch([{"body": "y", "attributes": attributes}])
    # Then SQS stores them with their own types, on both paths
    raw = drain(sqs, name)
    types = {"count": "Number", "kind": "String.order", "blob": "Binary", "plain": "String"}
    assert len(raw) == 2
    for message in raw:
        stored = message["MessageAttributes"]
        assert {key: stored[key]["DataType"] for key in types} == types
        assert stored["blob"]["BinaryValue"] == b"\x00\xff"


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ({"DataType": "Json", "StringValue": "1"}, "DataType='Json'"),
        ({"StringValue": "1"}, "DataType=None"),
        ({"DataType": "Number", "StringValue": "one"}, "is not a Number"),
        ({"DataType": "String", "BinaryValue": b"x"}, "needs StringValue"),
        ({"DataType": "Binary", "StringValue": "x"}, "needs BinaryValue"),
        ({"DataType": "String", "StringValue": "x", "BinaryValue": b"x"}, "and nothing else"),
        ({"DataType": "String", "StringValue": "x", "StringListValues": []}, "unknown key"),
    ],
)
def test_a_bad_boto3_shaped_attribute_is_one_clear_error(value: Any, error: str) -> None:
    with pytest.raises(MessageError, match=error) as raised:
        Producer("q", client=object()).send("x", attributes={"a": value})
    assert "\n" not in str(raised.value) and "'a'" in str(raised.value)


def test_boto3_shaped_attributes_come_back_as_values(sqs: Any, name: str) -> None:
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send(
        "x",
        attributes={
            "n": {"DataType": "Number", "StringValue": "2.5"},
            "b": {"DataType": "Binary", "BinaryValue": b"\x01"},
        },
    )
    (message,) = consume_all(sqs, name)
    assert message.attributes == {"n": "2.5", "b": b"\x01"}


def test_a_foreign_message_reads_as_text(sqs: Any, name: str) -> None:
    url = create_queue(name, client=sqs)
    sqs.send_message(QueueUrl=url, MessageBody='{"from": "elsewhere"}')
    (message,) = consume_all(sqs, name)
    assert message.body == '{"from": "elsewhere"}' and message.attempts == 1


def test_send_batch_chunks_to_ten_entries_and_returns_ids_in_order(sqs: Any, name: str) -> None:
    create_queue(name, client=sqs)
    client = Faulty(sqs)
    producer = Producer(f"{name}", client=client)
    items: list[Any] = [MessageSendRequest(i) for i in range(13)] + [
        {"body": i} for i in range(13, 25)
    ]
    ids = producer.send_batch(items)
    sends = [p for op, p in client.calls if op == "send_message_batch"]
    assert [len(p["Entries"]) for p in sends] == [10, 10, 5]
    got = {m.id: m.body for m in consume_all(sqs, name)}
    assert [got[i] for i in ids] == list(range(25))


def test_batches_are_cut_at_the_payload_limit(sqs: Any, name: str) -> None:
    create_queue(name, client=sqs)
    client = Faulty(sqs)
    producer = Producer(name, client=client, limits=SqsLimits(max_payload_bytes=2_000))
    producer.send_batch([{"body": "x" * 600} for _ in range(6)])
    sends = [p for op, p in client.calls if op == "send_message_batch"]
    assert [len(p["Entries"]) for p in sends] == [3, 3]
    with pytest.raises(MessageError, match="SQS accepts at most 2000"):
        producer.send("y" * 2_100)


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda p: p.send(None), "body is None"),
        (lambda p: p.send(object()), "not JSON-serialisable"),
        (lambda p: p.send("x" * (1024 * 1024 + 1)), "SQS accepts at most 1048576"),
        (lambda p: p.send_batch([]), "at least one message"),
        (lambda p: p.send_batch(["x"] * 101), "at most 100 messages, got 101"),
        (lambda p: p.send_batch([{"bdy": 1}]), "need a body"),
        (lambda p: p.send_batch(["raw"]), "need a body: got 'raw'"),
        (lambda p: p.send_batch([{"body": 1, "delay": 1}]), "unknown send field 'delay'"),
        (lambda p: p.send("x", delay_seconds=-1), "delay_seconds=-1"),
        (lambda p: p.send("x", delay_seconds=1.5), "delay_seconds=1.5"),
        (lambda p: p.send("x", delay_seconds=86_401), "0..86400"),
        (lambda p: p.send("x", deduplication_id="d"), "deduplication_id is for FIFO queues"),
        (lambda p: p.send("x", group_id=""), r"group_id is invalid \(0 characters\)"),
        (lambda p: p.send("x", group_id=7), r"group_id is invalid \(int\)"),
        (lambda p: p.send("x", group_id="g" * 129), "1..128 characters"),
        (lambda p: p.send("x", group_id="tenant 7"), "group_id holds ' '"),
        (lambda p: p.send("x", group_id="t\u00e9"), "group_id holds"),
    ],
)
def test_bad_requests_are_refused_before_any_call(sqs: Any, call: Any, error: str) -> None:
    client = Faulty(sqs)
    producer = Producer("http://127.0.0.1:1/123/never-called", client=client)
    with pytest.raises(MessageError, match=error):
        call(producer)
    assert client.calls == []


def test_delay_precedence_and_explicit_zero(sqs: Any, name: str) -> None:
    create_queue(name, delivery_delay=30, client=sqs)
    client = Faulty(sqs)
    producer = Producer(name, delivery_delay=20, client=client)
    producer.send_batch(
        [
            MessageSendRequest("own", delay_seconds=5),
            {"body": "zero", "delay_seconds": 0},
            {"body": "batch"},
        ],
        delay_seconds=10,
    )
    producer.send("producer")
    Producer(name, delivery_delay=0, client=client).send("explicit zero default")
    Producer(name, client=client).send("queue")  # no delay given anywhere: the queue's
    delays = [
        entry.get("DelaySeconds")
        for op, params in client.calls
        if op == "send_message_batch"
        for entry in params["Entries"]
    ]
    assert delays == [5, 0, 10, 20, 0, None]


def test_entries_that_keep_failing_are_named_in_the_error(sqs: Any, name: str) -> None:
    url = create_queue(name, client=sqs)

    class RefusesB(Faulty):
        """Really sends every entry except body "b", which SQS keeps failing (its fault)."""

        def send_message_batch(self, **params: Any) -> Any:
            keep = [e for e in params["Entries"] if e["MessageBody"] != "b"]
            refused = [e for e in params["Entries"] if e["MessageBody"] == "b"]
            answer = (
                sqs.send_message_batch(QueueUrl=params["QueueUrl"], Entries=keep) if keep else {}
            )
            failed = [
                {"Id": e["Id"], "Code": "InternalError", "SenderFault": False, "Message": "later"}
                for e in refused
            ]
            self.calls.append(("send_message_batch", params))
            return {"Successful": answer.get("Successful", []), "Failed": failed}

    client = RefusesB(sqs)
    with pytest.raises(SendError) as caught:
        Producer(url, client=client).send_batch([{"body": b} for b in "abc"])
    error = caught.value
    assert len(error.sent_ids) == 2 and list(error.failed) == ["message #1"]
    assert "InternalError" in str(error) and "1 of 3 messages were not sent" in str(error)
    assert len(client.calls) == 3  # the failed entry was retried before giving up
    assert sorted(m["Body"] for m in drain(sqs, name)) == ["a", "c"]


def test_fifo_sends_need_a_group_and_refuse_delays(sqs: Any, name: str) -> None:
    queue = f"{name}.fifo"
    create_queue(queue, client=sqs)
    producer = Producer(queue, client=sqs)
    with pytest.raises(FifoError, match="needs group_id"):
        producer.send("x")
    with pytest.raises(FifoError, match="forbids per-message delays"):
        producer.send("x", group_id="g", delay_seconds=5)
    with pytest.raises(FifoError, match="forbids per-message delays"):
        Producer(queue, delivery_delay=5, client=sqs)
    first = producer.send("one", group_id="g")
    assert first and producer.send("two", group_id="g", deduplication_id="d-2")
