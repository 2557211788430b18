"""The sync poller against moto's server: assembly, timing semantics, concurrency, heartbeat,
timeouts, shutdown and failures (SPEC 2, 5)."""

from __future__ import annotations

import logging
import os
import re
import signal
import threading
import time
from typing import Any

import pytest

from sqsbatch import (
    ConfigError,
    Consumer,
    ConsumerConfig,
    MessageBatch,
    QueueNotFound,
    create_queue,
)
from sqsbatch.limits import SqsLimits
from tests.support.faults import Faulty, unreachable
from tests.support.scenarios import Recorder
from tests.support.sqs_helpers import depth, drain, fill
from tests.support.waiting import GUARD_SECONDS, telling, wait_for


def recording(recorder: Recorder, then: Any = None) -> Any:
    def handler(batch: MessageBatch) -> None:
        recorder.saw(batch)
        if then is not None:
            then(batch)

    return handler


def in_thread(target: Any) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_batch_of_30_is_assembled_from_several_receives(sqs: Any, name: str) -> None:
    fill(sqs, name, list(range(30)))
    recorder = Recorder()
    config = ConsumerConfig(max_batch_size=30, max_batch_timeout=2)
    consumer = Consumer(name, recording(recorder), config, client=sqs)
    consumer.run_until_idle(1)
    assert [sorted(b) for b in recorder.batches] == [list(range(30))]
    assert consumer.requests_by_operation["receive_message"] >= 3
    assert depth(sqs, name) == 0


def test_a_message_inside_the_window_joins_the_batch_its_first_message_opened(
    sqs: Any, name: str
) -> None:
    """On a real queue: the window opens at the first receive and takes what comes in it.

    That a later arrival never resets the window is decided by `BatchWindow` alone, with a
    fake clock (tests/core/test_batching.py): here it would need sub-second margins of real time.
    """
    producer = fill(sqs, name, [])
    recorder = Recorder()
    config = ConsumerConfig(max_batch_size=10, max_batch_timeout=3)
    consumer = Consumer(name, recording(recorder), config, client=sqs)
    runner = in_thread(lambda: consumer.run_until_idle(1.0))
    producer.send("a")
    wait_for(lambda: consumer.stats.received == 1)  # the window opens at its receive
    producer.send("b")  # inside the window opened by "a" (3 s to spare): joins its batch
    runner.join(30)
    assert not runner.is_alive()
    assert recorder.batches == [["a", "b"]]


def test_full_batch_goes_at_once_and_a_partial_one_is_delivered_on_stop(
    sqs: Any, name: str
) -> None:
    fill(sqs, name, list(range(15)))
    first_batch = threading.Event()
    recorder = Recorder()
    config = ConsumerConfig(max_batch_size=10, max_batch_timeout=60, max_concurrency=2)
    short_polls = SqsLimits(max_wait_seconds=1)  # a stop waits for the poll under way
    consumer = Consumer(
        name,
        recording(recorder, lambda b: first_batch.set()),
        config,
        client=sqs,
        limits=short_polls,
    )
    runner = in_thread(consumer.run)
    # a full batch does not wait for its 60 s window...
    assert first_batch.wait(30), "the full batch waited for its window"
    wait_for(lambda: consumer.stats.received == 15)  # ...while 5 wait in the next, still open
    consumer.stop()
    runner.join(30)
    assert not runner.is_alive()
    assert [len(b) for b in recorder.batches] == [10, 5]  # received ones are delivered on stop
    assert depth(sqs, name) == 0


def test_retry_delay_zero_is_a_value_not_unset(sqs: Any, name: str) -> None:
    fill(sqs, name, ["now", "later"])
    recorder = Recorder()

    def script(batch: MessageBatch) -> None:
        for message in batch.messages:
            if message.attempts == 1:
                message.retry(delay_seconds=0) if message.body == "now" else message.retry()

    config = ConsumerConfig(max_batch_timeout=0.5, retry_delay=60)
    Consumer(name, recording(recorder, script), config, client=sqs).run_until_idle(1.5)
    assert recorder.attempts() == {"now": [1, 2], "later": [1]}
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    hidden = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"]
    )
    assert (
        hidden["Attributes"]["ApproximateNumberOfMessagesNotVisible"] == "1"
    )  # "later" waits 60 s


def test_dlq_copy_keeps_id_timestamp_body_and_starts_at_attempt_1(sqs: Any, name: str) -> None:
    dlq = f"{name}-dlq"
    fill(sqs, name, [{"order": 7}], dead_letter_queue=dlq, max_retries=1)
    seen: list[tuple[Any, str, Any, int]] = []

    def poison(batch: MessageBatch) -> None:
        seen.extend((m.body, m.id, m.timestamp, m.attempts) for m in batch.messages)
        raise ValueError("bad order 7")

    config = ConsumerConfig(max_batch_timeout=0.2, max_retries=1, dead_letter_queue=dlq)
    Consumer(name, poison, config, client=sqs).run_until_idle(1)
    assert [attempts for *_, attempts in seen] == [1, 2]

    copies: list[tuple[Any, str, Any, int]] = []
    consumer: Consumer

    def look_then_leave(batch: MessageBatch) -> None:
        copies.extend((m.body, m.id, m.timestamp, m.attempts) for m in batch.messages)
        batch.retry_all(delay_seconds=0)  # leave it there to read its metadata below
        consumer.stop()

    config = ConsumerConfig(max_batch_timeout=0.2, max_retries=5)
    consumer = Consumer(dlq, look_then_leave, config, client=sqs)
    consumer.run()
    body, original_id, timestamp, _ = seen[0]
    assert copies == [(body, original_id, timestamp, 1)], copies
    (raw,) = drain(sqs, dlq)  # the copy carries why and where from, in the one attribute
    assert raw["meta"]["q"] == name
    assert raw["meta"]["err"]["type"] == "ValueError"
    assert raw["meta"]["err"]["message"] == "bad order 7"
    assert raw["meta"].get("a", 0) == 0  # a fresh retry budget on the DLQ
    assert depth(sqs, name) == 0


def test_concurrency_never_hands_one_message_to_two_batches(sqs: Any, name: str) -> None:
    fill(sqs, name, list(range(40)))
    lock = threading.Lock()
    holding: set[int] = set()
    overlaps: list[int] = []
    most_at_once = [0, 0]  # (now, max) batches in flight
    recorder = Recorder()

    def slow(batch: MessageBatch) -> None:
        bodies = {m.body for m in batch.messages}
        with lock:
            overlaps.extend(bodies & holding)
            holding.update(bodies)
            most_at_once[0] += 1
            most_at_once[1] = max(most_at_once)
        time.sleep(0.3)
        with lock:
            holding.difference_update(bodies)
            most_at_once[0] -= 1

    config = ConsumerConfig(max_batch_size=5, max_batch_timeout=0, max_concurrency=4)
    Consumer(name, recording(recorder, slow), config, client=sqs).run_until_idle(1)
    assert overlaps == []
    assert sorted(recorder.attempts()) == list(range(40))
    assert all(a == [1] for a in recorder.attempts().values())
    assert most_at_once[1] > 1  # batches really ran side by side
    assert depth(sqs, name) == 0


def test_heartbeat_keeps_a_slow_handlers_messages_hidden(sqs: Any, name: str) -> None:
    fill(sqs, name, ["slow"])
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    stolen: list[Any] = []

    def slow(batch: MessageBatch) -> None:
        # the receive hid it for 1 s (+ window); without a heartbeat it would be visible again
        for _ in range(8):
            time.sleep(0.5)
            stolen.extend(sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0).get("Messages", []))

    config = ConsumerConfig(max_batch_timeout=0, visibility_timeout=1)
    consumer = Consumer(name, slow, config, client=sqs)
    consumer.run_until_idle(0.5)
    assert stolen == []
    assert consumer.requests_by_operation["change_message_visibility_batch"] >= 3
    assert consumer.stats.acked == 1 and depth(sqs, name) == 0


def test_heartbeat_never_extends_past_the_ceiling(sqs: Any, name: str) -> None:
    fill(sqs, name, ["old"])
    client = Faulty(sqs)
    limits = SqsLimits(visibility_ceiling_seconds=3)  # 12 h, shrunk
    config = ConsumerConfig(max_batch_timeout=0, visibility_timeout=2)
    consumer = Consumer(name, lambda batch: time.sleep(4), config, client=client, limits=limits)
    consumer.run_until_idle(0.5)
    changes = [
        entry["VisibilityTimeout"]
        for op, params in client.calls
        if op == "change_message_visibility_batch"
        for entry in params["Entries"]
    ]
    # hidden 2 s at the receive, extended once, at about 1 s, by what is left before the
    # ceiling (rounded down: at most 2 s); then nothing (no spinning on extensions that gain
    # nothing)
    assert len(changes) == 1 and 1 <= changes[0] <= 2
    assert consumer.stats.acked == 1


def test_handler_timeout_fails_the_batch_but_explicit_acks_hold(sqs: Any, name: str) -> None:
    fill(sqs, name, ["acked", "undecided"])
    recorder = Recorder()

    def stuck(batch: MessageBatch) -> None:
        if batch.messages[0].attempts == 1:
            next(m for m in batch.messages if m.body == "acked").ack()
            wait_for(lambda: consumer.stats.handler_timeouts == 1, "the batch timed out")
            next(m for m in batch.messages if m.body == "undecided").ack()  # too late: ignored

    config = ConsumerConfig(max_batch_timeout=0.2, handler_timeout=0.5)
    consumer = Consumer(name, recording(recorder, stuck), config, client=sqs)
    consumer.run_until_idle(1)
    assert recorder.attempts() == {"acked": [1], "undecided": [1, 2]}
    assert consumer.stats.handler_timeouts == 1 and depth(sqs, name) == 0


def test_sigterm_finishes_the_in_flight_batch_then_returns(sqs: Any, name: str) -> None:
    fill(sqs, name, list(range(3)))
    recorder = Recorder()
    stopped = threading.Event()

    def terminate(batch: MessageBatch) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stopped.wait(GUARD_SECONDS)  # the batch is still in flight when the signal lands

    previous = signal.getsignal(signal.SIGTERM)
    config = ConsumerConfig(max_batch_size=3, max_batch_timeout=0.2)
    consumer = Consumer(name, recording(recorder, terminate), config, client=sqs)
    consumer.stop = telling(consumer.stop, stopped)  # type: ignore[method-assign]
    consumer.run()
    assert sorted(recorder.attempts()) == [0, 1, 2] and depth(sqs, name) == 0
    assert signal.getsignal(signal.SIGTERM) is previous  # handlers restored


def test_network_errors_and_throttling_never_kill_the_loop(
    sqs: Any, name: str, caplog: Any
) -> None:
    fill(sqs, name, ["survivor"])
    client = Faulty(sqs)
    client.fail("receive_message", 2, unreachable)
    client.fail("receive_message", 1)  # then throttled
    recorder = Recorder()
    config = ConsumerConfig(max_batch_timeout=0.2)
    consumer = Consumer(name, recording(recorder), config, client=client)
    consumer.run_until_idle(5)  # time spent backing off counts toward idle
    assert recorder.attempts() == {"survivor": [1]}
    assert consumer.stats.receive_errors == 3
    assert "cannot reach SQS" in caplog.text and "ThrottlingException" in caplog.text


def test_an_expired_receipt_is_counted_not_a_crash(sqs: Any, name: str) -> None:
    fill(sqs, name, ["gone"])
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]

    def delete_behind_its_back(batch: MessageBatch) -> None:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=batch._deliveries[0].receipt_handle)
        batch.messages[0].retry(delay_seconds=5)

    consumer = Consumer(
        name, delete_behind_its_back, ConsumerConfig(max_batch_timeout=0), client=sqs
    )
    consumer.run_until_idle(0.5)
    assert consumer.stats.expired_receipts == 1 and consumer.stats.settle_failures == 0


def test_start_warns_when_the_redrive_policy_disagrees(sqs: Any, name: str, caplog: Any) -> None:
    create_queue(name, dead_letter_queue=f"{name}-dlq", max_retries=1, client=sqs)
    config = ConsumerConfig(max_retries=3, dead_letter_queue=f"{name}-dlq")
    with caplog.at_level(logging.WARNING, logger="sqsbatch"):
        Consumer(name, lambda batch: None, config, client=sqs).run_until_idle(0.1)
    assert "maxReceiveCount=2 but max_retries=3 needs 4" in caplog.text
    assert "before its last retry" in caplog.text


def test_a_queue_cannot_be_its_own_dlq() -> None:
    with pytest.raises(ConfigError, match="is the queue itself"):
        Consumer(
            "orders",
            lambda batch: None,
            ConsumerConfig(dead_letter_queue="orders"),
            client=object(),
        )


def test_invariants_on_a_mixed_run(sqs: Any, name: str) -> None:
    """Every received message ends in one terminal state; no batch call over 10 entries."""
    dlq = f"{name}-dlq"
    fill(sqs, name, list(range(60)), dead_letter_queue=dlq, max_retries=1)
    client = Faulty(sqs)

    def mixed(batch: MessageBatch) -> None:
        for message in batch.messages:
            if message.body % 3 == 0:
                message.retry(delay_seconds=0)
            elif message.body % 3 == 1:
                message.ack()
        if any(m.body % 5 == 0 for m in batch.messages):
            raise RuntimeError("some batches fail")

    config = ConsumerConfig(
        max_batch_size=25, max_batch_timeout=0.3, max_retries=1, dead_letter_queue=dlq
    )
    consumer = Consumer(name, mixed, config, client=client)
    consumer.run_until_idle(1)
    batch_calls = [p for op, p in client.calls if op.endswith("_batch")]
    assert batch_calls and all(len(p["Entries"]) <= 10 for p in batch_calls)
    stats = consumer.stats
    terminal = stats.acked + stats.dead_lettered + stats.dropped
    assert depth(sqs, name) == 0
    assert terminal + depth(sqs, dlq) - stats.dead_lettered == 60
    assert stats.received == stats.acked + stats.retried + stats.dead_lettered


def test_a_copy_sqs_would_refuse_is_left_to_the_redrive_policy(
    sqs: Any, name: str, caplog: Any
) -> None:
    """A foreign message with 10 attributes cannot carry ours: it is not deleted but left for
    the queue's RedrivePolicy (maxReceiveCount = max_retries + 1), which moves it."""
    dlq = f"{name}-dlq"
    url = create_queue(name, dead_letter_queue=dlq, max_retries=0, visibility_timeout=1, client=sqs)
    full = {f"a{i}": {"DataType": "String", "StringValue": "x"} for i in range(10)}
    sqs.send_message(QueueUrl=url, MessageBody="foreign", MessageAttributes=full)

    def fail(batch: MessageBatch) -> None:
        raise RuntimeError("poison")

    config = ConsumerConfig(
        max_batch_timeout=0, max_retries=0, dead_letter_queue=dlq, visibility_timeout=1
    )
    consumer = Consumer(name, fail, config, client=sqs)
    consumer.run_until_idle(2.5)
    assert consumer.stats.settle_failures == 1 and consumer.stats.dead_lettered == 0
    assert "SQS allows 10" in caplog.text
    (moved,) = drain(sqs, dlq)  # moved by SQS itself on the next receive
    assert moved["Body"] == "foreign" and moved["meta"] is None
    assert depth(sqs, name) == 0


def test_a_deleted_queue_ends_the_run_with_a_clear_error_after_settling(
    sqs: Any, name: str
) -> None:
    fill(sqs, name, ["last"])
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    handled: list[Any] = []

    def handler(batch: MessageBatch) -> None:
        handled.extend(m.body for m in batch.messages)
        sqs.delete_queue(QueueUrl=url)  # gone while the poller runs

    consumer = Consumer(name, handler, ConsumerConfig(max_batch_timeout=0), client=sqs)
    with pytest.raises(QueueNotFound, match="queue does not exist"):
        consumer.run()  # not a loop that retries forever
    assert handled == ["last"] and consumer.stats.receive_errors == 1


def test_a_drop_without_dlq_is_logged(sqs: Any, name: str, caplog: Any) -> None:
    fill(sqs, name, ["poison"])

    def fail(batch: MessageBatch) -> None:
        raise RuntimeError("poison")

    config = ConsumerConfig(max_batch_timeout=0, max_retries=0)
    consumer = Consumer(name, fail, config, client=sqs)
    with caplog.at_level(logging.WARNING, logger="sqsbatch"):
        consumer.run_until_idle(0.5)
    assert consumer.stats.dropped == 1 and depth(sqs, name) == 0
    (line,) = [r for r in caplog.records if "retries_exhausted" in r.getMessage()]
    assert line.levelno == logging.WARNING
    assert re.search(r"1 message deleted \(the queue has no RedrivePolicy.*\(\S+\)$", line.message)
