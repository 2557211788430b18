"""Dead-lettering is visible (issue 27, item 6): a settled batch's dead letters become one
WARNING line with each reason and the first ids, on the pure core and through the settle flows
over a scripted client (the front ends log what the flows return:
tests/front_ends/test_dead_letter_logs.py)."""

from __future__ import annotations

import logging

import pytest

from sqsbatch import ConsumerConfig
from sqsbatch._core.closing import close_batch
from sqsbatch._core.context import QueueContext
from sqsbatch._core.flows import settle, settle_for_lambda
from sqsbatch._core.ledger import LastFailure, Outcome
from tests.core.test_flows import URL, ScriptedSqs, answer, batch_of, closed, drive


def warnings(lines: list[tuple[int, str]]) -> list[str]:
    return [text for level, text in lines if level == logging.WARNING]


@pytest.mark.parametrize(
    ("dead", "expected"),
    [
        ({0: None}, "retries_exhausted (m0)"),
        ({i: None for i in range(7)}, "retries_exhausted (m0, m1, m2, m3, m4 and 2 more)"),
        (
            {0: None, 1: "tenant gone", 2: None, 3: "tenant gone"},
            "retries_exhausted (m0, m2), requested 'tenant gone' (m1, m3)",
        ),
        (
            {0: "a", 1: "b", 2: "c", 3: "d", 4: "e"},
            "requested 'a' (m0), requested 'b' (m1), requested 'c' (m2) and 2 more reasons",
        ),
        ({0: "x" * 500}, f"requested '{'x' * 100}' (m0)"),
    ],
)
def test_one_warning_per_batch_names_each_reason_and_the_first_ids(
    dead: dict[int, str | None], expected: str
) -> None:
    # Given a batch of 8 whose handler raised on the last delivery of some (the rest acked), or
    # dead-lettered some on request
    batch = batch_of(*[4 if i in dead and dead[i] is None else 1 for i in range(8)])
    for index, message in enumerate(batch.messages):
        if dead.get(index) is not None:
            message.dead_letter(str(dead[index]))
        elif index not in dead:
            message.ack()
    # When it is settled (every call accepted)
    result, _ = drive(ScriptedSqs(), settle(closed(batch, Outcome.RAISED), batch))
    # Then one WARNING says where they went, why, and which
    count = len(dead)
    plural = "s" if count > 1 else ""
    assert warnings(result.lines) == [
        f"orders: {count} message{plural} dead-lettered to orders-dlq: {expected}"
    ]


def test_a_copy_sqs_refused_is_not_called_dead_lettered() -> None:
    batch = batch_of(4, 4)
    refuse = {"m1": ("InvalidMessageContents", True)}
    client = ScriptedSqs(send_message_batch=[answer(refuse)])
    result, _ = drive(client, settle(closed(batch, Outcome.RAISED), batch))
    assert warnings(result.lines) == [
        "orders: 1 message dead-lettered to orders-dlq: retries_exhausted (m0)"
    ]
    assert any(level == logging.ERROR and "m1" in text for level, text in result.lines)


def test_lambda_says_the_same() -> None:
    batch = batch_of(1, 4)
    batch.messages[0].dead_letter("tenant gone")
    flow = settle_for_lambda(closed(batch, Outcome.RAISED, acks_free=True), batch)
    result, _ = drive(ScriptedSqs(), flow)
    assert warnings(result.lines) == [
        "orders: 2 messages dead-lettered to orders-dlq: requested 'tenant gone' (m0), "
        "retries_exhausted (m1)"
    ]


@pytest.mark.parametrize(
    ("last_failure", "what"),
    [
        (LastFailure.DROP, "deleted (the queue has no RedrivePolicy and no dead_letter_queue)"),
        (LastFailure.LEAVE, "left for the queue's RedrivePolicy (no dead-letter queue is known)"),
    ],
)
def test_without_a_dlq_the_line_says_where_they_went(last_failure: LastFailure, what: str) -> None:
    batch = batch_of(4, 1)
    batch.messages[1].dead_letter("tenant gone")
    context = QueueContext("orders", URL, None, ConsumerConfig(), last_failure, False)
    closing = close_batch(batch, Outcome.RAISED, KeyError("x"), context, now=0.0, wall_now=0.0)
    result, _ = drive(ScriptedSqs(), settle(closing, batch))
    assert warnings(result.lines) == [
        f"orders: 2 messages {what}: retries_exhausted (m0), requested 'tenant gone' (m1)"
    ]


def test_an_acked_or_retried_batch_says_nothing() -> None:
    batch = batch_of(1, 1)
    batch.messages[0].retry()
    result, _ = drive(ScriptedSqs(), settle(closed(batch, Outcome.RETURNED), batch))
    assert result.lines == []
