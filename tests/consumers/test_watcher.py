"""The sync poller's `Watcher` and its `Ticket`s, on a fake clock, and the sync `HandlerRun`
racing its own deadline inside `Slots`.

The watcher thread waits in real time for what the fake clock says is left, so a test moves the
clock and then waits for the state it expects; no sleep decides an outcome.
"""

from __future__ import annotations

import gc
import threading
import weakref
from typing import Any

import pytest

from sqsbatch._core.heartbeat import Watch
from sqsbatch._sync.flavour import HandlerRun, Slots
from sqsbatch._sync.watcher import Ticket, Watcher
from tests.support.waiting import wait_for

WAIT = 30.0


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def watcher(clock: FakeClock) -> Any:
    watcher = Watcher(clock, max_sleep=0.05)
    yield watcher
    watcher.stop()


def test_arming_a_ticket_due_after_the_watchers_plan_does_not_wake_it(clock: FakeClock) -> None:
    # Given a watcher asleep until its first ticket is due (and no periodic look meanwhile)
    watcher = Watcher(clock, max_sleep=3600)
    try:
        watcher.arm(100.0, lambda: None)
        wait_for(lambda: watcher.wakes == 1)

        # When batches that end long before then are armed (and disarmed)
        for _ in range(50):
            watcher.disarm(watcher.arm(500.0, lambda: None))

        # Then the watcher was never woken for them; one due earlier wakes it
        assert watcher.notifies == 0
        watcher.arm(50.0, lambda: None)
        assert watcher.notifies == 1
        wait_for(lambda: watcher.wakes == 2)
    finally:
        watcher.stop()


def test_a_due_ticket_runs_on_a_thread_of_its_own_and_is_re_armed(
    clock: FakeClock, watcher: Watcher
) -> None:
    # Given a ticket that heartbeats every 10 s of the fake clock
    beats: list[int] = []

    def due() -> float:
        beats.append(threading.get_ident())
        return clock.now + 10

    ticket = watcher.arm(10.0, due)

    # When the clock passes two of its times
    clock.now = 10.0
    wait_for(lambda: len(beats) == 1)
    clock.now = 20.0
    wait_for(lambda: len(beats) == 2)

    # Then each ran off the test's thread and the watcher's, and the slot still owns it
    assert threading.get_ident() not in beats
    assert watcher.disarm(ticket) is True
    clock.now = 100.0
    watcher.arm(0.0, lambda: None)  # wakes the watcher: the dead ticket comes up, and is skipped
    wait_for(lambda: watcher.queued == 0)
    assert len(beats) == 2


def test_disarmed_tickets_hold_nothing_and_the_heap_is_compacted(watcher: Watcher) -> None:
    # Given many batches armed far ahead, each ticket's action holding its batch
    class Batch:
        pass

    batches = [Batch() for _ in range(100)]
    refs = [weakref.ref(b) for b in batches]
    tickets = [watcher.arm(1000.0, lambda b=b: b and None) for b in batches]  # type: ignore[misc]

    # When their handlers end
    for ticket in tickets:
        assert watcher.disarm(ticket) is True
    del batches
    gc.collect()

    # Then nothing keeps a batch alive, and most dead tickets left the heap before they came up
    assert [r for r in refs if r() is not None] == []
    assert watcher.queued < 100


def test_a_handler_ending_while_its_ticket_gives_up_waits_and_does_not_own_the_batch(
    clock: FakeClock, watcher: Watcher
) -> None:
    # Given a ticket whose give-up is under way (held at a gate)
    giving_up, go_on = threading.Event(), threading.Event()

    def due() -> None:
        giving_up.set()
        assert go_on.wait(WAIT)

    ticket = watcher.arm(1.0, due)
    clock.now = 1.0
    assert giving_up.wait(WAIT)

    # When the handler ends meanwhile
    # Then its end waits for the give-up, and the batch is the watcher's alone
    assert ended_while_under_way(watcher, ticket, go_on) is False


def test_a_heartbeat_under_way_when_the_handler_ends_is_waited_for_and_is_the_last(
    clock: FakeClock, watcher: Watcher
) -> None:
    beating, go_on = threading.Event(), threading.Event()
    beats: list[float] = []

    def due() -> float:
        beats.append(clock.now)
        beating.set()
        assert go_on.wait(WAIT)
        return clock.now + 1

    ticket = watcher.arm(1.0, due)
    clock.now = 1.0
    assert beating.wait(WAIT)
    assert ended_while_under_way(watcher, ticket, go_on) is True
    clock.now = 50.0
    watcher.arm(0.0, lambda: None)
    wait_for(lambda: watcher.queued == 0)
    assert beats == [1.0]  # none after the handler's end


class Batch:
    """What `HandlerRun` reads of a batch."""

    def __init__(self) -> None:
        self.queue = "orders"
        self._deliveries: list[Any] = []


@pytest.mark.parametrize("winner", ["handler", "deadline"])
def test_a_handler_returning_at_its_deadline_has_exactly_one_owner(
    winner: str, clock: FakeClock
) -> None:
    # Given a slot running a handler that returns just as its deadline is reached: before the
    # watcher looks ("handler"), or while the watcher's give-up is under way ("deadline")
    giving_up, go_on = threading.Event(), threading.Event()
    give_ups: list[int] = []
    runs: list[HandlerRun] = []
    watch = Watch(deadline=10.0, visibility_timeout=30)
    unit_ended = threading.Event()

    def give_up() -> None:
        give_ups.append(1)
        giving_up.set()
        assert go_on.wait(WAIT)

    def handler(batch: object) -> None:
        if winner == "deadline":
            clock.now = 10.0
            assert giving_up.wait(WAIT)
            go_on.set()

    def unit(arg: float | None) -> None:
        batch: Any = Batch()
        run = HandlerRun(handler, batch, watch, lambda: None, give_up, clock=clock)
        run.run()
        runs.append(run)
        clock.now = 10.0  # the deadline, once the handler has returned
        unit_ended.set()

    # When the slot's unit runs it (a unit given up on is not waited for: wait for it here)
    with Slots(1, clock) as slots:
        slots.start(unit, None)
    assert unit_ended.wait(WAIT)

    # Then exactly one of them settled the batch
    [run] = runs
    assert run.failure() is None
    if winner == "handler":
        assert (run.taken(), give_ups) == (False, [])
    else:
        assert (run.taken(), give_ups) == (True, [1])


def ended_while_under_way(watcher: Watcher, ticket: Ticket, go_on: threading.Event) -> bool:
    """The handler ends (disarms) while its ticket's action is held at `go_on`: the end waits
    for the action, then says whether the slot still owns the batch."""
    owned: list[bool] = []
    ending = threading.Thread(target=lambda: owned.append(watcher.disarm(ticket)))
    ending.start()
    assert owned == []
    go_on.set()
    ending.join(WAIT)
    [result] = owned
    return result
