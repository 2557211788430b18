"""FIFO groups in parallel (issue 31, item 3), on both pollers against moto's server.

With `fifo_batches = "by_group"` (the default) a poller splits what a receive returns into one
batch per group and hands the groups to different slots at once; each group's messages stay in
order, a group is never in two slots at once, and a group's batch is settled when its own
handler ends. Receives on a FIFO queue carry a `ReceiveRequestAttemptId`, the same when a
failed receive is sent again.

moto is not thread-safe: concurrent receives may hand a message out twice. The proxies here
serialise receives (PITFALLS), so that what is checked is the poller's doing, not moto's.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.stub import Stubber

from sqsbatch import AsyncConsumer, Consumer, ConsumerConfig, MessageBatch, Producer, create_queue
from sqsbatch._core.receive_attempts import ReceiveAttempts
from sqsbatch._core.shapes import receive_params
from tests.support.faults import Faulty, throttled, unreachable
from tests.support.front_ends import aio_client
from tests.support.sqs_helpers import depth
from tests.support.waiting import wait_for

POLLERS = ["sync", "async"]
GUARD_SECONDS = 30.0
"""How long a handler waits for what the test expects of the other slots: only a hang guard."""


class Recording(Faulty):
    """A real boto3 client: receives one at a time; every call's parameters recorded, and the
    receipt handle of each message received, by body."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self._receiving = threading.Lock()
        self.receipts: dict[str, str] = {}

    def _call(self, op: str, target: Callable[..., Any], params: dict[str, Any]) -> Any:
        if op != "receive_message":
            return super()._call(op, target, params)
        with self._receiving:
            answer = super()._call(op, target, params)
        with self._lock:
            self.receipts |= {m["Body"]: m["ReceiptHandle"] for m in answer.get("Messages", [])}
        return answer


class AsyncRecording:
    """`Recording` for an aiobotocore client."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._receiving = asyncio.Lock()
        self._faults: list[Callable[[str], Exception]] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.receipts: dict[str, str] = {}

    def fail(self, op: str, times: int, error: Callable[[str], Exception] = throttled) -> None:
        assert op == "receive_message"
        self._faults.extend([error] * times)

    def __getattr__(self, op: str) -> Any:
        target = getattr(self._client, op)
        if not callable(target):
            return target

        async def call(**params: Any) -> Any:
            self.calls.append((op, params))
            if op != "receive_message":
                return await target(**params)
            async with self._receiving:
                if self._faults:
                    raise self._faults.pop(0)(op)
                answer = await target(**params)
            self.receipts |= {m["Body"]: m["ReceiptHandle"] for m in answer.get("Messages", [])}
            return answer

        return call


def consume(
    poller: str,
    queue: str,
    handler: Callable[[MessageBatch], Any],
    config: ConsumerConfig,
    sqs: Any,
    *,
    fail_receives: int = 0,
    clock: Callable[[], float] = time.monotonic,
    idle_seconds: float = 2.0,
) -> Any:
    """Run `handler` on `queue` with the poller until idle; the recording proxy it ran on."""
    if poller == "sync":
        client = Recording(sqs)
        client.fail("receive_message", fail_receives)
        Consumer(queue, handler, config, client=client, clock=clock).run_until_idle(idle_seconds)
        return client

    async def main() -> AsyncRecording:
        async with aio_client(sqs, max_pool_connections=20) as aio:
            client = AsyncRecording(aio)
            client.fail("receive_message", fail_receives)
            consumer = AsyncConsumer(queue, handler, config, client=client, clock=clock)
            await consumer.run_until_idle(idle_seconds)
            return client

    return asyncio.run(main())


def fifo(sqs: Any, name: str, messages: Iterable[tuple[str, int]]) -> str:
    """A FIFO queue holding `messages` (group, seq), sent in this order; bodies `a0`, `b3`..."""
    queue = f"{name}.fifo"
    create_queue(queue, client=sqs)
    items = [{"body": f"{group}{seq}", "group_id": group} for group, seq in messages]
    Producer(queue, client=sqs).send_batch(items)
    return queue


def pairs(batch: MessageBatch) -> list[tuple[str, int]]:
    return [(m.body[0], int(m.body[1:])) for m in batch.messages]


def handler_for(poller: str, work: Callable[[MessageBatch], None]) -> Callable[..., Any]:
    """`work` as the poller's handler: on the async poller in a worker thread (it blocks)."""
    if poller == "sync":
        return work

    async def handler(batch: MessageBatch) -> None:
        await asyncio.to_thread(work, batch)

    return handler


@pytest.mark.parametrize("poller", POLLERS)
def test_different_groups_are_in_different_slots_at_once(poller: str, sqs: Any, name: str) -> None:
    # Given 4 groups of one message, which one receive gets, and 4 slots
    queue = fifo(sqs, name, [(group, 0) for group in "abcd"])
    barrier = threading.Barrier(4, timeout=GUARD_SECONDS)
    calls: list[list[str]] = []

    def work(batch: MessageBatch) -> None:
        calls.append(sorted({group for group, _ in pairs(batch)}))
        barrier.wait()  # passes only once 4 handlers run at once

    # When the poller drains the queue (max_retries 0: a broken barrier ends the test)
    config = ConsumerConfig(max_concurrency=4, max_batch_timeout=0, max_retries=0)
    consume(poller, queue, handler_for(poller, work), config, sqs)
    # Then each group was a batch of its own, the 4 handled at the same time
    assert sorted(calls) == [["a"], ["b"], ["c"], ["d"]]
    assert depth(sqs, queue) == 0


@pytest.mark.parametrize("poller", POLLERS)
def test_each_group_in_order_and_never_in_two_slots_at_once(
    poller: str, sqs: Any, name: str
) -> None:
    # Given 6 groups of 5 messages, sent round robin, and 4 slots
    queue = fifo(sqs, name, [(g, seq) for seq in range(5) for g in "abcdef"])
    lock = threading.Lock()
    running: set[str] = set()
    overlaps: list[str] = []
    calls: list[list[tuple[str, int]]] = []

    def work(batch: MessageBatch) -> None:
        got = pairs(batch)
        groups = {group for group, _ in got}
        with lock:  # a ledger of (group, seq) per call; a group already running is an overlap
            calls.append(got)
            overlaps.extend(groups & running)
            running.update(groups)
        time.sleep(0.005 * len(got))  # the handler's work: room for another slot to overlap
        with lock:
            running.difference_update(groups)

    # When the poller drains the queue
    config = ConsumerConfig(max_concurrency=4, max_batch_timeout=0)
    consume(poller, queue, handler_for(poller, work), config, sqs)
    # Then every call held one group, no group ran in two slots at once, and each group's
    # messages were handled in the order they were sent, each once
    assert all(len({group for group, _ in call}) == 1 for call in calls)
    assert overlaps == []
    handled: dict[str, list[int]] = defaultdict(list)
    for group, seq in itertools.chain.from_iterable(calls):
        handled[group].append(seq)
    assert dict(handled) == {group: [0, 1, 2, 3, 4] for group in "abcdef"}
    assert depth(sqs, queue) == 0


@pytest.mark.parametrize("poller", POLLERS)
def test_a_slow_group_does_not_hold_up_the_settling_of_the_others(
    poller: str, sqs: Any, name: str
) -> None:
    # Given group a (slow) and group b's three messages, all in one receive, and 2 slots
    queue = fifo(sqs, name, [("a", 0), ("b", 0), ("b", 1), ("b", 2)])
    seen: list[str] = []

    def work(batch: MessageBatch) -> None:
        if pairs(batch)[0][0] == "a":  # a's handler runs until b's messages are deleted
            wait_for(lambda: depth(sqs, queue) == 1, "b deleted", timeout=GUARD_SECONDS)
            seen.append("b deleted while a ran")

    # When the poller drains the queue
    config = ConsumerConfig(max_concurrency=2, max_batch_timeout=0, max_retries=0)
    consume(poller, queue, handler_for(poller, work), config, sqs)
    # Then b's batch was settled while a's handler still ran
    assert seen == ["b deleted while a ran"]
    assert depth(sqs, queue) == 0


@pytest.mark.parametrize("poller", POLLERS)
def test_a_group_batch_waiting_for_a_slot_stays_hidden(poller: str, sqs: Any, name: str) -> None:
    # Given 3 groups in one receive and 2 slots: c waits for a slot while a and b run
    queue = fifo(sqs, name, [(group, 0) for group in "abc"])
    ahead = [0.0]  # the poller's clock runs 20 s ahead once a and b run
    proxy: list[Any] = []
    handled: list[str] = []
    waited: list[str] = []  # a and b: their handlers saw c extended while it waited

    def clock() -> float:
        return time.monotonic() + ahead[0]

    def extended(body: str) -> bool:
        receipt = proxy[0].receipts.get(body) if proxy else None
        changes = [p for op, p in list(proxy[0].calls) if op == "change_message_visibility_batch"]
        return any(e["ReceiptHandle"] == receipt for p in changes for e in p["Entries"])

    def work(batch: MessageBatch) -> None:
        handled.extend(m.body for m in batch.messages)
        if len(handled) == 2 and "c0" not in handled:
            ahead[0] = 20.0  # c's heartbeat is due: half its visibility timeout is left
        if "c0" not in handled:
            wait_for(lambda: extended("c0"), "c0 extended while it waits", timeout=GUARD_SECONDS)
            waited.extend(m.body for m in batch.messages)

    def kept(client: Any) -> Any:
        proxy.append(client)
        return client

    # When the poller drains the queue (the proxy is known to the handlers once it runs)
    config = ConsumerConfig(max_concurrency=2, max_batch_timeout=0, max_retries=0)
    if poller == "sync":
        client = kept(Recording(sqs))
        Consumer(queue, work, config, client=client, clock=clock).run_until_idle(2.0)
    else:

        async def main() -> None:
            async with aio_client(sqs) as aio:
                client = kept(AsyncRecording(aio))
                handler = handler_for(poller, work)
                await AsyncConsumer(
                    queue, handler, config, client=client, clock=clock
                ).run_until_idle(2.0)

        asyncio.run(main())
    # Then c's visibility was extended while it waited, and each message handled once
    assert sorted(waited) == ["a0", "b0"]
    assert sorted(handled) == ["a0", "b0", "c0"]
    assert depth(sqs, queue) == 0


@pytest.mark.parametrize("poller", POLLERS)
def test_group_batches_waiting_when_the_poller_stops_are_still_handled(
    poller: str, sqs: Any, name: str
) -> None:
    # Given 4 groups in one receive and 2 slots: c and d wait while a and b run
    queue = fifo(sqs, name, [(group, 0) for group in "abcd"])
    handled: list[str] = []
    pollers: list[Any] = []

    def work(batch: MessageBatch) -> None:
        handled.extend(m.body for m in batch.messages)
        if len(handled) == 1:
            pollers[0].stop()  # stopped with group batches still waiting for a slot

    config = ConsumerConfig(max_concurrency=2, max_batch_timeout=0)
    handler = handler_for(poller, work)
    if poller == "sync":
        pollers.append(Consumer(queue, handler, config, client=Recording(sqs)))
        pollers[0].run_until_idle(GUARD_SECONDS)
    else:

        async def main() -> None:
            async with aio_client(sqs) as aio:
                pollers.append(AsyncConsumer(queue, handler, config, client=AsyncRecording(aio)))
                await pollers[0].run_until_idle(GUARD_SECONDS)

        asyncio.run(main())
    # Then every group was handled and settled before the run returned
    assert sorted(handled) == ["a0", "b0", "c0", "d0"]
    assert depth(sqs, queue) == 0


# -- ReceiveRequestAttemptId --------------------------------------------------------------------


def attempt_ids(client: Any) -> list[str | None]:
    return [p.get("ReceiveRequestAttemptId") for op, p in client.calls if op == "receive_message"]


@pytest.mark.parametrize("poller", POLLERS)
@pytest.mark.parametrize("error", [throttled, unreachable], ids=["throttled", "network"])
def test_a_fifo_receive_sent_again_after_a_failure_keeps_its_attempt_id(
    poller: str, error: Callable[[str], Exception], sqs: Any, name: str
) -> None:
    queue = fifo(sqs, name, [("a", 0)])
    handled: list[str] = []

    def work(batch: MessageBatch) -> None:
        handled.extend(m.body for m in batch.messages)

    config = ConsumerConfig(max_batch_timeout=0)
    client = consume(poller, queue, handler_for(poller, work), config, sqs, fail_receives=1)
    if poller == "async":
        assert isinstance(client, AsyncRecording)
    ids = attempt_ids(client)
    # The failed receive's id is sent again; the receive after an answer has a fresh one
    assert len(ids) >= 3 and all(ids), ids
    assert ids[1] == ids[0]
    assert ids[2] != ids[1]
    assert len(set(ids[1:])) == len(ids) - 1
    assert handled == ["a0"]


def test_a_standard_queue_s_receive_has_no_attempt_id(sqs: Any, name: str) -> None:
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send("x")
    client = consume("sync", name, lambda batch: None, ConsumerConfig(max_batch_timeout=0), sqs)
    assert attempt_ids(client) and not any(attempt_ids(client))


def test_the_attempt_id_sent_again_seen_by_botocore_s_stubber() -> None:
    """moto ignores `ReceiveRequestAttemptId`: botocore's Stubber shows what reaches botocore
    (its own retries off, so that each failure is the poller's to retry)."""
    config = Config(retries={"total_max_attempts": 1})
    client = boto3.session.Session().client("sqs", region_name="us-east-1", config=config)
    url = "https://sqs.us-east-1.amazonaws.com/123456789012/orders.fifo"
    consumer = Consumer(url, lambda batch: None, ConsumerConfig(), client=client)
    counter = itertools.count(1)
    with Stubber(client) as stub:
        stub.add_response(
            "get_queue_attributes",
            {"Attributes": {}},
            {"QueueUrl": url, "AttributeNames": ["RedrivePolicy", "MessageRetentionPeriod"]},
        )
        consumer._context = consumer._start()
        consumer._attempts = ReceiveAttempts(lambda: f"attempt-{next(counter)}")
        params = receive_params(url, max_messages=10, wait_seconds=0, visibility_timeout=30)
        stub.add_client_error("receive_message", "ThrottlingException", http_status_code=400)
        stub.add_response("receive_message", {}, params | {"ReceiveRequestAttemptId": "attempt-1"})
        stub.add_response("receive_message", {}, params | {"ReceiveRequestAttemptId": "attempt-2"})
        for _ in range(3):
            consumer._receive(10, 0, 0.0)
        stub.assert_no_pending_responses()
