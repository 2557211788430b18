"""The redrive daemon against moto's server, with compressed times (base delays of 1 s).

SQS takes visibility in whole seconds, so the shortest real delay is 1 s; what needs finer or
longer time (jitter, the 12 h ceiling, the rate limit's window) is tested in the pure tests.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from redrive import BackoffPolicy, Redriver
from sqsbatch import create_queue
from sqsbatch.errors import ConfigError, QueueNotFound
from tests.support.redrive import (
    Crash,
    Faulty,
    SerialReceives,
    bodies,
    contents,
    dead_letter,
    make_queues,
    server_error,
    throttled,
)
from tests.support.sqs_helpers import depth, visible
from tests.support.waiting import wait_for

NOW = BackoffPolicy(base_delay=0, jitter=0)
"""Every message is due at once."""


def test_a_message_comes_back_no_sooner_than_its_delay_and_later_ones_wait_longer(
    sqs: Any, name: str
) -> None:
    # Given two messages dead-lettered now, one never redriven, one redriven once already
    source, dlq = make_queues(sqs, name)
    failed_at = time.time()
    dead_letter(sqs, dlq, source, [0], at=failed_at, redrives=0)
    dead_letter(sqs, dlq, source, [1], at=failed_at, redrives=1)
    redriver = Redriver(dlq, policy=BackoffPolicy(base_delay=1, factor=2, jitter=0), client=sqs)
    # When the daemon passes again and again
    arrived: dict[int, float] = {}
    first = redriver.run_once(wait_seconds=0)

    def both_arrived() -> bool:
        redriver.run_once(wait_seconds=0)
        for message in contents(sqs, source):
            arrived.setdefault(message["body"], time.time())
            sqs.delete_message(
                QueueUrl=sqs.get_queue_url(QueueName=source)["QueueUrl"],
                ReceiptHandle=message["ReceiptHandle"],
            )
        return len(arrived) == 2

    wait_for(both_arrived, "both back in the source", interval=0.2)
    # Then both were first hidden, and each came back no sooner than base * factor**n
    assert (first.delayed, first.moved) == (2, 0)
    assert arrived[0] >= failed_at + 1
    assert arrived[1] >= failed_at + 2
    assert redriver.stats.moved == 2
    assert depth(sqs, dlq) == 0


def test_a_moved_copy_keeps_body_attributes_id_and_timestamp_with_one_more_redrive(
    sqs: Any, name: str
) -> None:
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, [{"order": 7}], redrives=2)
    stats = Redriver(dlq, policy=NOW, client=sqs).run_once(wait_seconds=0)
    assert stats.moved == 1
    [copy] = contents(sqs, source)
    assert copy["body"] == {"order": 7}
    assert copy["MessageAttributes"]["tenant"]["StringValue"] == "acme"
    meta = copy["meta"]
    assert (meta["id"], meta["ct"], meta["rd"], meta["q"]) == (
        "orig-{'order': 7}",
        "json",
        3,
        source,
    )
    assert "a" not in meta and "err" not in meta  # fresh retry budget, no stale failure time
    assert depth(sqs, dlq) == 0


def test_exhausted_messages_stay_in_the_dlq_and_are_reported(sqs: Any, name: str) -> None:
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, [1, 2], redrives=3)
    policy = BackoffPolicy(base_delay=0, jitter=0, max_redrives=3)
    stats = Redriver(dlq, policy=policy, client=sqs).run_once(wait_seconds=0)
    assert (stats.exhausted, stats.moved) == (2, 0)
    assert depth(sqs, dlq) == 2
    assert depth(sqs, source) == 0


def test_exhausted_messages_go_to_the_parking_queue_when_one_is_set(sqs: Any, name: str) -> None:
    source, dlq = make_queues(sqs, name)
    parking = f"{name}-parked"
    sqs.create_queue(QueueName=parking)
    dead_letter(sqs, dlq, source, [1], redrives=3)
    policy = BackoffPolicy(base_delay=0, jitter=0, max_redrives=3)
    stats = Redriver(dlq, policy=policy, parking_queue=parking, client=sqs).run_once(wait_seconds=0)
    assert stats.parked == 1
    [parked] = contents(sqs, parking)
    assert parked["meta"]["rd"] == 3
    assert parked["meta"]["err"]["type"] == "RuntimeError"
    assert depth(sqs, dlq) == 0


def test_a_message_sqs_moved_itself_goes_back_to_the_dlqs_only_source(sqs: Any, name: str) -> None:
    # Given a foreign message (no metadata) that moto's RedrivePolicy moved to the DLQ
    source, dlq = make_queues(sqs, name, max_retries=0)
    url = sqs.get_queue_url(QueueName=source)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="plain text")
    for _ in range(2):  # moto moves it on receive number maxReceiveCount + 1
        sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)
    assert depth(sqs, dlq) == 1
    # When the daemon runs: source from ListDeadLetterSourceQueues
    redriver = Redriver(dlq, policy=NOW, client=sqs)
    stats = redriver.run_once(wait_seconds=0)
    # Then it is back in its source, as text, with a redrive counted
    assert stats.moved == 1
    [copy] = contents(sqs, source)
    assert (copy["Body"], copy["meta"]["ct"], copy["meta"]["rd"]) == ("plain text", "text", 1)
    assert redriver.requests_by_operation["list_dead_letter_source_queues"] == 1


def test_without_one_known_source_messages_go_to_to_or_stay_unroutable(sqs: Any, name: str) -> None:
    # a DLQ of two queues: a message without metadata could come from either
    lone_dlq, fallback = f"{name}-shared", f"{name}-to"
    for source in (f"{name}-a", f"{name}-b"):
        create_queue(source, dead_letter_queue=lone_dlq, client=sqs)
    sqs.create_queue(QueueName=fallback)
    dead_letter(sqs, lone_dlq, None, [1])
    stuck = Redriver(lone_dlq, policy=NOW, client=sqs).run_once(wait_seconds=0)
    assert (stuck.unroutable, stuck.moved) == (1, 0)
    assert depth(sqs, lone_dlq) == 1
    # (the message is hidden for hold_seconds after a report; make it visible again to go on)
    dead_letter(sqs, lone_dlq, None, [2])
    routed = Redriver(lone_dlq, policy=NOW, to=fallback, client=sqs).run_once(wait_seconds=0)
    assert routed.moved == 1
    assert bodies(sqs, fallback) == [2]


def test_a_source_that_no_longer_exists_makes_the_message_unroutable(sqs: Any, name: str) -> None:
    _, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, f"{name}-deleted", [1])
    stats = Redriver(dlq, policy=NOW, client=sqs).run_once(wait_seconds=0)
    assert (stats.unroutable, stats.failed) == (1, 0)
    assert depth(sqs, dlq) == 1


def test_two_daemons_at_once_move_each_message_once(sqs: Any, name: str, local_sqs: Any) -> None:
    # Given 30 due messages and two daemons, each with its own client. moto can hand one
    # message to two concurrent receivers (it is not thread-safe), which real SQS does not do
    # within the visibility timeout; receives are serialised so that the test checks the
    # daemon, not moto. Sends and deletes still run concurrently.
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, list(range(30)))
    lock = threading.Lock()
    daemons = [
        Redriver(dlq, policy=NOW, client=SerialReceives(local_sqs.client(), lock)) for _ in "ab"
    ]
    # When both run at the same time
    threads = [threading.Thread(target=d.run_once, kwargs={"wait_seconds": 0}) for d in daemons]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then every message arrived exactly once, and the DLQ is empty
    assert bodies(sqs, source) == list(range(30))
    assert sum(d.stats.moved for d in daemons) == 30
    assert depth(sqs, dlq) == 0


def test_a_failed_delete_after_the_send_leaves_a_duplicate_never_a_loss(
    sqs: Any, name: str
) -> None:
    # Given a daemon whose deletes fail (the send went through)
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, [5])
    faulty = Faulty(sqs, "delete_message_batch", server_error)
    broken = Redriver(dlq, policy=NOW, client=faulty, visibility_timeout=1)
    stats = broken.run_once(wait_seconds=0)
    # Then the message is in its source and still in the DLQ, reported as failed
    assert (stats.moved, stats.failed) == (1, 1)
    assert depth(sqs, source) == 1
    assert depth(sqs, dlq) == 1
    # and once its visibility lapses a healthy daemon moves it again: a duplicate, same id
    wait_for(lambda: visible(sqs, dlq) == 1, "the message visible again in the DLQ")
    assert Redriver(dlq, policy=NOW, client=sqs).run_once(wait_seconds=0).moved == 1
    copies = contents(sqs, source)
    assert [c["body"] for c in copies] == [5, 5]
    assert {c["meta"]["id"] for c in copies} == {"orig-5"}
    assert depth(sqs, dlq) == 0


def test_a_crash_between_send_and_delete_loses_nothing(sqs: Any, name: str) -> None:
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, [6])
    crashing = Redriver(dlq, policy=NOW, client=Faulty(sqs, "delete_message_batch", Crash))
    with pytest.raises(Crash):
        crashing.run_once(wait_seconds=0)
    assert bodies(sqs, source) == [6]
    assert depth(sqs, dlq) == 1


def test_fifo_group_and_deduplication_survive_a_redrive(sqs: Any, name: str) -> None:
    # Given a FIFO message whose first move's delete fails (so it is moved twice)
    source, dlq = make_queues(sqs, name, fifo=True)
    dead_letter(sqs, dlq, source, [9], group="customer-7")
    faulty = Faulty(sqs, "delete_message_batch", server_error)
    Redriver(dlq, policy=NOW, client=faulty, visibility_timeout=1).run_once(wait_seconds=0)
    wait_for(lambda: visible(sqs, dlq) == 1, "the message visible again in the DLQ")
    Redriver(dlq, policy=NOW, client=sqs).run_once(wait_seconds=0)
    # Then the source holds it once, in its group: both copies had the same deduplication id
    [copy] = contents(sqs, source)
    assert copy["Attributes"]["MessageGroupId"] == "customer-7"
    assert len(copy["Attributes"]["MessageDeduplicationId"]) == 64
    assert (copy["body"], copy["meta"]["rd"]) == (9, 1)
    assert depth(sqs, dlq) == 0


def test_the_rate_limit_caps_sends_in_a_window(sqs: Any, name: str) -> None:
    # Given 10 due messages, a limit of 3 messages/s and a clock that does not move
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, list(range(10)))
    frozen = Redriver(dlq, policy=NOW, rate=3, client=sqs, clock=lambda: 100.0)
    # When the daemon passes within that instant
    stats = frozen.run_once(wait_seconds=0)
    # Then only the bucket's burst (one second's worth) went out; the rest wait in the DLQ
    assert (stats.moved, stats.delayed) == (3, 7)
    assert depth(sqs, source) == 3
    assert depth(sqs, dlq) == 7


def test_unknown_queues_and_bad_settings_fail_clearly(sqs: Any, name: str) -> None:
    with pytest.raises(QueueNotFound, match=f"{name}-missing"):
        Redriver(f"{name}-missing", client=sqs).run_once(wait_seconds=0)
    _, dlq = make_queues(sqs, name)
    with pytest.raises(QueueNotFound):
        Redriver(dlq, parking_queue=f"{name}-nowhere", client=sqs).run_once(wait_seconds=0)
    with pytest.raises(ConfigError, match="to='x-dlq' is invalid: it is one of the DLQs"):
        Redriver(["x-dlq"], to="x-dlq", client=sqs)
    with pytest.raises(ConfigError, match="give at least one DLQ"):
        Redriver([], client=sqs)
    for bad in (0, 43_201, "30", True):
        with pytest.raises(
            ConfigError, match=r"visibility_timeout=.* \(accepted: int 1\.\.43200\)"
        ):
            Redriver(["x-dlq"], client=sqs, visibility_timeout=bad)  # type: ignore[arg-type]


@contextmanager
def running(redriver: Redriver) -> Iterator[None]:
    """`redriver.run()` on a thread; on leaving, `stop()`, and run() ends (a 30 s hang guard)."""
    runner = threading.Thread(target=redriver.run)
    runner.start()
    try:
        yield
    finally:
        redriver.stop()
        runner.join(timeout=30)
    assert not runner.is_alive()


def test_run_stops_gracefully_on_stop(sqs: Any, name: str) -> None:
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, [1, 2])
    redriver = Redriver(dlq, policy=NOW, client=sqs, wait_seconds=1)
    with running(redriver):
        wait_for(lambda: redriver.stats.moved >= 2, "both moved")
    assert bodies(sqs, source) == [1, 2]


def test_run_backs_off_from_throttled_receives_and_carries_on(sqs: Any, name: str) -> None:
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, [1])
    faulty = Faulty(sqs, "receive_message", throttled, times=2)
    redriver = Redriver(dlq, policy=NOW, client=faulty, wait_seconds=1)
    with running(redriver):
        wait_for(lambda: redriver.stats.moved >= 1, "the message moved")
    assert faulty.calls.count("receive_message") >= 3
    assert bodies(sqs, source) == [1]


def test_run_leaves_a_duplicate_never_a_loss_when_a_delete_behind_is_refused(
    sqs: Any, name: str
) -> None:
    # Given a running daemon whose DLQ deletes SQS refuses (its passes settle behind its receives)
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, [7, 8])
    faulty = Faulty(sqs, "delete_message_batch", server_error)
    redriver = Redriver(dlq, policy=NOW, client=faulty, wait_seconds=1, visibility_timeout=30)
    with running(redriver):
        wait_for(lambda: redriver.stats.failed >= 2, "the refused deletes counted")
    # Then both messages are in their source, and still in the DLQ (hidden): none vanished
    assert (redriver.stats.moved, redriver.stats.failed) == (2, 2)
    assert bodies(sqs, source) == [7, 8]
    assert depth(sqs, dlq) == 2
