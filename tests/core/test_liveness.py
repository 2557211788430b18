"""The decisions behind the health file and the stall watchdog, on a fake clock."""

from __future__ import annotations

import pytest

from sqsbatch import MessageBatch
from sqsbatch._core.liveness import (
    BUSY_TOUCH_SECONDS,
    STORE_CALL_SECONDS,
    Liveness,
    Pulse,
    all_busy,
    default_stall_seconds,
)


def test_the_default_stall_is_three_long_polls_plus_the_visibility_timeout() -> None:
    assert default_stall_seconds(20, 30) == 90
    assert default_stall_seconds(1, 5) == 8
    assert default_stall_seconds(1, 2, guarded=True) == 5 + STORE_CALL_SECONDS  # claims wait too


@pytest.mark.parametrize(
    ("started", "slots", "busy"),
    [
        ([], 1, False),  # nothing runs
        ([95.0], 1, True),  # the only slot runs a handler inside its timeout
        ([95.0], 2, False),  # one slot free: it should be receiving
        ([95.0, 99.0], 2, True),
        ([80.0], 1, False),  # 20 s into a 10 s handler_timeout: not evidence of life
        ([95.0, 80.0], 2, False),  # one slot is stuck past its timeout
        ([90.0 + 1e-9], 1, True),  # just inside
        ([90.0], 1, False),  # exactly at the timeout: out
    ],
)
def test_all_busy_means_every_slot_runs_a_handler_inside_its_timeout(
    started: list[float], slots: int, busy: bool
) -> None:
    assert all_busy(100.0, started, slots=slots, handler_timeout=10.0) is busy


def test_a_completed_receive_touches_every_time_and_resets_the_stall() -> None:
    given = Liveness(stall_seconds=5.0, alive_at=0.0)
    assert given.received(4.0) == Pulse(touch=True)
    assert given.received(4.1) == Pulse(touch=True)  # every receive, however close
    assert given.look(9.0, busy=False, stopping=False) == Pulse(touch=False)
    assert given.look(9.1, busy=False, stopping=False) == Pulse(touch=False, stalled_for=5.0)


@pytest.mark.parametrize(
    ("looks", "touches"),
    [
        # (time, busy) of each look -> which looks touch
        ([(0.5, True), (1.0, True), (1.4, True), (1.5, True)], [True, False, False, True]),
        ([(0.5, False), (1.0, False)], [False, False]),
        ([(0.5, True), (0.6, False), (3.0, True)], [True, False, True]),
    ],
)
def test_busy_touches_at_most_once_a_second(
    looks: list[tuple[float, bool]], touches: list[bool]
) -> None:
    assert BUSY_TOUCH_SECONDS == 1.0
    given = Liveness(stall_seconds=None, alive_at=0.0)
    seen = [given.look(now, busy=busy, stopping=False).touch for now, busy in looks]
    assert seen == touches


def test_busy_is_alive_so_a_full_poller_never_stalls() -> None:
    given = Liveness(stall_seconds=2.0, alive_at=0.0)
    for tenth in range(1, 100):
        pulse = given.look(tenth / 10, busy=True, stopping=False)
        assert pulse.stalled_for is None
    pulse = given.look(9.9 + 2.0, busy=False, stopping=False)  # then idle slots, no receive
    assert pulse.stalled_for == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("stall_seconds", "now", "stopping", "stalled_for"),
    [
        (None, 1e9, False, None),  # no watchdog
        (10.0, 9.99, False, None),
        (10.0, 10.0, False, 10.0),
        (10.0, 50.0, False, 50.0),
        (10.0, 50.0, True, None),  # a stopping loop receives nothing by design
    ],
)
def test_stalled_once_neither_receiving_nor_busy_for_stall_seconds(
    stall_seconds: float | None, now: float, stopping: bool, stalled_for: float | None
) -> None:
    given = Liveness(stall_seconds=stall_seconds, alive_at=0.0)
    assert given.look(now, busy=False, stopping=stopping).stalled_for == stalled_for


def test_the_stall_message_names_the_queue_the_silence_and_the_setting() -> None:
    given = Liveness(stall_seconds=90.0, alive_at=0.0)
    line = given.stall_message("orders", 93.25)
    assert "orders" in line and "93.2 s" in line and "stall_seconds=90" in line
    assert "\n" not in line


def test_a_guarded_pollers_default_watchdog_waits_for_its_claims_too() -> None:
    from sqsbatch import AsyncConsumer, Consumer, ConsumerConfig  # noqa: PLC0415
    from sqsbatch.idempotency import MemoryStore  # noqa: PLC0415

    config = ConsumerConfig(visibility_timeout=2)
    plain = Consumer("q", _handler, config, idempotency=None)
    guarded = Consumer("q", _handler, config, idempotency=MemoryStore())
    assert guarded.stall_seconds == plain.stall_seconds + STORE_CALL_SECONDS
    plain_async = AsyncConsumer("q", _async_handler, config, idempotency=None)
    guarded_async = AsyncConsumer("q", _async_handler, config, idempotency=MemoryStore())
    assert guarded_async.stall_seconds == plain_async.stall_seconds + STORE_CALL_SECONDS


def _handler(batch: MessageBatch) -> None:
    return None


async def _async_handler(batch: MessageBatch) -> None:
    return None
