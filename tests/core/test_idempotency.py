"""The idempotency guard's decisions (sqsbatch._core.idempotency), on numbers: no store, no
clock. Property-tested where a rule holds for every batch."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sqsbatch._core.idempotency import (
    CLAIMED,
    COMPLETED,
    MAX_CLAIM_SECONDS,
    Claims,
    Kind,
    Record,
    Verdict,
    after_batch,
    claim_deadline,
    decide,
    default_ttl,
    held_delay,
)

NOW = 1_800_000_000.0
DAY = 86_400
RUN, SKIP = Verdict(Kind.RUN), Verdict(Kind.SKIP)


def hold(seconds: int) -> Verdict:
    return Verdict(Kind.HOLD, seconds)


def test_claimed_keys_run_completed_ones_are_skipped_and_live_claims_hold() -> None:
    claims = Claims(
        won=frozenset({"a"}),
        blocked={
            "done": Record("done", COMPLETED, NOW + DAY, "x"),
            "busy": Record("busy", CLAIMED, NOW + 29.2, "other"),
        },
    )
    intake = decide(["a", "done", "busy"], claims, NOW, deadline=NOW + 30)
    assert intake.verdicts == (RUN, SKIP, hold(30))
    assert intake.release == ()
    assert [v.counts_attempt for v in intake.verdicts] == [True, True, False]


def test_a_second_copy_of_a_key_in_the_batch_waits_for_our_own_claim() -> None:
    intake = decide(["a", "a"], Claims(frozenset({"a"})), NOW, deadline=NOW + 45)
    assert intake.verdicts == (RUN, hold(45))


def test_a_blocker_that_lapsed_or_vanished_before_it_was_read_is_tried_again_next_second() -> None:
    lapsed = Record("b", CLAIMED, NOW - 1, "other")
    claims = Claims(frozenset(), {"b": lapsed, "c": None})
    assert decide(["b", "c"], claims, NOW, deadline=NOW + 30).verdicts == (hold(1), hold(1))


def test_held_delay_is_what_is_left_of_the_claim_between_one_second_and_12_hours() -> None:
    assert held_delay(NOW + 0.1, NOW) == 1
    assert held_delay(NOW + 10.5, NOW) == 11
    assert held_delay(NOW - 5, NOW) == 1
    assert held_delay(NOW + 2 * DAY, NOW) == MAX_CLAIM_SECONDS


def test_fifo_a_held_message_holds_the_rest_of_its_group_and_their_claims_go_back() -> None:
    busy = Record("k2", CLAIMED, NOW + 20, "other")
    done = Record("k4", COMPLETED, NOW + DAY, "x")
    claims = Claims(frozenset({"k1", "k3", "k5"}), {"k2": busy, "k4": done})
    keys = ["k1", "k2", "k3", "k4", "k5"]
    groups = ["g", "g", "g", "g", "h"]
    intake = decide(keys, claims, NOW, deadline=NOW + 30, groups=groups)
    # k3 is claimed but behind k2 in group g: held with k2's delay, its claim released; k4 is
    # a completed duplicate, acked without its handler, which changes no effect's order
    assert intake.verdicts == (RUN, hold(20), hold(20), SKIP, RUN)
    assert intake.release == ("k3",)


def test_after_the_batch_acked_runs_complete_and_every_other_run_releases() -> None:
    verdicts = [RUN, RUN, SKIP, hold(5), RUN]
    settle = after_batch(["a", "b", "c", "d", "e"], verdicts, [True, False, True, False, True])
    assert settle.complete == ("a", "e")
    assert settle.release == ("b",)


def test_a_claim_lasts_until_the_visibility_deadline_and_never_past_12_hours() -> None:
    received = NOW - 100
    assert claim_deadline(NOW, visibility_deadline=NOW + 30, received_at=received) == NOW + 30
    # a heartbeat pushed the deadline on: the claim follows, up to the ceiling from the receive
    later = NOW + 3600
    extended = claim_deadline(later, visibility_deadline=later + 30, received_at=received)
    assert extended == later + 30
    far = claim_deadline(NOW, visibility_deadline=NOW + DAY, received_at=received)
    assert far == received + MAX_CLAIM_SECONDS


def test_under_lambda_a_claim_lasts_the_invocations_remaining_time() -> None:
    deadline = claim_deadline(
        NOW, visibility_deadline=NOW + 900, received_at=NOW, lambda_deadline=NOW + 3.5
    )
    assert deadline == NOW + 3.5


def test_claim_seconds_overrides_every_other_source() -> None:
    deadline = claim_deadline(
        NOW,
        visibility_deadline=NOW + 30,
        received_at=NOW,
        lambda_deadline=NOW + 3,
        claim_seconds=120,
    )
    assert deadline == NOW + 120


def test_the_default_ttl_covers_the_queues_and_its_dlqs_retention_at_most_28_days() -> None:
    assert default_ttl(4 * DAY) == 4 * DAY
    assert default_ttl(4 * DAY, 14 * DAY) == 18 * DAY
    assert default_ttl(14 * DAY, 14 * DAY) == 28 * DAY
    assert default_ttl(None) == 28 * DAY  # unknown: the longest
    assert default_ttl(60, 60) == 120


KEYS = st.sampled_from(["a", "b", "c", "d", "e"])
STATES = st.sampled_from([CLAIMED, COMPLETED])
OFFSETS = st.floats(min_value=-100, max_value=100_000, allow_nan=False)


@st.composite
def batches(draw: st.DrawFn) -> tuple[list[str], Claims, list[str | None]]:
    keys = draw(st.lists(KEYS, min_size=1, max_size=10))
    won = draw(st.sets(st.sampled_from(sorted(set(keys)))))
    blocked: dict[str, Record | None] = {}
    for key in set(keys) - won:
        if draw(st.booleans()):
            blocked[key] = Record(key, draw(STATES), NOW + draw(OFFSETS), "other")
        else:
            blocked[key] = None
    groups = draw(st.lists(st.sampled_from([None, "g", "h"]), min_size=len(keys)))
    return keys, Claims(frozenset(won), blocked), groups[: len(keys)]


@given(batches())
def test_every_batch_gets_a_verdict_each_and_a_key_runs_at_most_once(
    batch: tuple[list[str], Claims, list[str | None]],
) -> None:
    keys, claims, groups = batch
    intake = decide(keys, claims, NOW, deadline=NOW + 30, groups=groups)
    assert len(intake.verdicts) == len(keys)
    ran = [key for key, v in zip(keys, intake.verdicts, strict=True) if v.kind is Kind.RUN]
    assert len(ran) == len(set(ran))
    assert set(ran) <= claims.won  # nothing runs without its claim
    assert set(ran).isdisjoint(intake.release)
    assert set(intake.release) <= claims.won
    for key, verdict in zip(keys, intake.verdicts, strict=True):
        assert verdict.kind is not Kind.HOLD or 1 <= verdict.delay <= MAX_CLAIM_SECONDS
        record = claims.blocked.get(key)
        if verdict.kind is Kind.SKIP:  # only a live completed record makes a duplicate
            assert record is not None and record.state == COMPLETED and record.blocks(NOW)


@given(batches())
def test_fifo_no_message_of_a_group_runs_behind_a_held_one(
    batch: tuple[list[str], Claims, list[str | None]],
) -> None:
    keys, claims, groups = batch
    intake = decide(keys, claims, NOW, deadline=NOW + 30, groups=groups)
    held: set[str] = set()
    for group, verdict in zip(groups, intake.verdicts, strict=True):
        if group is None:
            continue
        if verdict.kind is Kind.RUN:
            assert group not in held
        elif verdict.kind is Kind.HOLD:
            held.add(group)
    # every won key that did not run is released or is a later copy of a key that ran
    ran = {k for k, v in zip(keys, intake.verdicts, strict=True) if v.kind is Kind.RUN}
    assert claims.won - set(keys) == set()
    assert claims.won <= ran | set(intake.release)


@given(batches(), st.data())
def test_after_a_batch_each_run_key_is_completed_or_released_never_both(
    batch: tuple[list[str], Claims, list[str | None]], data: st.DataObject
) -> None:
    keys, claims, groups = batch
    intake = decide(keys, claims, NOW, deadline=NOW + 30, groups=groups)
    acked = data.draw(st.lists(st.booleans(), min_size=len(keys), max_size=len(keys)))
    settle = after_batch(keys, intake.verdicts, acked)
    ran = {k for k, v in zip(keys, intake.verdicts, strict=True) if v.kind is Kind.RUN}
    assert set(settle.complete) | set(settle.release) == ran
    assert not set(settle.complete) & set(settle.release)


@given(
    st.floats(min_value=0, max_value=50_000),
    st.floats(min_value=0, max_value=100_000),
)
def test_a_claim_never_outlives_the_12_hour_ceiling(age: float, visibility: float) -> None:
    received = NOW - age
    deadline = claim_deadline(NOW, visibility_deadline=NOW + visibility, received_at=received)
    assert NOW <= deadline <= max(NOW, received + MAX_CLAIM_SECONDS)
