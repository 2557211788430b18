"""FIFO groups in parallel (issue 31, item 3), the pure part: a window split into one batch per
group, the group batches waiting for a slot, the slots' count, and the receive attempt ids.
No SQS, no clock: `now` is passed in."""

from __future__ import annotations

import itertools

import pytest

from sqsbatch._core.groups import Waiting, group_batches, splits_groups
from sqsbatch._core.message import _Delivery
from sqsbatch._core.receive_attempts import ATTEMPT_SECONDS, ReceiveAttempts
from sqsbatch._core.receivers import Receivers
from sqsbatch._core.receiving import ReceivedDelivery


def delivery(group: str | None, seq: int, *, received_at: float = 0.0) -> _Delivery:
    attributes = {} if group is None else {"MessageGroupId": group}
    raw = {
        "MessageId": f"{group}-{seq}",
        "ReceiptHandle": f"r-{group}-{seq}",
        "Body": f"{group}{seq}",
        "Attributes": attributes,
    }
    return ReceivedDelivery(raw, received_at, received_at + 30)


def names(batches: list[list[_Delivery]]) -> list[list[str]]:
    """`a1` for the delivery of group a's message 1 (its receipt handle is `r-a-1`)."""
    return [[d.receipt_handle[2:].replace("-", "") for d in batch] for batch in batches]


# -- splitting a window by group ------------------------------------------------------------------


def test_a_window_splits_into_one_batch_per_group_each_in_its_order() -> None:
    # Given a window as a FIFO receive returns it: groups interleaved, each in its own order
    window = [delivery("a", 1), delivery("b", 1), delivery("a", 2), delivery("c", 1)]
    window += [delivery("b", 2), delivery("a", 3)]
    # Then: one batch per group, groups by their first message, each group's order kept
    assert names(group_batches(window)) == [["a1", "a2", "a3"], ["b1", "b2"], ["c1"]]


def test_a_window_of_one_group_stays_one_batch() -> None:
    window = [delivery("a", n) for n in range(1, 11)]
    assert names(group_batches(window)) == [[f"a{n}" for n in range(1, 11)]]


def test_messages_without_a_group_make_one_batch_of_their_own() -> None:
    window = [delivery(None, 1), delivery("a", 1), delivery(None, 2)]
    assert names(group_batches(window)) == [["None1", "None2"], ["a1"]]


@pytest.mark.parametrize(
    ("fifo", "mode", "slots", "probe", "splits"),
    [
        (True, "by_group", 4, False, True),
        (True, "mixed", 4, False, False),
        (False, "by_group", 4, False, False),  # a standard queue's group ids are tenants (fair)
        (True, "by_group", 4, True, False),  # the circuit's probe is the probe receive's messages
        (True, "by_group", 1, False, False),  # one slot: a delete per group, for nothing
    ],
)
def test_only_a_fifo_queue_by_group_with_slots_to_spare_splits(
    fifo: bool, mode: str, slots: int, probe: bool, splits: bool
) -> None:
    assert splits_groups(fifo=fifo, fifo_batches=mode, slots=slots, probe=probe) is splits


# -- group batches waiting for a slot -----------------------------------------------------------


def test_free_slots_start_on_waiting_batches_before_any_new_receiver() -> None:
    # Given 4 slots, one receiving, whose window held 4 groups
    receivers = Receivers(4, fifo=True)
    waiting = Waiting()
    assert receivers.start(stopping=False, idle=False) == 1
    receivers.received(got=4, asked=10)
    _, b, c, d = group_batches([delivery(g, 1) for g in "abcd"])
    waiting.put(receivers, [b, c, d])
    assert receivers.stopped_receiving(with_batch=True)  # news: slots for the waiting ones
    # When the loop hands them out: 3 free slots take b, c, d, in order
    assert waiting.hand_out(receivers) == [b, c, d]
    # Then every slot is busy, no receiver may start, nothing waits
    assert (receivers.handling, receivers.waiting, receivers.receiving) == (4, 0, 0)
    assert receivers.start(stopping=False, idle=False) == 0


def test_a_slot_whose_batch_settled_takes_the_next_waiting_batch() -> None:
    # Given 2 slots busy and 3 group batches waiting
    receivers = Receivers(2, fifo=True)
    waiting = Waiting()
    receivers.start(stopping=False, idle=False)
    batches = group_batches([delivery(g, 1) for g in "abcde"])
    waiting.put(receivers, batches[1:])
    receivers.stopped_receiving(with_batch=True)
    assert waiting.hand_out(receivers) == [batches[1]]
    assert receivers.takers == 0  # no slot free: c, d, e wait
    # When a slot's batch settles, it takes c (staying busy), then d, then e
    assert [waiting.next(receivers) for _ in range(3)] == batches[2:]
    assert waiting.next(receivers) is None
    assert (receivers.handling, receivers.waiting) == (2, 0)


def test_waiting_batches_keep_a_run_going_even_when_idle_or_stopping() -> None:
    receivers = Receivers(2, fifo=True)
    receivers.waiting = 1
    assert receivers.start(stopping=False, idle=True) == 0  # not None: one is still to handle
    assert receivers.start(stopping=True, idle=False) == 0
    assert receivers.takers == 1  # but a free slot still starts on it
    receivers.take_waiting()
    receivers.settled()
    assert receivers.start(stopping=False, idle=True) is None


def test_waiting_messages_are_due_for_their_heartbeat_as_a_running_batch_s_are() -> None:
    # Given group batches received at 0 and hidden for 30 s, waiting for a slot
    receivers = Receivers(1, fifo=True)
    waiting = Waiting()
    batches = group_batches([delivery(g, 1, received_at=0.0) for g in "abc"])
    waiting.put(receivers, batches[1:])
    # Then nothing is due before half a visibility timeout before they show again...
    assert waiting.due(14.9, visibility_timeout=30) == []
    # ...and then every waiting message is (the heartbeat extends those that need it)
    due = waiting.due(15.0, visibility_timeout=30)
    assert [d.receipt_handle for d in due] == ["r-b-1", "r-c-1"]
    assert Waiting().due(1000.0, visibility_timeout=30) == []


@pytest.mark.parametrize(("got", "asked", "fifo", "allowed"), [(3, 10, True, 2), (3, 10, False, 1)])
def test_on_fifo_a_receive_that_got_anything_counts_as_full(
    got: int, asked: int, fifo: bool, allowed: int
) -> None:
    # A FIFO receive comes back short because the groups in flight are locked, not because the
    # queue is empty: it lets one more slot receive (the one that just freed a group)
    receivers = Receivers(4, fifo=fifo)
    receivers.start(stopping=False, idle=False)
    receivers.received(got=got, asked=asked)
    assert receivers.allowed == allowed
    receivers.received(got=0, asked=10)
    assert receivers.allowed == 1


# -- ReceiveRequestAttemptId --------------------------------------------------------------------


def attempts() -> ReceiveAttempts:
    counter = itertools.count(1)
    return ReceiveAttempts(lambda: f"id{next(counter)}")


def test_every_new_receive_gets_a_fresh_attempt_id() -> None:
    ids = attempts()
    first = ids.claim(10, now=0.0)
    ids.answered(first)
    second = ids.claim(10, now=1.0)
    assert (first, second) == ("id1", "id2")


def test_a_receive_retried_after_a_passing_failure_sends_the_same_attempt_id() -> None:
    ids = attempts()
    first = ids.claim(10, now=0.0)
    ids.failed(first, 10)  # throttled, or the answer was lost on the way
    assert ids.claim(10, now=2.0) == first  # the same receive, again
    ids.answered(first)
    assert ids.claim(10, now=3.0) == "id2"  # then a new receive: a fresh id


def test_a_failed_attempt_id_is_sent_again_once_only() -> None:
    # Two slots receive in parallel: only one of them may retry the failed receive, or both
    # would get its messages (a group in two slots)
    ids = attempts()
    ids.failed(ids.claim(10, now=0.0), 10)
    assert [ids.claim(10, now=1.0), ids.claim(10, now=1.0)] == ["id1", "id2"]


def test_a_receive_asking_for_another_count_is_not_the_same_receive() -> None:
    ids = attempts()
    ids.failed(ids.claim(10, now=0.0), 10)
    assert ids.claim(3, now=1.0) == "id2"
    assert ids.claim(10, now=1.0) == "id1"


def test_an_attempt_id_past_sqs_s_five_minutes_is_dropped() -> None:
    ids = attempts()
    first = ids.claim(10, now=0.0)
    ids.failed(first, 10)
    again = ids.claim(10, now=ATTEMPT_SECONDS - 1)  # retried within SQS's 5 minutes
    ids.failed(again, 10)  # failed again: still counted from the first send
    assert again == first
    assert ids.claim(10, now=ATTEMPT_SECONDS) == "id2"
    assert ids.retries == []
