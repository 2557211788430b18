"""Settlement precedence (SPEC 2.3/2.4/2.6/2.7/2.8) and when settling may overlap the next
receive, table-driven, no I/O."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sqsbatch._core.closing import (
    OVERLAP_ROUND_TRIP_SECONDS,
    SLOW_SETTLE_SECONDS,
    Closing,
    SettleTimes,
    deletes_behind,
    settles_behind,
)
from sqsbatch._core.entries import TwoPhase
from sqsbatch._core.ledger import (
    ActionKind,
    Decision,
    Delivered,
    LastFailure,
    Ledger,
    Outcome,
    Verdict,
    visibility_allowed,
)
from sqsbatch.limits import SqsLimits
from tests.support.actions import actions_of

ACK, RETRY = Verdict.ACK, Verdict.RETRY
Step = Callable[[Ledger], object]


def msg(i: int, verdict: Verdict, delay: int | None = None) -> Step:
    return lambda ledger: ledger.on_message(i, verdict, delay)


def batch(verdict: Verdict, delay: int | None = None) -> Step:
    return lambda ledger: ledger.on_batch(verdict, delay)


# (name, calls in order, outcome, expected (verdict, delay) per message of a batch of 3)
PRECEDENCE = [
    ("returned, no calls: all acked", [], Outcome.RETURNED, [(ACK, None)] * 3),
    ("raised, no calls: all retried", [], Outcome.RAISED, [(RETRY, None)] * 3),
    ("timed out: like raised", [], Outcome.TIMED_OUT, [(RETRY, None)] * 3),
    (
        "explicit ack survives a raise",
        [msg(0, ACK)],
        Outcome.RAISED,
        [(ACK, None), (RETRY, None), (RETRY, None)],
    ),
    (
        "first call on a message wins (ack)",
        [msg(0, ACK), msg(0, RETRY)],
        Outcome.RETURNED,
        [(ACK, None)] * 3,
    ),
    (
        "first call on a message wins (retry)",
        [msg(0, RETRY, 5), msg(0, ACK)],
        Outcome.RETURNED,
        [(RETRY, 5), (ACK, None), (ACK, None)],
    ),
    (
        "ack(m) then retry_all keeps m acked",
        [msg(1, ACK), batch(RETRY, 9)],
        Outcome.RETURNED,
        [(RETRY, 9), (ACK, None), (RETRY, 9)],
    ),
    (
        "retry(m) then ack_all retries only m",
        [msg(1, RETRY), batch(ACK)],
        Outcome.RETURNED,
        [(ACK, None), (RETRY, None), (ACK, None)],
    ),
    (
        "ack_all then retry_all acks all",
        [batch(ACK), batch(RETRY)],
        Outcome.RAISED,
        [(ACK, None)] * 3,
    ),
    (
        "retry_all then ack_all retries all",
        [batch(RETRY, 4), batch(ACK)],
        Outcome.RETURNED,
        [(RETRY, 4)] * 3,
    ),
    (
        "per-message call after a batch call is ignored",
        [batch(RETRY), msg(0, ACK)],
        Outcome.RETURNED,
        [(RETRY, None)] * 3,
    ),
    (
        "retry then raise keeps the retry's delay",
        [msg(2, RETRY, 0)],
        Outcome.RAISED,
        [(RETRY, None), (RETRY, None), (RETRY, 0)],
    ),
]


@pytest.mark.parametrize(
    ("name", "calls", "outcome", "expected"), PRECEDENCE, ids=[p[0] for p in PRECEDENCE]
)
def test_precedence(
    name: str, calls: list[Step], outcome: Outcome, expected: list[tuple[Verdict, int | None]]
) -> None:
    ledger = Ledger(3)
    for call in calls:
        call(ledger)
    got = [(d.verdict, d.delay_seconds) for d in ledger.decisions(outcome)]
    assert got == expected


def test_ignored_calls_report_false_and_sealing_ignores_everything() -> None:
    ledger = Ledger(2)
    assert ledger.on_message(0, ACK, None) is True
    assert ledger.on_message(0, RETRY, None) is False
    assert ledger.undecided() == [1]
    ledger.seal()
    assert ledger.on_message(1, ACK, None) is False and ledger.on_batch(ACK, None) is False
    assert ledger.decisions(Outcome.RAISED)[1].verdict is RETRY


def plan(
    decisions: list[Decision], attempts: list[int], **kwargs: object
) -> list[tuple[ActionKind, int]]:
    messages = [Delivered(a, received_at=0.0) for a in attempts]
    actions = actions_of(messages, decisions, **{"retry_delay": 30, **kwargs})
    return [(a.kind, a.delay_seconds) for a in actions]


def test_delay_precedence_and_explicit_zero() -> None:
    decisions = [
        Decision(RETRY, 0),
        Decision(RETRY, None),
        Decision(RETRY, None, explicit=False),
        Decision(ACK),
    ]
    assert plan(decisions, [1, 1, 1, 1]) == [
        (ActionKind.HIDE, 0),  # an explicit 0 is a value: visible again at once
        (ActionKind.HIDE, 30),  # no delay: the consumer's retry_delay
        (ActionKind.HIDE, 30),
        (ActionKind.DELETE, 0),
    ]


@pytest.mark.parametrize(
    ("max_retries", "attempts", "kind"),
    [
        (3, 3, ActionKind.HIDE),
        (3, 4, ActionKind.DEAD_LETTER),
        (0, 1, ActionKind.DEAD_LETTER),
        (2, 7, ActionKind.DEAD_LETTER),
    ],
)
def test_dead_letter_on_delivery_max_retries_plus_one(
    max_retries: int, attempts: int, kind: ActionKind
) -> None:
    assert plan([Decision(RETRY)], [attempts], max_retries=max_retries)[0][0] is kind


def test_without_dlq_the_last_failure_drops_and_an_ack_is_still_an_ack() -> None:
    assert plan([Decision(RETRY), Decision(ACK)], [4, 4], last_failure=LastFailure.DROP) == [
        (ActionKind.DROP, 0),
        (ActionKind.DELETE, 0),
    ]


def test_when_the_dlq_is_unknown_the_last_failure_is_left_to_sqs_never_deleted() -> None:
    # Given no DLQ known and a RedrivePolicy that could not be read
    decisions = [Decision(RETRY, 9), Decision(RETRY, None, explicit=False), Decision(ACK)]
    # When the last deliveries fail
    got = plan(decisions, [4, 9, 4], last_failure=LastFailure.LEAVE)
    # Then they are hidden like retries (SQS's redrive moves them), the ack is still deleted
    assert got == [(ActionKind.LEAVE, 9), (ActionKind.LEAVE, 30), (ActionKind.DELETE, 0)]
    # and a delay past the 12 h ceiling is clamped, never re-sent (a re-send resets the count)
    limits = SqsLimits(visibility_ceiling_seconds=100)
    long = plan([Decision(RETRY, 500)], [4], last_failure=LastFailure.LEAVE, limits=limits)
    assert long == [(ActionKind.LEAVE, 100)]


def test_dead_letter_records_why() -> None:
    messages = [Delivered(4, 0.0), Delivered(4, 0.0)]
    actions = actions_of(
        messages,
        [Decision(RETRY), Decision(RETRY, explicit=False)],
        failure=("KeyError", "'x'"),
        wall_now=123.0,
    )
    assert [(a.error.type, a.error.at) for a in actions if a.error] == [
        ("Retry", 123.0),
        ("KeyError", 123.0),
    ]


def test_visibility_ceiling_is_counted_from_the_receive_and_clamped() -> None:
    limits = SqsLimits(visibility_ceiling_seconds=100)
    assert visibility_allowed(received_at=10.0, now=10.0, limits=limits) == 100
    assert visibility_allowed(received_at=10.0, now=70.5, limits=limits) == 39
    assert visibility_allowed(received_at=10.0, now=500.0, limits=limits) == 0
    # a retry delay past what is left of the ceiling is re-sent, not clamped (standard queues)
    got = plan([Decision(RETRY, 40), Decision(RETRY, 60)], [1, 1], now=50.0, limits=limits)
    assert got == [(ActionKind.HIDE, 40), (ActionKind.RESEND, 60)]


def test_fifo_retry_holds_back_the_rest_of_its_group() -> None:
    """A retry makes later implicitly acked messages of its group retry; explicit acks hold."""
    messages = [Delivered(1, 0.0, g) for g in ("a", "b", "a", "a", "b")]
    decisions = [
        Decision(ACK, explicit=False),
        Decision(ACK, explicit=False),
        Decision(RETRY, 7),
        Decision(ACK, explicit=False),
        Decision(ACK, explicit=False),
    ]
    explicit_ack = Decision(ACK)
    actions = actions_of(
        messages,
        [*decisions[:3], explicit_ack, decisions[4]],
        fifo=True,
    )
    assert [(a.kind, a.delay_seconds) for a in actions] == [
        (ActionKind.DELETE, 0),
        (ActionKind.DELETE, 0),
        (ActionKind.HIDE, 7),
        (ActionKind.DELETE, 0),
        (ActionKind.DELETE, 0),
    ]
    implicit = actions_of(
        messages,
        decisions,
        fifo=True,
    )
    assert [a.kind for a in implicit] == [
        ActionKind.DELETE,
        ActionKind.DELETE,
        ActionKind.HIDE,
        ActionKind.HIDE,
        ActionKind.DELETE,
    ]


def test_fifo_never_resends_long_delays() -> None:
    limits = SqsLimits(visibility_ceiling_seconds=100)
    assert plan([Decision(RETRY, 500)], [1], fifo=True, limits=limits) == [(ActionKind.HIDE, 100)]


FAST, SLOW = OVERLAP_ROUND_TRIP_SECONDS / 2, OVERLAP_ROUND_TRIP_SECONDS


@pytest.mark.parametrize(
    ("bulk_ack", "fifo", "free", "settle_seconds", "behind"),
    [
        (True, False, True, FAST, True),  # all acked, standard queue, asyncio: deletes go behind
        (True, False, False, SLOW, True),  # threads, once deletes wait on the network
        (True, False, False, FAST, False),  # threads on a fast endpoint: a thread costs more
        (True, True, True, SLOW, False),  # FIFO: a group's next messages wait for its deletes
        (False, False, True, SLOW, False),  # a retry, a dead-letter...: settled first
    ],
)
def test_only_an_all_acked_batch_on_a_standard_queue_settles_behind_the_next_receive(
    bulk_ack: bool, fifo: bool, free: bool, settle_seconds: float, behind: bool
) -> None:
    closing = Closing(TwoPhase([], [], {}), [ActionKind.DELETE] * 10, fifo, bulk_ack=bulk_ack)
    assert settles_behind(closing, free=free, settle_seconds=settle_seconds) is behind


@pytest.mark.parametrize("free", [True, False])
@pytest.mark.parametrize(("fifo", "behind"), [(False, True), (True, False)])
def test_while_sqs_is_slow_any_batch_settles_behind_the_next_receive_but_on_fifo(
    free: bool, fifo: bool, behind: bool
) -> None:
    """A late answer to a batch's visibility change would hold its slot for seconds."""
    closing = Closing(TwoPhase([], [], {}), [ActionKind.HIDE] * 10, fifo, bulk_ack=False)
    assert settles_behind(closing, free=free, settle_seconds=FAST, slow=True) is behind
    assert deletes_behind(closing, free=free, settle_seconds=FAST, slow=True) is False


def test_a_batch_that_could_not_be_closed_never_settles_behind() -> None:
    assert settles_behind(None, free=True, settle_seconds=SLOW) is False


def test_settle_times_keep_the_floor_of_recent_deletes_per_call_of_all_acked_batches() -> None:
    acked_25 = Closing(TwoPhase([], [], {}), [ActionKind.DELETE] * 25, bulk_ack=True)
    acked_10 = Closing(TwoPhase([], [], {}), [ActionKind.DELETE] * 10, bulk_ack=True)
    mixed = Closing(TwoPhase([], [], {}), [ActionKind.DELETE, ActionKind.HIDE])
    times = SettleTimes(window=4)
    assert times.seconds == 0.0  # nothing timed yet: no overlap for threads
    times.settled(acked_25, 0.030)  # three delete calls: 10 ms each
    assert times.seconds == pytest.approx(0.010)
    times.settled(mixed, 0.001)  # not deletes alone: not counted
    assert times.seconds == pytest.approx(0.010)
    # Calls slowed by busy threads (waits for the GIL) do not lift the floor
    for seconds in (0.002, 0.009, 0.005):
        times.settled(acked_10, seconds)
    assert times.seconds == pytest.approx(0.002)
    # Once the window holds only slow calls (a remote endpoint), the floor follows
    for seconds in (0.006, 0.007, 0.008, 0.009):
        times.settled(acked_10, seconds)
    assert times.seconds == pytest.approx(0.006)
    assert settles_behind(acked_10, free=False, settle_seconds=times.seconds)
    # And back down as soon as one recent call was fast
    times.settled(acked_10, 0.001)
    assert not settles_behind(acked_10, free=False, settle_seconds=times.seconds)


@pytest.mark.parametrize(
    ("bulk_ack", "fifo", "free", "settle_seconds", "slow", "deletes"),
    [
        (False, False, True, FAST, False, True),  # a retry on asyncio: phase one, then deletes
        (False, False, False, SLOW, False, True),  # threads, once deletes wait on the network
        (False, False, False, FAST, True, False),  # SQS slow to answer: the whole settle goes
        (False, False, True, FAST, True, False),  # behind (`settles_behind`), either flavour
        (False, False, False, FAST, False, False),  # threads on a fast endpoint: all in the slot
        (False, True, True, SLOW, True, False),  # FIFO: a group's next messages wait
        (True, False, True, SLOW, True, False),  # all acked: the whole settle goes behind
    ],
)
def test_a_batch_with_retries_sends_its_deletes_behind_the_next_receive_when_overlap_pays(  # noqa: PLR0917
    bulk_ack: bool, fifo: bool, free: bool, settle_seconds: float, slow: bool, deletes: bool
) -> None:
    closing = Closing(TwoPhase([], [], {}), [ActionKind.HIDE] * 10, fifo, bulk_ack=bulk_ack)
    found = deletes_behind(closing, free=free, settle_seconds=settle_seconds, slow=slow)
    assert found is deletes
    assert deletes_behind(None, free=free, settle_seconds=settle_seconds, slow=slow) is False


def test_threads_overlap_for_a_window_of_settles_after_a_slow_one() -> None:
    acked = Closing(TwoPhase([], [], {}), [ActionKind.DELETE] * 10, bulk_ack=True)
    mixed = Closing(TwoPhase([], [], {}), [ActionKind.DELETE, ActionKind.HIDE])
    times = SettleTimes(window=3)
    times.settled(acked, 0.001)
    assert not times.slow and not settles_behind(acked, free=False, settle_seconds=times.seconds)
    # A settle that waited on SQS (a retry after a fault, a late answer), of any batch
    times.settled(mixed, SLOW_SETTLE_SECONDS)
    assert times.slow
    assert settles_behind(acked, free=False, settle_seconds=times.seconds, slow=times.slow)
    # Stays so for the window's length of settles, then ends unless another was slow
    for _ in range(2):
        times.settled(acked, 0.001)
        assert times.slow
    times.settled(acked, 0.001)
    assert not times.slow
    assert times.seconds == pytest.approx(0.001)  # the floor is the deletes' alone, as before
