"""A queue's pause tags: what is written, what a reader concludes at `now`, durations."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqsbatch._core.pause_state import (
    REASON_TAG,
    UNTIL_TAG,
    PauseState,
    next_check,
    parse_duration,
    pause_tags,
    read_pause,
)

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def test_a_timed_pause_is_paused_until_its_time_then_not() -> None:
    tags = pause_tags(NOW + 90, "db down")
    assert tags == {UNTIL_TAG: "2027-01-15T08:01:30Z", REASON_TAG: "db down"}
    assert read_pause(tags, NOW) == PauseState(paused=True, until=NOW + 90, reason="db down")
    assert read_pause(tags, NOW + 89.9).paused
    assert read_pause(tags, NOW + 90) == PauseState(paused=False)  # expired: not paused
    assert read_pause(tags, NOW + 10_000) == PauseState(paused=False)


def test_an_indefinite_pause_lasts_and_no_tag_is_no_pause() -> None:
    tags = pause_tags(None, None)
    assert tags == {UNTIL_TAG: "indefinitely", REASON_TAG: ""}
    state = read_pause(tags, NOW + 10**9)
    assert state == PauseState(paused=True, until=None, reason=None)
    assert state.until_text() == "indefinitely"
    assert read_pause({}, NOW) == PauseState(paused=False)
    assert read_pause({REASON_TAG: "left over"}, NOW) == PauseState(paused=False)


def test_an_unreadable_until_is_read_as_paused_and_named() -> None:
    state = read_pause({UNTIL_TAG: "tomorrow"}, NOW)
    assert state.paused and state.until is None
    assert state.problem is not None and "'tomorrow'" in state.problem


@given(st.integers(min_value=1, max_value=1_209_600), st.floats(min_value=0, max_value=1e6))
def test_a_pause_written_is_read_back_until_it_ends(seconds: int, later: float) -> None:
    until = NOW + seconds
    state = read_pause(pause_tags(until, "x"), NOW + later)
    assert state.paused == (NOW + later < until)
    if state.paused:
        assert state.until == until


@pytest.mark.parametrize(
    ("reason", "words"),
    [("a" * 257, "257 characters"), ("db down; retry", "';'"), ("oops\x00", "'\\x00'")],
)
def test_a_reason_no_tag_can_hold_is_one_line(reason: str, words: str) -> None:
    with pytest.raises(ValueError, match="reason") as caught:
        pause_tags(None, reason)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_the_next_check_comes_at_the_interval_or_when_the_pause_ends() -> None:
    assert next_check(PauseState(paused=False), NOW, 60) == NOW + 60
    assert next_check(PauseState(paused=True), NOW, 60) == NOW + 60
    assert next_check(PauseState(paused=True, until=NOW + 5), NOW, 60) == NOW + 5
    assert next_check(PauseState(paused=True, until=NOW + 500), NOW, 60) == NOW + 60


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("15m", 900), ("2h", 7200), ("1d", 86_400), ("1h30m", 5400), ("45", 45),
     (" 2H ", 7200), ("14d", 1_209_600)],
)  # fmt: skip
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0s", "15x", "m", "1.5h", "-5m", "15d", "2h 30m"])
def test_bad_durations_are_one_line(text: str) -> None:
    with pytest.raises(ValueError, match="duration") as caught:
        parse_duration(text)
    assert "\n" not in str(caught.value)
