"""The token bucket of `max_messages_per_second`, on a fake clock."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqsbatch._core.rate import Grant, TokenBucket


def waits(grant: Grant) -> float:
    """The wait of a grant of nothing."""
    assert grant.count == 0
    return grant.wait


def test_a_full_bucket_grants_a_burst_then_says_how_long_to_wait() -> None:
    bucket = TokenBucket(5, now=0.0)
    assert bucket.take(0.0, 10) == Grant(5)  # one second's worth, full at start
    assert waits(bucket.take(0.0, 10)) == pytest.approx(0.2)
    assert bucket.take(0.2, 10) == Grant(1)
    assert bucket.take(1.2, 10) == Grant(5)  # refilled, never past the burst
    assert bucket.take(100.0, 3) == Grant(3)


def test_an_idle_bucket_saves_up_one_burst_only() -> None:
    bucket = TokenBucket(4, now=0.0)
    assert bucket.take(0.0, 4).count == 4
    assert bucket.take(3600.0, 100).count == 4


def test_what_a_receive_did_not_return_goes_back() -> None:
    bucket = TokenBucket(10, now=0.0)
    assert bucket.take(0.0, 10).count == 10
    bucket.give_back(7, 0.0)  # SQS returned 3
    assert bucket.take(0.0, 10).count == 7
    bucket.give_back(50, 0.0)
    assert bucket.take(0.0, 100).count == 10  # never past the burst


def test_a_slow_rate_grants_one_at_a_time() -> None:
    bucket = TokenBucket(0.5, now=0.0)
    assert bucket.take(0.0, 10) == Grant(1)
    assert waits(bucket.take(0.0, 10)) == pytest.approx(2.0)
    assert waits(bucket.take(1.0, 10)) == pytest.approx(1.0)
    assert bucket.take(2.0, 10) == Grant(1)


def test_waiting_as_told_always_gets_a_message() -> None:
    bucket = TokenBucket(3, now=0.0)
    now = 0.0
    for _ in range(1000):
        grant = bucket.take(now, 1)
        if grant.count == 0:
            now += grant.wait
            assert bucket.take(now, 1).count == 1


def test_a_clock_that_steps_back_adds_nothing() -> None:
    bucket = TokenBucket(10, now=100.0)
    bucket.take(100.0, 10)
    assert bucket.take(50.0, 10).count == 0
    assert bucket.take(100.0, 10).count == 0


@pytest.mark.parametrize("rate", [0, -1, math.inf, math.nan])
def test_a_rate_must_be_positive(rate: float) -> None:
    with pytest.raises(ValueError, match="rate="):
        TokenBucket(rate, now=0.0)


steps = st.lists(
    st.tuples(
        st.floats(min_value=0, max_value=5),  # seconds since the last step
        st.integers(min_value=0, max_value=100),  # messages wanted
        st.floats(min_value=0, max_value=1),  # share of the grant SQS did not return
    ),
    max_size=60,
)


@given(st.floats(min_value=0.1, max_value=500), steps)
def test_never_more_is_received_than_the_rate_allows(
    rate: float, plan: list[tuple[float, int, float]]
) -> None:
    bucket = TokenBucket(rate, now=0.0)
    now = received = 0.0
    seen = [(0.0, 0.0)]  # (time, messages received by then)
    for elapsed, wanted, unused_share in plan:
        now += elapsed
        seen.append((now, received))  # a window may start just before this receive
        grant = bucket.take(now, wanted)
        assert 0 <= grant.count <= wanted
        assert grant.wait == 0 if grant.count or not wanted else grant.wait > 0
        unused = math.floor(grant.count * unused_share)
        bucket.give_back(unused, now)
        received += grant.count - unused
        # in every window, at most a burst plus the rate times the window's length
        for then, before in seen:
            assert received - before <= bucket.burst + rate * (now - then) + 1e-6
        seen.append((now, received))
