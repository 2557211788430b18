"""Every decision of the pure core, table-tested on a fake clock (plain floats), without SQS.

What `tests/core/test_batching.py`, `tests/core/test_settlement.py`, `tests/core/test_calls.py` and
`tests/core/test_backoff.py` already pin down is not repeated here: this file covers the rest of the
batch window, batch assembly, receive visibility and idleness, heartbeat deadlines and the 12 h
ceiling, the handler's watch, receive backoff (the `receive` flow on a scripted door), how a
handler call ends, and the pause formulas.
"""

from __future__ import annotations

import logging
import math
from typing import NamedTuple

import pytest

from sqsbatch import ConsumerConfig, MessageBatch
from sqsbatch._core.batching import BatchWindow
from sqsbatch._core.calls import BatchRun, Entry
from sqsbatch._core.closing import failure_of, handler_end
from sqsbatch._core.delays import exponential_delay, pause_seconds, round_pause
from sqsbatch._core.envelope import decode
from sqsbatch._core.flows import Flow, Request
from sqsbatch._core.heartbeat import Extended, Watch, extended, heartbeat_entries, next_heartbeat
from sqsbatch._core.intake import Received, ReceiveErrors, receive
from sqsbatch._core.ledger import Ledger, Outcome, Verdict
from sqsbatch._core.message import _Delivery
from sqsbatch._core.receiving import Assembly, connections_for, is_idle, receive_visibility
from sqsbatch.errors import CredentialsError, QueueNotFound, SqsBatchError, SqsError
from sqsbatch.limits import SqsLimits

SMALL = SqsLimits(visibility_ceiling_seconds=100)
"""A 100 s ceiling: the 12 h rule with numbers that read at a glance."""


def delivery(
    index: int, *, received_at: float = 0.0, hidden_until: float = 30.0, at_ceiling: bool = False
) -> _Delivery:
    raw = {
        "MessageId": f"m{index}",
        "ReceiptHandle": f"r{index}",
        "Body": "hello",
        "Attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1700000000000"},
    }
    return _Delivery(decode(raw), f"r{index}", received_at, hidden_until, at_ceiling)


class Bounds:
    """A random source that always draws its lowest (or highest) value."""

    def __init__(self, *, high: bool) -> None:
        self.high = high

    def uniform(self, a: float, b: float) -> float:
        return b if self.high else a


LOW, HIGH = Bounds(high=False), Bounds(high=True)


# -- the batch window: what tests/core/test_batching.py leaves out ---------------------------------


class WindowCase(NamedTuple):
    name: str
    max_size: int
    timeout: float
    receives: list[tuple[int, int, float]]
    """(got, asked, now) of each receive so far."""
    now: float
    due: bool
    want: int
    wait: int


WINDOWS = [
    WindowCase("closed window waits the longest poll", 30, 5.0, [], 99.0, False, 10, 20),
    WindowCase("an empty receive opens nothing", 30, 5.0, [(0, 10, 1.0)], 99.0, False, 10, 20),
    WindowCase(
        "a long window still polls 20 s at most", 30, 60.0, [(3, 10, 0.0)], 15.0, False, 10, 20
    ),
    WindowCase("a long window's last 12.4 s", 30, 60.0, [(3, 10, 0.0)], 47.6, False, 10, 12),
    WindowCase(
        "a partial batch asks only for its room", 13, 5.0, [(10, 10, 0.0)], 1.0, False, 3, 4
    ),
    WindowCase("due exactly at the timeout", 30, 5.0, [(1, 10, 2.0)], 7.0, True, 10, 0),
    WindowCase("past the timeout: no negative wait", 30, 5.0, [(1, 10, 2.0)], 70.0, True, 10, 0),
    WindowCase("full before the timeout", 12, 5.0, [(10, 10, 0.0), (2, 2, 0.5)], 0.5, True, 0, 4),
    WindowCase("zero window, short first receive", 30, 0.0, [(4, 10, 0.0)], 0.0, True, 10, 0),
    WindowCase(
        "zero window, nothing yet: long-poll for one", 30, 0.0, [(0, 10, 0.0)], 0.0, False, 10, 20
    ),
    WindowCase(
        "zero window, full then empty", 30, 0.0, [(10, 10, 0.0), (0, 10, 0.0)], 0.0, True, 10, 0
    ),
]


@pytest.mark.parametrize("case", WINDOWS, ids=[case.name for case in WINDOWS])
def test_batch_window_table(case: WindowCase) -> None:
    # Given a window that saw these receives
    window: BatchWindow[int] = BatchWindow(max_size=case.max_size, timeout_seconds=case.timeout)
    for got, asked, at in case.receives:
        window.add(list(range(got)), asked=asked, now=at)
    # Then at `now` it is due (or not), asks for `want` and waits `wait` whole seconds
    now = case.now
    assert (window.is_due(now), window.want(), window.wait_seconds(now)) == (
        case.due,
        case.want,
        case.wait,
    )


def test_a_receive_past_the_batch_size_is_refused() -> None:
    window: BatchWindow[int] = BatchWindow(max_size=5, timeout_seconds=1.0)
    window.add([1, 2, 3], asked=5, now=0.0)
    with pytest.raises(ValueError, match="more messages than were asked for"):
        window.add([4, 5, 6], asked=2, now=0.0)
    assert window.items == [1, 2, 3]  # nothing of the refused receive was kept


def test_take_starts_a_clean_window_even_after_a_full_zero_window_receive() -> None:
    window: BatchWindow[int] = BatchWindow(max_size=10, timeout_seconds=0.0)
    window.add(list(range(10)), asked=10, now=3.0)
    assert window.take() == list(range(10))
    assert (window.opened_at, window.last_receive_full, window.remaining(50.0)) == (None, False, 0)
    window.add([7], asked=10, now=4.0)  # the next batch opens its own window
    assert window.opened_at == 4.0 and window.is_due(4.0)


def test_smaller_limits_shrink_what_a_receive_asks_and_waits() -> None:
    limits = SqsLimits(max_entries=4, max_wait_seconds=2)
    window: BatchWindow[int] = BatchWindow(max_size=9, timeout_seconds=30.0, limits=limits)
    assert (window.want(), window.wait_seconds(0.0)) == (4, 2)


# -- assembly: the receives that fill one batch ------------------------------------------------


class AssemblyCase(NamedTuple):
    name: str
    timeout: float
    idle_seconds: float | None
    receives: list[tuple[int, int, float]]
    now: float
    idle_for: float
    stopping: bool
    expected: tuple[int, int] | None
    """(MaxNumberOfMessages, WaitTimeSeconds) of the next receive; None: no receive."""


ASSEMBLIES = [
    AssemblyCase("fresh, run(): the longest poll", 5.0, None, [], 0.0, 0.0, False, (10, 20)),
    AssemblyCase(
        "fresh, until idle: capped by the idle time left", 5.0, 8.0, [], 0.0, 5.5, False, (10, 2)
    ),
    AssemblyCase("fresh, idle time used up: the run ends", 5.0, 8.0, [], 0.0, 8.0, False, None),
    AssemblyCase(
        "open window ignores the idle cap", 5.0, 8.0, [(2, 10, 10.0)], 11.0, 30.0, False, (8, 4)
    ),
    AssemblyCase("stopping, nothing yet: receive nothing", 5.0, None, [], 0.0, 0.0, True, None),
    AssemblyCase(
        "stopping, window open: fill it", 5.0, None, [(2, 10, 10.0)], 12.0, 0.0, True, (8, 3)
    ),
    AssemblyCase("due: the batch goes now", 5.0, None, [(2, 10, 10.0)], 15.0, 0.0, False, None),
    AssemblyCase("full: the batch goes now", 5.0, None, [(10, 10, 10.0)], 10.0, 0.0, False, None),
]


@pytest.mark.parametrize("case", ASSEMBLIES, ids=[case.name for case in ASSEMBLIES])
def test_next_receive_table(case: AssemblyCase) -> None:
    # Given a batch of up to 10 being assembled
    window: BatchWindow[_Delivery] = BatchWindow(max_size=10, timeout_seconds=case.timeout)
    assembly = Assembly(window, case.idle_seconds)
    for got, asked, at in case.receives:
        window.add([delivery(i) for i in range(got)], asked=asked, now=at)
    # Then the next receive asks for this much and waits this long, or there is none
    nxt = assembly.next_receive(case.now, case.idle_for, stopping=case.stopping)
    assert nxt == case.expected


# (id, received this time, surplus, stopping, assembly goes on)
ADDS = [
    ("a receive like any other", 3, False, False, True),
    ("an empty receive: wait on", 0, False, False, True),
    ("stopping: end after this receive", 3, False, True, False),
    ("surplus receiver, nothing received: it ends", 0, True, False, False),
    ("surplus receiver with messages: it fills its window", 3, True, False, True),
]


@pytest.mark.parametrize(
    ("got", "surplus", "stopping", "goes_on"), [a[1:] for a in ADDS], ids=[a[0] for a in ADDS]
)
def test_assembly_add_says_when_assembly_ends(
    got: int, surplus: bool, stopping: bool, goes_on: bool
) -> None:
    window: BatchWindow[_Delivery] = BatchWindow(max_size=10, timeout_seconds=5.0)
    assembly = Assembly(window, None, surplus=surplus)
    received = [delivery(i) for i in range(got)]
    assert assembly.add(received, asked=10, now=1.0, stopping=stopping) is goes_on
    assert window.items == received  # what came is kept either way: it is delivered


def test_a_surplus_receiver_keeps_a_window_it_opened_earlier() -> None:
    window: BatchWindow[_Delivery] = BatchWindow(max_size=10, timeout_seconds=5.0)
    assembly = Assembly(window, None)
    assert assembly.add([delivery(0)], asked=10, now=0.0, stopping=False)
    assembly.surplus = True  # the shell learns it is one receiver too many
    assert assembly.add([], asked=9, now=1.0, stopping=False)
    assert assembly.next_receive(1.0, 0.0, stopping=False) == (9, 4)


@pytest.mark.parametrize(
    ("visibility_timeout", "window_left", "limits", "hidden"),
    [
        (30, 0.0, None, 30),
        (30, 4.2, None, 35),  # the window's fraction of a second counts as a whole one
        (30, 5.0, None, 35),
        (43_200, 5.0, None, 43_200),  # never past the ceiling
        (43_190, 60.0, None, 43_200),
        (90, 20.0, SMALL, 100),
        (1, 0.001, None, 2),
    ],
    ids=["no window", "4.2 s left", "5 s left", "at the ceiling", "clamped", "small", "tiny"],
)
def test_receive_visibility_covers_the_window_then_the_timeout(
    visibility_timeout: int, window_left: float, limits: SqsLimits | None, hidden: int
) -> None:
    config = ConsumerConfig(visibility_timeout=visibility_timeout)
    assert receive_visibility(config, window_left, limits or SqsLimits()) == hidden


@pytest.mark.parametrize(
    ("idle_seconds", "idle_for", "idle"),
    [
        (None, 1e9, False),
        (5.0, 4.999, False),
        (5.0, 5.0, True),
        (5.0, 60.0, True),
        (0.0, 0.0, True),
    ],
    ids=["run() is never idle", "just short", "exactly", "long past", "zero"],
)
def test_is_idle(idle_seconds: float | None, idle_for: float, idle: bool) -> None:
    assert is_idle(idle_seconds, idle_for) is idle


@pytest.mark.parametrize(("concurrency", "connections"), [(1, 12), (10, 102), (250, 2502)])
def test_connections_for_a_poller(concurrency: int, connections: int) -> None:
    assert connections_for(ConsumerConfig(max_concurrency=concurrency)) == connections


# -- heartbeat deadlines and the 12 h ceiling ---------------------------------------------------

# (id, [(hidden_until, at_ceiling)], visibility timeout, next heartbeat)
NEXT_BEATS = [
    ("half a timeout before the only expiry", [(30.0, False)], 30, 15.0),
    ("the earliest expiry decides", [(130.0, False), (70.0, False)], 60, 40.0),
    ("messages at the ceiling are not waited for", [(10.0, True), (100.0, False)], 30, 85.0),
    ("nothing left to extend", [(10.0, True)], 30, math.inf),
    ("no messages", [], 30, math.inf),
]


@pytest.mark.parametrize(
    ("hidden", "visibility_timeout", "due"),
    [case[1:] for case in NEXT_BEATS],
    ids=[case[0] for case in NEXT_BEATS],
)
def test_next_heartbeat_table(
    hidden: list[tuple[float, bool]], visibility_timeout: int, due: float
) -> None:
    deliveries = [
        delivery(i, hidden_until=until, at_ceiling=ceiling)
        for i, (until, ceiling) in enumerate(hidden)
    ]
    assert next_heartbeat(deliveries, visibility_timeout) == due


class BeatCase(NamedTuple):
    name: str
    received_at: float
    hidden_until: float
    at_ceiling: bool
    now: float
    limits: SqsLimits | None
    seconds: int | None
    """The extension's VisibilityTimeout; None: no entry."""
    marked: bool
    """`at_ceiling` afterwards."""


BEATS = [
    BeatCase("more than half a timeout left: not yet", 0.0, 30.0, False, 14.9, None, None, False),
    BeatCase("half a timeout left: extend by a timeout", 0.0, 30.0, False, 15.0, None, 30, False),
    BeatCase("already expired: extend all the same", 0.0, 30.0, False, 31.0, None, 30, False),
    BeatCase("at the ceiling already: never again", 0.0, 30.0, True, 29.0, None, None, True),
    BeatCase("the ceiling clamps: the last extension", 0.0, 90.0, False, 80.0, SMALL, 20, True),
    BeatCase("the ceiling leaves a fraction: floor it", 0.5, 90.0, False, 80.0, SMALL, 20, True),
    BeatCase(
        "clamped to nothing useful: marked, not sent", 0.0, 100.0, False, 85.0, SMALL, None, True
    ),
    BeatCase("a real 12 h ceiling", 0.0, 43_190.0, False, 43_180.0, None, 20, True),
    BeatCase(
        "exactly at the ceiling: marked, not sent", 0.0, 100.0, False, 100.0, SMALL, None, True
    ),
]


@pytest.mark.parametrize("case", BEATS, ids=[case.name for case in BEATS])
def test_heartbeat_entries_table(case: BeatCase) -> None:
    # Given one message of a running batch, visibility timeout 30 s
    one = delivery(
        3, received_at=case.received_at, hidden_until=case.hidden_until, at_ceiling=case.at_ceiling
    )
    limits = case.limits or SqsLimits()
    # When the heartbeat looks at it at `now`
    entries = heartbeat_entries(
        [one], queue_url="q", now=case.now, visibility_timeout=30, limits=limits
    )
    seconds = case.seconds
    # Then it asks for this extension (or none), never past the ceiling, and marks the last one
    expected = (
        []
        if seconds is None
        else [
            Entry(
                f"0:{seconds}",
                "change_message_visibility_batch",
                "q",
                {"ReceiptHandle": "r3", "VisibilityTimeout": seconds},
            )
        ]
    )
    assert entries == expected
    assert one.at_ceiling is case.marked


def test_extensions_are_recorded_per_entry_and_gone_receipts_are_never_extended_again() -> None:
    # Given three messages due for a heartbeat at t=20 (visibility 30)
    deliveries = [delivery(i, hidden_until=30.0) for i in range(3)]
    run = BatchRun(heartbeat_entries(deliveries, queue_url="q", now=20.0, visibility_timeout=30))
    (call,) = run.next_calls()
    # When SQS accepts the first, says the second's receipt is gone, fails the third for good
    run.record(
        call,
        {
            "Successful": [{"Id": "0"}],
            "Failed": [
                {"Id": "1", "Code": "ReceiptHandleIsInvalid", "SenderFault": True},
                {"Id": "2", "Code": "AccessDenied", "SenderFault": True},
            ],
        },
    )
    # Then one expired receipt is counted and the refusal kept for the log; only the accepted
    # extension moves `hidden_until`, and neither failed one is asked for again this run
    assert extended(deliveries, run, now=20.0) == Extended(1, ["AccessDenied"])
    assert [(d.hidden_until, d.at_ceiling) for d in deliveries] == [
        (50.0, False),
        (30.0, True),
        (30.0, True),
    ]
    assert next_heartbeat(deliveries, 30) == 35.0


def test_no_extension_of_zero_seconds_is_sent_past_the_ceiling() -> None:
    # Given a message hidden until 90, received at 0 under a 100 s ceiling, and now 150
    limits = SqsLimits(visibility_ceiling_seconds=100)
    late = delivery(0, hidden_until=90.0)
    # When the heartbeat looks: a change to 0 s would show it at once, so none is sent
    assert (
        heartbeat_entries([late], queue_url="q", now=150.0, visibility_timeout=30, limits=limits)
        == []
    )
    assert late.at_ceiling


def test_watch_wakes_for_the_heartbeat_or_the_deadline_whichever_is_first() -> None:
    # Given a handler started at t=100 with handler_timeout 50 s, visibility 30 s
    watch = Watch.start(100.0, ConsumerConfig(handler_timeout=50, visibility_timeout=30))
    assert (watch.deadline, watch.visibility_timeout) == (150.0, 30)
    # Then it wakes half a timeout before the first expiry, or at the deadline
    assert watch.wake_at([delivery(0, hidden_until=130.0)]) == 115.0
    assert watch.wake_at([delivery(0, hidden_until=190.0)]) == 150.0
    assert watch.wake_at([delivery(0, hidden_until=130.0, at_ceiling=True)]) == 150.0
    assert watch.wake_at([]) == 150.0
    # And it has timed out from the deadline on, not a moment before
    assert [watch.timed_out(t) for t in (149.999, 150.0, 1e6)] == [False, True, True]


# -- receive backoff: the receive flow on a scripted door --------------------------------------


def door(flow: Flow[Received], answer: object) -> tuple[Received, list[Request]]:
    """Drive a receive flow: the one request gets `answer`, or has it thrown in (an error)."""
    step = next(flow)
    assert isinstance(step, Request), "a receive asks before it waits"
    try:
        flow.throw(answer) if isinstance(answer, SqsBatchError) else flow.send(answer)
    except StopIteration as stop:
        result: Received = stop.value
        return result, [step]
    raise AssertionError("a receive without early hops makes one request")


def receive_once(errors: ReceiveErrors, answer: object, random: Bounds = LOW) -> Received:
    flow = receive(
        "orders",
        "https://sqs/1/orders",
        asked=10,
        wait_seconds=20,
        visibility=35,
        received_at=7.0,
        wall_clock=lambda: 1_700_000_000.0,
        errors=errors,
        random=random,
    )
    received, requests = door(flow, answer)
    assert [r.op for r in requests] == ["receive_message"]
    assert requests[0].params["MaxNumberOfMessages"] == 10
    assert requests[0].params["WaitTimeSeconds"] == 20
    assert requests[0].params["VisibilityTimeout"] == 35
    return received


THROTTLED = SqsError(
    "SQS error ThrottlingException (orders): slow down", code="ThrottlingException"
)


@pytest.mark.parametrize(
    ("failures", "low", "high"),
    [(1, 0.1, 0.2), (2, 0.2, 0.4), (3, 0.4, 0.8), (7, 6.4, 12.8), (8, 10.0, 20.0), (40, 10, 20)],
    ids=["1st", "2nd", "3rd", "7th", "8th: capped", "40th: capped"],
)
def test_a_transient_receive_failure_pauses_longer_each_time_within_jitter_bounds(
    failures: int, low: float, high: float
) -> None:
    # Given `failures - 1` failed receives before this one
    for random, bound in ((LOW, low), (HIGH, high)):
        errors = ReceiveErrors(failures - 1)
        # When this receive is throttled too
        received = receive_once(errors, THROTTLED, random)
        # Then the pause is the exponential step with equal jitter: half of it to all of it
        assert received.pause == pytest.approx(bound)
        assert (received.deliveries, received.counts, received.fatal) == (
            [],
            {"receive_errors": 1},
            None,
        )
        assert errors.failures == failures


def test_a_transient_failure_is_logged_with_the_queue_and_the_pause() -> None:
    received = receive_once(ReceiveErrors(2), THROTTLED, HIGH)
    assert received.line == (
        logging.WARNING,
        "receive from orders failed (SQS error ThrottlingException (orders): slow down); "
        "retrying in 0.8 s",
    )


@pytest.mark.parametrize(
    "error",
    [
        QueueNotFound(
            "queue does not exist (orders)", code="AWS.SimpleQueueService.NonExistentQueue"
        ),
        CredentialsError("AWS refused the credentials", code="InvalidClientTokenId"),
        SqsError("SQS error AccessDenied (orders): no", code="AccessDenied"),
    ],
    ids=["queue gone", "credentials refused", "access denied"],
)
def test_a_permanent_receive_failure_is_fatal_and_not_a_backoff(error: SqsError) -> None:
    errors = ReceiveErrors(3)
    received = receive_once(errors, error)
    assert received.fatal is error
    assert (received.pause, received.counts, received.line) == (0.0, {"receive_errors": 1}, None)
    assert errors.failures == 3  # not counted as one more transient failure


def test_a_successful_receive_resets_the_failure_count() -> None:
    # Given three throttled receives in a row
    errors = ReceiveErrors()
    pauses = [receive_once(errors, THROTTLED, HIGH).pause for _ in range(3)]
    assert pauses == pytest.approx([0.2, 0.4, 0.8]) and errors.failures == 3
    # When a receive succeeds
    answer = {
        "Messages": [
            {
                "MessageId": "m1",
                "ReceiptHandle": "r1",
                "Body": "x",
                "Attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1"},
            }
        ]
    }
    received = receive_once(errors, answer)
    # Then the count starts over, and the next failure pauses as the first did
    assert errors.failures == 0
    assert (received.counts, received.pause, received.fatal) == ({"received": 1}, 0.0, None)
    [one] = received.deliveries
    assert (one.id, one.receipt_handle, one.received_at, one.hidden_until) == (
        "m1",
        "r1",
        7.0,
        42.0,
    )
    assert receive_once(errors, THROTTLED, HIGH).pause == pytest.approx(0.2)


# -- how a handler call ended ------------------------------------------------------------------


def batch_of(size: int) -> MessageBatch:
    return MessageBatch("orders", [delivery(i) for i in range(size)])


class EndCase(NamedTuple):
    name: str
    size: int
    timed_out: bool
    error: BaseException | None
    outcome: Outcome
    counts: dict[str, int]
    level: int | None
    line: str | None


HANDLER_ENDS = [
    EndCase("returned", 3, False, None, Outcome.RETURNED, {}, None, None),
    EndCase(
        "raised",
        1,
        False,
        KeyError("sku"),
        Outcome.RAISED,
        {"handler_errors": 1},
        logging.WARNING,
        "handler for orders raised KeyError('sku') on a batch of 1 message (ids m0)",
    ),
    EndCase(
        "raised on a big batch: five ids named",
        12,
        False,
        ValueError("bad"),
        Outcome.RAISED,
        {"handler_errors": 1},
        logging.WARNING,
        "handler for orders raised ValueError('bad') on a batch of 12 messages "
        "(ids m0, m1, m2, m3, m4 and 7 more)",
    ),
    EndCase(
        "timed out",
        5,
        True,
        None,
        Outcome.TIMED_OUT,
        {"handler_timeouts": 1},
        logging.ERROR,
        "handler for orders ran past 2.5 s on a batch of 5 messages (ids m0, m1, m2, m3, m4)",
    ),
    EndCase(
        "timed out, then raised: still a timeout",
        2,
        True,
        RuntimeError("late"),
        Outcome.TIMED_OUT,
        {"handler_timeouts": 1},
        logging.ERROR,
        "handler for orders ran past 2.5 s on a batch of 2 messages (ids m0, m1)",
    ),
]


@pytest.mark.parametrize("case", HANDLER_ENDS, ids=[case.name for case in HANDLER_ENDS])
def test_handler_end_table(case: EndCase) -> None:
    # Given a handler for a batch of `size` on a consumer with handler_timeout 2.5 s
    config = ConsumerConfig(handler_timeout=2.5)
    # When it returns, raises or runs past its deadline
    end = handler_end(batch_of(case.size), config, timed_out=case.timed_out, error=case.error)
    # Then the outcome, the counters and the log line (level, ids named) are these
    assert (end.outcome, end.counts) == (case.outcome, case.counts)
    assert end.error is (case.error if case.outcome is Outcome.RAISED else None)
    assert end.log == (None if case.level is None else (case.level, case.line))


@pytest.mark.parametrize(
    ("budget", "said"),
    [
        (None, "ran past 2.5 s on"),
        (0.42, "ran past 0.4 s (the function's time left) on"),
        (2.5, "ran past 2.5 s on"),  # the budget is handler_timeout: nothing else to say
    ],
)
def test_a_timeout_names_the_deadline_the_handler_had(budget: float | None, said: str) -> None:
    # Given a handler_timeout of 2.5 s, and under Lambda perhaps less of the function's time
    config = ConsumerConfig(handler_timeout=2.5)
    # When the handler runs past its budget
    end = handler_end(batch_of(1), config, timed_out=True, error=None, budget=budget)
    # Then the line names the deadline it really had
    assert end.log is not None and said in end.log[1]


@pytest.mark.parametrize(
    ("outcome", "error", "recorded"),
    [
        (Outcome.TIMED_OUT, None, ("HandlerTimeout", "the handler ran past handler_timeout=2.5 s")),
        (Outcome.RAISED, KeyError("sku"), ("KeyError", "'sku'")),
        (
            Outcome.RETURNED,
            None,
            ("GroupOrder", "held back behind a retried message of its FIFO group"),
        ),
    ],
    ids=["timed out", "raised", "returned (FIFO group order)"],
)
def test_failure_of_says_why_a_dead_lettered_copy_failed(
    outcome: Outcome, error: BaseException | None, recorded: tuple[str, str]
) -> None:
    assert failure_of(outcome, error, 2.5) == recorded


# -- the ledger's all-acked check: what a batch settled in bulk is decided by -------------------


@pytest.mark.parametrize(
    ("calls", "outcome", "acked"),
    [
        ([], Outcome.RETURNED, True),
        ([], Outcome.TIMED_OUT, False),
        ([], Outcome.RAISED, False),
        ([("batch", 0, Verdict.ACK, None)], Outcome.RAISED, True),
        ([("batch", 0, Verdict.RETRY, 9)], Outcome.RETURNED, False),
        ([("message", 1, Verdict.ACK, None)], Outcome.RETURNED, True),
        ([("message", 1, Verdict.ACK, None)], Outcome.RAISED, False),
        (
            [("message", 1, Verdict.ACK, None), ("batch", 0, Verdict.ACK, None)],
            Outcome.RAISED,
            True,
        ),
        ([("message", 1, Verdict.RETRY, None)], Outcome.RETURNED, False),
        ([("message", 1, Verdict.DEAD_LETTER, None)], Outcome.RETURNED, False),
        (
            [("message", 1, Verdict.ACK, None), ("batch", 0, Verdict.RETRY, 0)],
            Outcome.RETURNED,
            False,
        ),
        ([("message", i, Verdict.ACK, None) for i in range(3)], Outcome.TIMED_OUT, True),
        (
            [("message", 0, Verdict.ACK, None), ("message", 1, Verdict.ACK, None)],
            Outcome.TIMED_OUT,
            False,
        ),
    ],
    ids=[
        "returned",
        "timed out",
        "raised",
        "ack_all, raised",
        "retry_all(9)",
        "one ack, returned",
        "one ack, raised",
        "ack then ack_all, raised",
        "one retry",
        "one dead_letter",
        "one ack then retry_all",
        "each acked, timed out",
        "two of three acked, timed out",
    ],
)
def test_ledger_all_acked(
    calls: list[tuple[str, int, Verdict, int | None]], outcome: Outcome, acked: bool
) -> None:
    ledger = Ledger(3)
    for target, index, verdict, delay in calls:
        if target == "batch":
            ledger.on_batch(verdict, delay)
        else:
            ledger.on_message(index, verdict, delay, "why")
    assert ledger.all_acked(outcome) is acked
    # and it agrees with the decisions made one by one
    each = [decision.verdict is Verdict.ACK for decision in ledger.decisions(outcome)]
    assert all(each) is acked


# -- the pause formulas -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("failures", "base", "cap", "low", "high"),
    [
        (0, 0.2, 20.0, 0.1, 0.2),  # no failure yet counts as the first
        (1, 0.2, 20.0, 0.1, 0.2),
        (5, 0.2, 20.0, 1.6, 3.2),
        (10, 0.2, 20.0, 10.0, 20.0),
        (10_000, 0.2, 20.0, 10.0, 20.0),  # no overflow however long it fails
        (3, 1.0, 3.0, 1.5, 3.0),
    ],
)
def test_pause_seconds_bounds(
    failures: int, base: float, cap: float, low: float, high: float
) -> None:
    assert pause_seconds(failures, random=LOW, base=base, cap=cap) == pytest.approx(low)
    assert pause_seconds(failures, random=HIGH, base=base, cap=cap) == pytest.approx(high)


@pytest.mark.parametrize(
    ("attempts", "base", "factor", "random", "delay"),
    [
        (1, 30.0, 2.0, None, 30),
        (3, 30.0, 3.0, None, 270),
        (10**6, 30.0, 2.0, None, 3600),  # overflow: the cap
        (2, 10.0, 2.0, LOW, 20),
        (2, 10.0, 2.0, HIGH, 30),
        (50, 10.0, 2.0, HIGH, 3610),  # the jitter comes on top of the cap
        (1, 0.4, 1.0, None, 1),  # whole seconds, rounded up
        (1, 0.0, 2.0, HIGH, 0),
    ],
)
def test_exponential_delay_bounds(
    attempts: int, base: float, factor: float, random: Bounds | None, delay: int
) -> None:
    got = exponential_delay(attempts, base, factor=factor, max_seconds=3600.0, random=random)
    assert got == delay


@pytest.mark.parametrize(
    ("rounds", "pause"), [(0, 0.0), (1, 0.0), (2, 0.1), (3, 0.2), (4, 0.4), (6, 1.6)]
)
def test_round_pause(rounds: int, pause: float) -> None:
    assert round_pause(rounds) == pytest.approx(pause)
