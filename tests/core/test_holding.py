"""`Holding` (pause, circuit, rate limit before each receive) and `close_held`, on a fake clock."""

from __future__ import annotations

import json
import logging

from sqsbatch import ConsumerConfig, MessageBatch, Overloaded
from sqsbatch._core.attributes import ATTRIBUTE as META
from sqsbatch._core.context import QueueContext
from sqsbatch._core.envelope import Envelope, decode
from sqsbatch._core.holding import Hold, Holding, close_held
from sqsbatch._core.ledger import ActionKind, LastFailure, Outcome
from sqsbatch._core.message import _Delivery
from sqsbatch._core.pause_state import PauseState

URL = "https://sqs.us-east-1.amazonaws.com/123456789012/orders"
PAUSED = PauseState(paused=True, until=None, reason="db down")


def test_nothing_set_admits_what_is_wanted() -> None:
    holding = Holding(ConsumerConfig(), now=0.0)
    assert holding.admit(0.0, 10) == Hold(10)


def test_a_pause_admits_nothing_and_its_changes_are_logged_once_each() -> None:
    holding = Holding(ConsumerConfig(max_messages_per_second=5), now=0.0)
    line = holding.read(PAUSED, 10.0, "orders")
    assert line == (logging.WARNING, "orders is paused until indefinitely (db down): not receiving")
    assert holding.read(PAUSED, 11.0, "orders") is None  # no change, no line
    hold = holding.admit(12.0, 10)
    assert (hold.count, hold.why) == (0, "paused")
    assert holding.paused_seconds(12.5) == 2  # whole seconds; the half is kept
    line = holding.read(PauseState(paused=False), 13.0, "orders")
    assert line == (logging.WARNING, "orders is resumed: receiving again")
    assert holding.paused_seconds(20.0) == 1  # 0.5 kept + 0.5 until resumed; none after
    assert holding.admit(20.0, 10).count == 5  # the bucket was not spent while paused


def test_overloaded_opens_the_circuit_then_one_probe_closes_it() -> None:
    holding = Holding(ConsumerConfig(circuit_probe_size=2), now=0.0)
    change, hold = holding.record(
        5.0, outcome=Outcome.RAISED, error=Overloaded(retry_after=20), probe=False
    )
    assert change is not None and change.opened and hold == 20.0
    assert holding.admit(10.0, 10).count == 0  # open: nothing received
    probe = holding.admit(25.0, 10)
    assert (probe.count, probe.probe) == (2, True)
    assert holding.admit(25.0, 10).count == 0  # one probe at a time
    holding.returned(probe, 0, 26.0)  # the probe's receive got nothing: another probe
    probe = holding.admit(27.0, 10)
    assert probe.probe
    change, hold = holding.record(28.0, outcome=Outcome.RETURNED, error=None, probe=True)
    assert change is not None and change.line() == "circuit closed (the probe batch succeeded)"
    assert hold is None and holding.admit(28.0, 10) == Hold(10)


def test_failed_batches_in_a_row_open_it_and_hold_the_batch_that_opened_it() -> None:
    holding = Holding(ConsumerConfig(circuit_failures=2), now=0.0)
    error = RuntimeError("db down")
    assert holding.record(1.0, outcome=Outcome.RAISED, error=error, probe=False) == (None, None)
    change, hold = holding.record(2.0, outcome=Outcome.TIMED_OUT, error=None, probe=False)
    assert (
        change is not None and change.line() == "circuit open for 30 s (2 failed batches in a row)"
    )
    assert hold == 30.0
    # a batch received before it opened fails as usual (held only if Overloaded)
    assert holding.record(3.0, outcome=Outcome.RAISED, error=error, probe=False) == (None, None)


def test_failures_without_circuit_failures_never_hold() -> None:
    holding = Holding(ConsumerConfig(), now=0.0)
    for at in range(50):
        assert holding.record(at, outcome=Outcome.RAISED, error=ValueError(), probe=False) == (
            None,
            None,
        )


def test_the_rate_limit_grants_what_the_bucket_holds_and_takes_back_what_did_not_come() -> None:
    holding = Holding(ConsumerConfig(max_messages_per_second=4), now=0.0)
    first = holding.admit(0.0, 10)
    assert first.count == 4  # a second's worth
    holding.returned(first, 1, 0.0)  # 3 did not come: back in the bucket
    assert holding.admit(0.0, 10).count == 3
    empty = holding.admit(0.0, 10)
    assert (empty.count, empty.why, empty.wait) == (0, "rate", 0.25)
    assert holding.admit(0.5, 10).count == 2


def delivery(index: int, attempts_before: int) -> _Delivery:
    envelope = Envelope(id=f"m{index}", timestamp=1_700_000_000.0, base_attempts=attempts_before)
    raw = {
        "MessageId": f"sqs-{index}",
        "ReceiptHandle": f"r{index}",
        "Body": f"body {index}",
        "Attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1700000000000"},
        "MessageAttributes": {META: envelope.to_attribute()},
    }
    return _Delivery(decode(raw), f"r{index}", 0.0, 30.0, False)


def test_a_held_batch_is_re_sent_with_its_attempts_carried_and_this_delivery_not_counted() -> None:
    context = QueueContext(
        "orders", URL, None, ConsumerConfig(max_retries=0), LastFailure.DROP, False
    )
    batch = MessageBatch("orders", [delivery(0, 2), delivery(1, 0), delivery(2, 0)])
    batch.messages[1].ack()  # what the handler decided stands
    assert batch.messages[0].attempts == 3
    closing = close_held(
        batch,
        Outcome.RAISED,
        Overloaded(retry_after=1000),
        context,
        hold_seconds=999.2,
        now=1.0,
        wall_now=1_700_000_100.0,
    )
    assert closing.kinds == [ActionKind.RESEND, ActionKind.DELETE, ActionKind.RESEND]
    sends = [entry for entry in closing.entries.first if entry.op == "send_message_batch"]
    assert len(sends) == 2 and not closing.entries.refused
    for entry in sends:
        carried = json.loads(entry.params["MessageAttributes"][META]["StringValue"])
        assert entry.params["DelaySeconds"] == 900  # 1000 s: a hop with a due time
        assert carried["due"] == 1_700_000_100.0 + 1000
    attempts = [
        json.loads(e.params["MessageAttributes"][META]["StringValue"]).get("a", 0) for e in sends
    ]
    assert attempts == [2, 0]  # as before this delivery: no attempt spent
    assert not [e for e in closing.entries.first if "visibility" in e.op]  # no receive count


def test_a_fifo_batch_is_closed_as_usual() -> None:
    context = QueueContext(
        "orders.fifo", URL + ".fifo", None, ConsumerConfig(), LastFailure.DROP, True
    )
    batch = MessageBatch("orders.fifo", [delivery(0, 0)])
    closing = close_held(
        batch, Outcome.RAISED, Overloaded(), context, hold_seconds=30, now=1.0, wall_now=2.0
    )
    assert closing.kinds == [ActionKind.HIDE]


def test_overloaded_with_no_wait_is_held_all_the_same() -> None:
    """`Overloaded(retry_after=0)`: re-sent at once, still costing no attempt."""
    holding = Holding(ConsumerConfig(), now=0.0)
    error = Overloaded(retry_after=0)
    change, hold = holding.record(1.0, outcome=Outcome.RAISED, error=error, probe=False)
    assert change is not None and change.opened and hold == 0.0


def test_the_circuit_open_times_are_settings() -> None:
    # Given an open time of 5 s, doubled by each failed probe up to 12 s
    config = ConsumerConfig(circuit_failures=1, circuit_open_seconds=5, circuit_max_open_seconds=12)
    holding = Holding(config, now=0.0)
    error = RuntimeError("db down")
    change, hold = holding.record(1.0, outcome=Outcome.RAISED, error=error, probe=False)
    assert (
        change is not None and change.line() == "circuit open for 5 s (1 failed batches in a row)"
    )
    assert hold == 5.0
    assert holding.admit(5.9, 10).count == 0 and holding.admit(6.0, 10).probe
    change, _ = holding.record(6.5, outcome=Outcome.RAISED, error=error, probe=True)
    assert change is not None and change.until == 6.5 + 10  # twice 5 s
    assert holding.admit(16.5, 10).probe
    change, _ = holding.record(17.0, outcome=Outcome.RAISED, error=error, probe=True)
    assert change is not None and change.until == 17.0 + 12  # 20 s, capped at 12 s


def test_overloaded_without_retry_after_holds_for_circuit_open_seconds() -> None:
    holding = Holding(ConsumerConfig(circuit_open_seconds=7), now=0.0)
    change, hold = holding.record(1.0, outcome=Outcome.RAISED, error=Overloaded(), probe=False)
    assert change is not None and change.until == 8.0 and hold == 7.0
