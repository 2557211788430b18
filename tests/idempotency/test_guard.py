"""The idempotency guard on every front end (issue 29): the sync and async pollers and the
Lambda adapter (sync and async handler) against the local SQS, with a `DynamoDBStore` on moto's
DynamoDB and on dynalite. `sqsbatch.testing`'s guard is in test_guard_testing.py; the pure
steps in tests/core/test_guard.py."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter
from typing import Any

import pytest

from sqsbatch import ConsumerConfig, MessageBatch, Producer, create_queue
from sqsbatch.idempotency import DynamoDBStore, MemoryStore, Store
from sqsbatch.lambda_adapter import LambdaAdapter
from tests.idempotency.conftest import FakeClock, create_table, dynamodb_client
from tests.support.front_ends import (
    FRONT_ENDS,
    EventSourceMapping,
    FakeContext,
    FrontEnd,
    as_async,
)
from tests.support.pollers import POLLERS, Background
from tests.support.sqs_helpers import depth
from tests.support.waiting import wait_for

CONFIG = ConsumerConfig(max_batch_size=10, max_batch_timeout=0.3, max_retries=2)
STORES = ["moto", "dynalite"]


@pytest.fixture(params=STORES)
def table(request: pytest.FixtureRequest) -> tuple[str, str]:
    """(endpoint, name) of a fresh table on moto's DynamoDB or on dynalite."""
    if request.param == "moto":
        endpoint = request.getfixturevalue("local_sqs").endpoint_url
    else:
        endpoint = request.getfixturevalue("dynalite_endpoint")
    return endpoint, create_table(dynamodb_client(endpoint))


@pytest.fixture
def store(table: tuple[str, str]) -> Store:
    """A `DynamoDBStore` on that table (the real clock)."""
    endpoint, name = table
    return DynamoDBStore(name, client=dynamodb_client(endpoint))


class Calls:
    """The handler: counts each message's key, acks all, or dead-letters the `failing` bodies."""

    def __init__(self, failing: frozenset[str] = frozenset()) -> None:
        self.keys: Counter[str] = Counter()
        self.failing = failing
        self._lock = threading.Lock()

    def __call__(self, batch: MessageBatch) -> None:
        for message in batch.messages:
            with self._lock:
                self.keys[message.idempotency_key] += 1
            if str(message.body) in self.failing:
                message.dead_letter("failed")
            else:
                message.ack()


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_a_completed_messages_copy_is_acked_without_the_handler(
    front_end: FrontEnd, store: Store, sqs: Any, name: str
) -> None:
    # Given a message consumed once (its key completed)
    create_queue(name, client=sqs)
    producer = Producer(name, client=sqs)
    producer.send("first", idempotency_key="order-1")
    calls = Calls()
    front_end.consume(name, calls, CONFIG, sqs, idempotency=store)
    assert calls.keys == {"order-1": 1}
    # When a copy of it comes (a producer's second send) beside new work
    producer.send("again", idempotency_key="order-1")
    producer.send("new", idempotency_key="order-2")
    front_end.consume(name, calls, CONFIG, sqs, idempotency=store)
    # Then the copy is acked without the handler, and the new work runs
    assert calls.keys == {"order-1": 1, "order-2": 1}
    assert depth(sqs, name) == 0


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_a_redriven_completed_message_is_skipped_and_a_failed_one_runs(
    front_end: FrontEnd, store: Store, sqs: Any, name: str
) -> None:
    # Given two messages dead-lettered, redriven by a redrive killed between its sends and its
    # deletes (the DLQ keeps its copies), then one acked (completed) and one dead-lettered again
    dlq = f"{name}-dlq"
    create_queue(name, dead_letter_queue=dlq, max_retries=2, client=sqs)
    producer = Producer(name, client=sqs)
    producer.send("done", idempotency_key="k-done")
    producer.send("failed", idempotency_key="k-failed")
    front_end.consume(name, Calls(failing=frozenset({"done", "failed"})), CONFIG, sqs)
    copy_all(sqs, dlq, name)
    front_end.consume(name, Calls(failing=frozenset({"failed"})), CONFIG, sqs, idempotency=store)
    # When the DLQ's copies are redriven again
    copy_all(sqs, dlq, name)
    again = Calls()
    front_end.consume(name, again, CONFIG, sqs, idempotency=store)
    # Then the completed one is skipped, the failed one runs
    assert again.keys == {"k-failed": 1}
    assert depth(sqs, name) == 0


def copy_all(sqs: Any, source: str, target: str) -> None:
    """What a redrive sends: each message of `source` (one copy per body) as it is, body and
    attributes, into `target`; the originals stay (a redrive killed before its deletes)."""
    source_url = sqs.get_queue_url(QueueName=source)["QueueUrl"]
    target_url = sqs.get_queue_url(QueueName=target)["QueueUrl"]
    bodies: set[str] = set()
    receipts: list[str] = []
    while messages := sqs.receive_message(
        QueueUrl=source_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
    ).get("Messages", []):
        for message in messages:
            receipts.append(message["ReceiptHandle"])
            if message["Body"] not in bodies:
                bodies.add(message["Body"])
                sqs.send_message(
                    QueueUrl=target_url,
                    MessageBody=message["Body"],
                    MessageAttributes=message.get("MessageAttributes", {}),
                )
    for receipt in receipts:  # the originals stay, visible again
        sqs.change_message_visibility(
            QueueUrl=source_url, ReceiptHandle=receipt, VisibilityTimeout=0
        )


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_an_unreachable_store_retries_the_batch_and_skips_nothing(
    front_end: FrontEnd,
    sqs: Any,
    name: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a table nobody answers for (connection refused), with the store's own client
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:9")
    down = DynamoDBStore("orders-idem")
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send_batch([{"body": "a"}, {"body": "b"}])
    calls = Calls()
    # When a front end takes the messages in
    with caplog.at_level(logging.WARNING, logger="sqsbatch"):
        front_end.consume(name, calls, CONFIG, sqs, idempotency=down, idle_seconds=0.5)
    # Then no handler ran, nothing was acked or dead-lettered: both come back, and it is logged
    assert calls.keys == {}
    assert depth(sqs, name) == 2
    lines = [r.getMessage() for r in caplog.records if "idempotency store unreachable" in r.message]
    assert lines and name in lines[0] and "2 messages" in lines[0]


@pytest.mark.parametrize("async_handler", [False, True], ids=["lambda", "lambda-async"])
def test_a_short_lambda_remaining_time_bounds_the_claim(
    async_handler: bool, store: Store, sqs: Any, name: str
) -> None:
    # Given an invocation with 4 s left
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send("work", idempotency_key="order-9")
    seen: list[float] = []

    def handle(batch: MessageBatch) -> None:
        seen.append(store.read(["order-9"])["order-9"].expires - time.time())

    handler = as_async(handle) if async_handler else handle
    function = LambdaAdapter(handler, CONFIG, client=sqs, idempotency=store)
    mapping = EventSourceMapping(sqs, name)
    try:
        messages = mapping.receive(wait_seconds=1)
        response = function(mapping.event(messages), FakeContext(timeout_seconds=4.0))
    finally:
        function.close()
    # Then the claim the handler ran under ends with the invocation, not with the visibility
    assert response == {"batchItemFailures": []}
    assert len(seen) == 1 and 0 < seen[0] <= 4.0
    assert store.read(["order-9"])["order-9"].state == "completed"


@pytest.mark.parametrize("kind", POLLERS)
def test_a_claim_left_by_a_dead_consumer_is_taken_over_once_it_lapses(
    kind: str, table: tuple[str, str], sqs: Any, name: str
) -> None:
    # Given a key claimed for 2 more seconds (of a clock the test moves) by a consumer that died
    clock = FakeClock(time.time())
    store = DynamoDBStore(table[1], client=dynamodb_client(table[0]), clock=clock)
    store.claim(["order-5"], owner="dead-consumer", expires=clock() + 2)
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send("work", idempotency_key="order-5")
    calls = Calls()
    poller = Background(kind, name, calls, CONFIG, sqs, idempotency=store, wall_clock=clock)
    poller.start()
    try:
        # When the poller gets the message: held (re-sent, due in 2 s), not run
        wait_for(lambda: poller.poller.stats.retried == 1, "the message was held")
        assert calls.keys == {}
        clock.advance(3)  # the claim lapses
        # Then its copy runs once it is due
        wait_for(lambda: calls.keys["order-5"] == 1, "the handler ran once the claim lapsed")
        wait_for(lambda: depth(sqs, name) == 0, "the message was acked")
    finally:
        poller.stop()
    assert poller.error is None and poller.poller.stats.duplicates_skipped == 0
    assert store.read(["order-5"])["order-5"].state == "completed"


@pytest.mark.parametrize("kinds", [("sync", "sync"), ("sync", "async")], ids="+".join)
@pytest.mark.parametrize("where", ["moto", "dynalite", "memory"])
def test_one_key_sent_twice_to_two_pollers_at_once_runs_once(
    kinds: tuple[str, str], where: str, sqs: Any, name: str, request: pytest.FixtureRequest
) -> None:
    """On both DynamoDB implementations and the memory store (moto's server runs its DynamoDB
    requests one at a time: `sqsbatch.dev.moto_dynamodb`)."""
    if where != "memory":
        endpoint = (
            request.getfixturevalue("dynalite_endpoint")
            if where == "dynalite"
            else request.getfixturevalue("local_sqs").endpoint_url
        )
        shared: Store = DynamoDBStore(
            create_table(dynamodb_client(endpoint)), client=dynamodb_client(endpoint)
        )
    else:
        shared = MemoryStore()
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send_batch(
        [{"body": n, "idempotency_key": "order-7"} for n in ("one", "two")]
    )
    calls = Calls()
    config = ConsumerConfig(max_batch_size=1, max_batch_timeout=0.1, visibility_timeout=3)
    pollers = [Background(k, name, calls, config, sqs, idempotency=shared).start() for k in kinds]
    try:
        wait_for(lambda: skipped(pollers) == 1, "the second copy was skipped")
        wait_for(lambda: depth(sqs, name) == 0, "both copies were acked")
    finally:
        for poller in pollers:
            poller.stop()
    assert calls.keys == {"order-7": 1}


def skipped(pollers: list[Background]) -> int:
    return sum(poller.poller.stats.duplicates_skipped for poller in pollers)


def test_a_warm_lambda_with_a_guard_skips_a_plain_records_redelivery(
    store: Store, sqs: Any, name: str
) -> None:
    """A plain record (no message attributes) would take the adapter's short path once warm;
    with a guard it never does (`intake.nothing_to_take`): its redelivery is skipped."""
    url = create_queue(name, client=sqs)
    sqs.send_message(QueueUrl=url, MessageBody="plain")
    calls = Calls()
    function = LambdaAdapter(calls, CONFIG, client=sqs, idempotency=store)
    mapping = EventSourceMapping(sqs, name)
    event = mapping.event(mapping.receive(wait_seconds=1))
    try:
        first = function(event, FakeContext())
        again = function(event, FakeContext())  # the same records, delivered again
    finally:
        function.close()
    assert first == again == {"batchItemFailures": []}
    assert sum(calls.keys.values()) == 1
    assert function._warm == {}


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_fifo_a_skipped_duplicate_keeps_its_groups_order(
    front_end: FrontEnd, store: Store, sqs: Any, name: str
) -> None:
    # Given a FIFO group whose first message is a copy of completed work
    queue = f"{name[:60]}.fifo"
    create_queue(queue, client=sqs)
    store.complete(["k1"], owner="earlier", ttl_seconds=600)
    producer = Producer(queue, client=sqs)
    for n, key in enumerate(["k1", "k2", "k3"]):
        producer.send(f"m{n}", group_id="g", deduplication_id=f"d{n}", idempotency_key=key)
    seen: list[str] = []
    front_end.consume(
        queue,
        lambda b: seen.extend(m.idempotency_key for m in b.messages),
        CONFIG,
        sqs,
        idempotency=store,
    )
    # Then the copy is acked without the handler, and the rest of its group runs, in order
    assert seen == ["k2", "k3"]
    assert depth(sqs, queue) == 0


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_a_completion_is_kept_while_a_copy_can_arrive(
    front_end: FrontEnd, store: Store, sqs: Any, name: str
) -> None:
    """`idempotency_ttl` unset: the queue's retention plus its DLQ's on a poller (read at its
    start); under Lambda, where the queue is not read, the longest default (28 days)."""
    dlq = sqs.create_queue(QueueName=f"{name}-dlq", Attributes={"MessageRetentionPeriod": "7200"})
    arn = sqs.get_queue_attributes(QueueUrl=dlq["QueueUrl"], AttributeNames=["QueueArn"])
    policy = f'{{"deadLetterTargetArn": "{arn["Attributes"]["QueueArn"]}", "maxReceiveCount": 3}}'
    attributes = {"MessageRetentionPeriod": "3600", "RedrivePolicy": policy}
    sqs.create_queue(QueueName=name, Attributes=attributes)
    Producer(name, client=sqs).send("work", idempotency_key="order-11")
    before = time.time()
    front_end.consume(name, Calls(), CONFIG, sqs, idempotency=store, idle_seconds=0.5)
    expires = store.read(["order-11"])["order-11"].expires
    expected = 28 * 86_400 if front_end.name.startswith("lambda") else 3600 + 7200
    assert before + expected <= expires <= time.time() + expected


def test_a_ttl_given_is_kept_as_given(sqs: Any, name: str) -> None:
    sqs.create_queue(QueueName=name, Attributes={"MessageRetentionPeriod": "3600"})
    Producer(name, client=sqs).send("work", idempotency_key="order-12")
    store = MemoryStore()
    before = time.time()
    config = ConsumerConfig(max_batch_timeout=0.3, idempotency_ttl=600)
    FRONT_ENDS[0].consume(name, Calls(), config, sqs, idempotency=store, idle_seconds=0.5)
    assert before + 600 <= store.read(["order-12"])["order-12"].expires <= time.time() + 600


@pytest.mark.parametrize("kind", POLLERS)
def test_a_long_handlers_claim_follows_its_visibility(
    kind: str, store: Store, sqs: Any, name: str
) -> None:
    """The heartbeat pushes the claim on with the visibility: it never lapses while the handler
    runs, though the handler outlasts the visibility timeout twice over."""
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send("slow", idempotency_key="order-13")
    seen: list[tuple[float, float]] = []  # (when read, when the claim lapses)

    def look() -> None:
        seen.append((time.time(), store.read(["order-13"])["order-13"].expires))

    def handle(batch: MessageBatch) -> None:
        for _ in range(10):
            look()
            time.sleep(0.5)

    async def handle_async(batch: MessageBatch) -> None:
        for _ in range(10):
            await asyncio.to_thread(look)
            await asyncio.sleep(0.5)

    config = ConsumerConfig(max_batch_timeout=0.1, visibility_timeout=2)
    script = handle if kind == "sync" else handle_async
    poller = Background(kind, name, script, config, sqs, idempotency=store).start()
    try:
        wait_for(lambda: poller.poller.stats.acked == 1, "the message was acked")
    finally:
        poller.stop()
    assert all(read < lapses for read, lapses in seen)  # live at every look
    assert seen[-1][1] >= seen[0][1] + 2  # pushed on, past the first claim's end
    assert store.read(["order-13"])["order-13"].state == "completed"
