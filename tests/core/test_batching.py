"""Batch assembly with a fake clock: size or timeout, whichever comes first."""

from __future__ import annotations

from sqsbatch._core.batching import BatchWindow


def test_window_opens_at_the_first_message_and_is_never_reset() -> None:
    window: BatchWindow[int] = BatchWindow(max_size=30, timeout_seconds=5)
    assert not window.is_open and window.wait_seconds(0.0) == 20  # long poll for the first message
    window.add([], asked=10, now=1.0)
    assert not window.is_open and not window.is_due(100.0)  # an empty window never comes due
    window.add([1, 2], asked=10, now=10.0)
    assert window.opened_at == 10.0 and window.remaining(12.0) == 3.0
    window.add([3], asked=8, now=14.0)  # a later arrival does not reset the window
    assert window.opened_at == 10.0
    assert not window.is_due(14.9) and window.is_due(15.0)
    assert window.take() == [1, 2, 3] and not window.is_open


def test_full_batch_goes_at_once() -> None:
    window: BatchWindow[int] = BatchWindow(max_size=10, timeout_seconds=60)
    window.add(list(range(10)), asked=10, now=0.0)
    assert window.is_full and window.is_due(0.0)


def test_receives_ask_for_ten_at_most_and_never_past_the_size() -> None:
    window: BatchWindow[int] = BatchWindow(max_size=25, timeout_seconds=5)
    asks = []
    while not window.is_full:
        asks.append(window.want())
        window.add(list(range(window.want())), asked=window.want(), now=0.0)
    assert asks == [10, 10, 5] and len(window.take()) == 25


def test_wait_never_exceeds_what_is_left_of_the_window() -> None:
    window: BatchWindow[int] = BatchWindow(max_size=30, timeout_seconds=5)
    window.add([1], asked=10, now=100.0)
    assert window.wait_seconds(100.0) == 5
    assert window.wait_seconds(102.5) == 2  # whole seconds: down while a second is left...
    assert window.wait_seconds(104.5) == 1  # ...and the last fraction up
    assert window.wait_seconds(105.0) == 0
    assert window.wait_seconds(101.0, cap=3) == 4  # the idle cap only bounds the first poll
    closed: BatchWindow[int] = BatchWindow(max_size=30, timeout_seconds=5)
    assert closed.wait_seconds(0.0, cap=2.2) == 2 and closed.wait_seconds(0.0, cap=-1) == 0


def test_zero_timeout_takes_what_is_there_right_now() -> None:
    window: BatchWindow[int] = BatchWindow(max_size=100, timeout_seconds=0)
    window.add(list(range(10)), asked=10, now=0.0)
    assert not window.is_due(0.0)  # a full receive: more is probably there right now
    assert window.wait_seconds(0.0) == 0  # ...so ask again without waiting
    window.add([10, 11], asked=10, now=0.0)
    assert window.is_due(0.0) and len(window.take()) == 12
