"""How many receivers a poller runs: the pure decision, table-tested (no clock, no SQS)."""

from __future__ import annotations

import pytest

from sqsbatch._core.receivers import Receivers


def test_a_quiet_poller_runs_one_receiver_whatever_its_concurrency() -> None:
    # Given a poller with 16 slots, nothing received yet
    receivers = Receivers(16)
    # When it starts, and its receive comes back empty
    assert receivers.start(stopping=False, idle=False) == 1
    surplus = receivers.received(got=0, asked=10)
    # Then that one receiver long-polls on, and no other starts
    assert not surplus
    assert receivers.start(stopping=False, idle=False) == 0
    assert (receivers.allowed, receivers.receiving) == (1, 1)


@pytest.mark.parametrize(
    ("slots", "full_receives", "allowed"),
    [(1, 5, 1), (4, 1, 2), (4, 2, 3), (4, 10, 4), (16, 15, 16), (64, 3, 4)],
)
def test_each_full_receive_lets_one_more_free_slot_receive(
    slots: int, full_receives: int, allowed: int
) -> None:
    # Given a poller whose receives come back full (a backlog)
    receivers = Receivers(slots)
    receivers.start(stopping=False, idle=False)
    # When `full_receives` receives came back with all they asked for
    for _ in range(full_receives):
        receivers.received(got=10, asked=10)
    # Then one more receiver is allowed per full receive, never more than the slots
    assert receivers.allowed == allowed
    assert receivers.start(stopping=False, idle=False) == allowed - 1


def test_a_window_that_could_take_only_a_few_counts_as_full_when_it_got_them() -> None:
    receivers = Receivers(4)
    receivers.start(stopping=False, idle=False)
    receivers.received(got=3, asked=3)  # the window had room for 3: it filled
    assert receivers.allowed == 2


@pytest.mark.parametrize(("got", "asked"), [(0, 10), (9, 10), (1, 2)])
def test_a_short_receive_shrinks_the_allowance_and_ends_surplus_receivers(
    got: int, asked: int
) -> None:
    # Given four receivers running on a backlog
    receivers = Receivers(4, allowed=4)
    assert receivers.start(stopping=False, idle=False) == 4
    # When a receive comes back short
    surplus = receivers.received(got=got, asked=asked)
    # Then one receiver too many runs: the one that saw it ends (if its window is empty)
    assert receivers.allowed == 3 and surplus
    receivers.stopped_receiving(with_batch=False)
    assert (receivers.receiving, receivers.start(stopping=False, idle=False)) == (3, 0)


def test_after_a_backlog_receivers_shrink_back_to_one() -> None:
    # Given 8 receivers on a queue that just emptied
    receivers = Receivers(8, allowed=8)
    receivers.start(stopping=False, idle=False)
    ended = 0
    # When each gets an empty long poll, and ends when it is surplus
    for _ in range(8):
        if receivers.received(got=0, asked=10):
            receivers.stopped_receiving(with_batch=False)
            ended += 1
    # Then one receiver is left long-polling, and none restarts
    assert (ended, receivers.receiving, receivers.allowed) == (7, 1, 1)
    assert receivers.start(stopping=False, idle=False) == 0


def test_slots_held_by_batches_are_not_free_to_receive() -> None:
    # Given 4 slots, 3 of them running handlers, the allowance at 4
    receivers = Receivers(4, allowed=4, handling=3)
    # Then only the free slot starts receiving
    assert receivers.start(stopping=False, idle=False) == 1
    assert receivers.start(stopping=False, idle=False) == 0
    # And a settled batch frees its slot for a receiver
    receivers.settled()
    assert receivers.start(stopping=False, idle=False) == 1
    assert receivers.in_flight == 4


def test_a_receiver_with_a_batch_keeps_its_slot_until_settled() -> None:
    receivers = Receivers(2)
    receivers.start(stopping=False, idle=False)
    receivers.stopped_receiving(with_batch=True)
    assert (receivers.receiving, receivers.handling, receivers.in_flight) == (0, 1, 1)
    assert receivers.start(stopping=False, idle=False) == 1  # the other slot polls meanwhile


@pytest.mark.parametrize(
    ("receiving", "handling", "stopping", "idle", "started"),
    [
        (0, 0, False, False, 1),  # nothing runs: one receiver starts
        (0, 0, True, False, 0),  # stopping: nothing new starts
        (0, 0, False, True, None),  # idle with nothing in flight: the run is over
        (1, 0, False, True, 0),  # idle, a receiver still polls: wait for it
        (0, 1, False, True, 0),  # idle, a batch still runs: wait for it, receive nothing
        (0, 1, True, True, 0),
    ],
)
def test_stopping_and_idle_start_no_receiver(
    receiving: int, handling: int, stopping: bool, idle: bool, started: int | None
) -> None:
    receivers = Receivers(4, receiving=receiving, handling=handling)
    assert receivers.start(stopping=stopping, idle=idle) == started
    assert receivers.receiving == receiving + (started or 0)


def test_a_settled_slot_receives_again_while_a_receiver_is_wanted() -> None:
    # Given one slot of one, its receiver just handed a batch to the handler
    receivers = Receivers(1)
    receivers.start(stopping=False, idle=False)
    # Then the loop has no news: no other receiver could start
    assert not receivers.stopped_receiving(with_batch=True)
    # When the batch settles, the slot goes on receiving (as `start` would have started it)
    assert receivers.settled(again=True)
    assert (receivers.receiving, receivers.handling) == (1, 0)


@pytest.mark.parametrize(
    ("receiving", "stopping", "idle", "again"),
    [
        (0, True, False, False),  # stopping: the slot is free
        (0, False, True, False),  # idle: the slot is free
        (1, False, False, False),  # the allowance (1) is taken by another receiver
        (0, False, False, True),
    ],
)
def test_a_settled_slot_receives_again_only_when_start_would_start_it(
    receiving: int, stopping: bool, idle: bool, again: bool
) -> None:
    receivers = Receivers(4, receiving=receiving, handling=1)
    assert receivers.settled(again=True, stopping=stopping, idle=idle) == again
    assert (receivers.receiving, receivers.handling) == (receiving + again, 0)


def test_the_loop_hears_of_a_free_slot_and_of_a_receiver_that_could_start() -> None:
    receivers = Receivers(4, allowed=2, receiving=2)
    assert receivers.stopped_receiving(with_batch=False)  # a slot is free
    assert receivers.stopped_receiving(with_batch=True)  # one more receiver is allowed
    assert not receivers.settled()  # not asked to go on: the slot is free
