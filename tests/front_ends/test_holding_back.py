"""Holding back on both pollers, against the local moto server (issue 30): a paused queue is not
received from, `Overloaded` holds a batch without spending an attempt or a receive count, and
`max_messages_per_second` caps what is received. (The Lambda adapter is handed its batches: a
pause disables its event source mappings instead, tests/front_ends/test_pausing.py.)"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from sqsbatch import ConsumerConfig, MessageBatch, Overloaded, create_queue, pause_queue
from sqsbatch.pausing import resume_queue
from tests.support.emf import check_lines, metric
from tests.support.pollers import POLLERS, Background, Receives
from tests.support.waiting import wait_for


def counts(sqs: Any, url: str) -> tuple[int, int]:
    """(visible, in flight) messages of the queue at `url`."""
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return int(got[names[0]]), int(got[names[1]])


def send(sqs: Any, url: str, count: int) -> None:
    entries = [{"Id": str(i), "MessageBody": f"m{i}"} for i in range(count)]
    for start in range(0, count, 10):
        sqs.send_message_batch(QueueUrl=url, Entries=entries[start : start + 10])


@pytest.mark.parametrize("kind", POLLERS)
def test_a_paused_queue_is_not_received_from_past_its_visibility_timeout(
    kind: str,
    sqs: Any,
    name: str,
    tmp_path: Any,
    *,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Paused for longer than the visibility timeout (and the stall watchdog's limit): no
    receive, so no receive count grows and nothing reaches the DLQ; resumed, every message is
    consumed on its first attempt."""
    caplog.set_level(logging.INFO, logger="sqsbatch")
    dlq = f"{name}-dlq"
    url = create_queue(name, dead_letter_queue=dlq, max_retries=0, visibility_timeout=1, client=sqs)
    dlq_url = sqs.get_queue_url(QueueName=dlq)["QueueUrl"]
    pause_queue(url, reason="db down", client=sqs, lambda_client=False)
    send(sqs, url, 3)
    attempts: list[int] = []
    config = ConsumerConfig(
        dead_letter_queue=dlq,
        max_retries=0,
        visibility_timeout=1,
        pause_check_seconds=1,
        max_batch_timeout=0.2,
        stall_seconds=2,
        metrics="emf",
    )
    health = tmp_path / "health"

    def script(batch: MessageBatch) -> None:
        attempts.extend(message.attempts for message in batch.messages)

    run = Background(kind, name, script, config, sqs, health_file=health)
    run.start()
    poller = run.poller

    def checks() -> int:
        return poller.requests_by_operation.get("list_queue_tags", 0)

    wait_for(lambda: checks() >= 4, "4 pause checks: 3 s paused, past visibility and stall")
    wait_for(health.exists, "the health file, touched while paused")
    touched = health.stat().st_mtime_ns
    wait_for(lambda: health.stat().st_mtime_ns > touched, "the health file touched again")
    assert "receive_message" not in poller.requests_by_operation
    assert run.error is None and not poller.stalled
    assert counts(sqs, url) == (3, 0) and counts(sqs, dlq_url) == (0, 0)
    assert poller.stats.paused_seconds >= 2
    resume_queue(url, client=sqs, lambda_client=False)
    wait_for(lambda: len(attempts) == 3, "the 3 messages consumed once resumed")
    run.stop()
    assert run.error is None
    assert attempts == [1, 1, 1]  # ApproximateReceiveCount was 0 when resumed
    paused = sum(metric(check_lines(capsys.readouterr().out), "PausedSeconds", QueueName=name))
    assert paused == poller.stats.paused_seconds >= 2
    assert counts(sqs, url) == (0, 0) and counts(sqs, dlq_url) == (0, 0)
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert f"{name} is paused until indefinitely (db down): not receiving" in lines
    assert f"{name} is resumed: receiving again" in lines


@pytest.mark.parametrize("kind", POLLERS)
def test_overloaded_holds_the_batch_without_spending_an_attempt(
    kind: str,
    sqs: Any,
    name: str,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With max_retries=0 a spent attempt would dead-letter: the batch that raised
    `Overloaded` comes back after the open time, re-sent (no visibility change), through one
    probe message, then the rest, each on its first attempt."""
    caplog.set_level(logging.WARNING, logger="sqsbatch")
    dlq = f"{name}-dlq"
    url = create_queue(name, dead_letter_queue=dlq, max_retries=0, client=sqs)
    dlq_url = sqs.get_queue_url(QueueName=dlq)["QueueUrl"]
    send(sqs, url, 3)
    batches: list[list[tuple[str, int]]] = []
    config = ConsumerConfig(
        dead_letter_queue=dlq, max_retries=0, max_batch_timeout=0.5, metrics="emf"
    )

    def script(batch: MessageBatch) -> None:
        batches.append([(message.body, message.attempts) for message in batch.messages])
        if len(batches) == 1:
            raise Overloaded(retry_after=2)

    run = Background(kind, name, script, config, sqs).start()
    wait_for(lambda: sum(map(len, batches)) == 6, "the held batch handled again")
    run.stop()
    assert sorted(body for body, _ in batches[0]) == ["m0", "m1", "m2"]
    assert len(batches[1]) == 1  # the half-open probe: circuit_probe_size
    again = [message for batch in batches[1:] for message in batch]
    assert sorted(again) == [("m0", 1), ("m1", 1), ("m2", 1)]
    requests = run.poller.requests_by_operation
    assert "change_message_visibility_batch" not in requests  # no receive count spent
    assert requests["send_message_batch"] == 1  # the 3 re-sent in one call
    stats = run.poller.stats
    assert (stats.circuit_open, stats.acked, stats.dead_lettered) == (1, 3, 0)
    documents = check_lines(capsys.readouterr().out)
    assert sum(metric(documents, "CircuitOpen", QueueName=name)) == 1
    assert counts(sqs, url) == (0, 0) and counts(sqs, dlq_url) == (0, 0)
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert f"{name}: circuit open for 2 s (a handler raised Overloaded)" in lines
    assert f"{name}: circuit closed (the probe batch succeeded)" in lines


@pytest.mark.parametrize("kind", POLLERS)
def test_max_messages_per_second_caps_every_window_of_receives(
    kind: str, sqs: Any, name: str
) -> None:
    """4 a second, burst 4: no receive asks for more than the bucket holds, and the messages
    received from receive i to receive j never exceed 4 + 4 x (time between their starts)."""
    url = create_queue(name, client=sqs)
    send(sqs, url, 14)
    handled: list[str] = []
    config = ConsumerConfig(max_messages_per_second=4, max_batch_timeout=0)
    receives = Receives()

    def script(batch: MessageBatch) -> None:
        handled.extend(message.body for message in batch.messages)

    run = Background(kind, name, script, config, sqs, receives=receives)
    run.start()
    wait_for(lambda: len(handled) == 14, "the 14 messages")
    run.stop()
    calls = [call for call in receives.calls if call[2]]
    assert max(asked for _, asked, _ in receives.calls) <= 4
    for i, (first, _, _) in enumerate(calls):
        got = 0
        for last, _, count in calls[i:]:
            got += count
            assert got <= 4 + 4 * (last - first) + 0.5, (calls, i)
    assert sum(count for _, _, count in calls) == 14  # never more received than handled


@pytest.mark.parametrize("kind", POLLERS)
def test_the_failed_batch_that_opens_the_circuit_is_held_too(
    kind: str, sqs: Any, name: str
) -> None:
    """`circuit_failures = 1`: the failing batch opens the circuit (30 s) and is re-sent, due
    then, instead of retried: on its last delivery (max_retries=0), nothing is dead-lettered."""
    dlq = f"{name}-dlq"
    url = create_queue(name, dead_letter_queue=dlq, max_retries=0, client=sqs)
    dlq_url = sqs.get_queue_url(QueueName=dlq)["QueueUrl"]
    send(sqs, url, 3)
    config = ConsumerConfig(
        dead_letter_queue=dlq, max_retries=0, max_batch_timeout=0.5, circuit_failures=1
    )

    def script(batch: MessageBatch) -> None:
        raise RuntimeError("the database is down")

    run = Background(kind, name, script, config, sqs).start()
    poller = run.poller
    wait_for(lambda: poller.stats.retried == 3, "the failed batch re-sent")
    run.stop()
    assert poller.stats.circuit_open == 1 and poller.stats.dead_lettered == 0
    assert "change_message_visibility_batch" not in poller.requests_by_operation
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"]
    held = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    assert [held[n] for n in names] == ["0", "3"]  # due when the circuit's 30 s are over
    assert counts(sqs, dlq_url) == (0, 0)
