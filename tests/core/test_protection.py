"""When ECS scale-in protection is taken, renewed and dropped, on a fake clock."""

from __future__ import annotations

import pytest

from sqsbatch._core.protection import ProtectionCall, ProtectionPlan, expires_minutes_for

TAKE = ProtectionCall(enabled=True, expires_minutes=16)
DROP = ProtectionCall(enabled=False)


def test_busy_takes_it_idle_drops_it_two_calls_a_busy_period() -> None:
    plan = ProtectionPlan(expires_minutes=16)
    assert plan.step(0.0, busy=False) is None  # idle from the start: nothing to do
    assert plan.step(1.0, busy=True) == TAKE
    assert plan.step(1.5, busy=True) is None  # one call at a time
    plan.done(2.0, ok=True)
    assert plan.held
    assert plan.step(3.0, busy=True) is None  # held: no call per batch
    assert plan.step(4.0, busy=False) == DROP
    plan.done(4.1, ok=True)
    assert not plan.held
    assert plan.step(5.0, busy=False) is None
    assert TAKE.body() == {"ProtectionEnabled": True, "ExpiresInMinutes": 16}
    assert DROP.body() == {"ProtectionEnabled": False}


def test_a_long_busy_period_renews_at_half_the_expiry() -> None:
    plan = ProtectionPlan(expires_minutes=16)
    assert plan.step(0.0, busy=True) == TAKE
    plan.done(0.5, ok=True)
    assert plan.step(479.9, busy=True) is None
    assert plan.step(480.0, busy=True) == TAKE  # 8 minutes after the take was sent
    plan.done(481.0, ok=True)
    assert plan.step(959.0, busy=True) is None
    assert plan.step(960.0, busy=True) == TAKE


def test_a_failed_call_is_tried_again_after_retry_seconds() -> None:
    plan = ProtectionPlan(expires_minutes=16, retry_seconds=30)
    assert plan.step(0.0, busy=True) == TAKE
    plan.done(3.0, ok=False)
    assert plan.step(32.9, busy=True) is None
    assert plan.step(33.0, busy=True) == TAKE
    plan.done(33.5, ok=True)
    assert plan.step(34.0, busy=False) == DROP
    plan.done(34.5, ok=False)
    assert plan.step(40.0, busy=False) is None
    assert plan.step(64.5, busy=False) == DROP


def test_a_failed_take_may_have_landed_so_idle_drops_it() -> None:
    plan = ProtectionPlan(expires_minutes=16, retry_seconds=30)
    plan.step(0.0, busy=True)
    plan.done(3.0, ok=False)  # timed out: the agent may have protected the task
    assert plan.step(40.0, busy=False) == DROP


def test_a_protection_past_its_expiry_needs_no_drop() -> None:
    plan = ProtectionPlan(expires_minutes=1)
    plan.step(0.0, busy=True)
    plan.done(0.1, ok=True)
    assert plan.step(60.0, busy=False) is None  # ECS dropped it at the expiry
    assert not plan.held


def test_a_late_answer_with_nothing_out_is_ignored() -> None:
    plan = ProtectionPlan(expires_minutes=16)
    plan.done(1.0, ok=True)
    assert not plan.held


@pytest.mark.parametrize(
    ("handler_timeout", "minutes"), [(900, 16), (1, 2), (59.5, 2), (43_200, 721), (10**9, 721)]
)
def test_the_expiry_covers_the_longest_batch(handler_timeout: float, minutes: int) -> None:
    assert expires_minutes_for(handler_timeout) == minutes


@pytest.mark.parametrize("minutes", [0, 2881])
def test_an_expiry_ecs_refuses_is_refused(minutes: int) -> None:
    with pytest.raises(ValueError, match="expires_minutes"):
        ProtectionPlan(expires_minutes=minutes)
