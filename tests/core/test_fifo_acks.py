"""FIFO order and explicit acks (issue 27, item 12), table-tested on the pure core.

Within a batch, a retried message makes the later messages of its group that the handler left
undecided retry too (SPEC 2.8). A later message the handler acked itself keeps its ack (SPEC
2.3: explicit acks hold; its work is done, and a retry would run it twice, not in order): the
core names it (`ledger.acks_out_of_order`, `Closing.out_of_order`) and the settle flows return a
WARNING for it. End to end on every front end: tests/front_ends/test_fifo_acks.py.
"""

from __future__ import annotations

import logging

import pytest

from sqsbatch._core.flows import settle, settle_for_lambda
from sqsbatch._core.ledger import (
    ActionKind,
    Decision,
    Delivered,
    Outcome,
    Verdict,
    acks_out_of_order,
)
from tests.core.test_flows import ScriptedSqs, batch_of, closed, drive
from tests.support.actions import actions_of

A, R, D = Verdict.ACK, Verdict.RETRY, Verdict.DEAD_LETTER


def decision(code: str) -> Decision:
    """`A`/`R`/`D`: the handler's own ack, retry or dead-letter; `a`/`r`: the outcome's."""
    verdict = {"a": A, "r": R, "d": D}[code.lower()]
    return Decision(verdict, None, explicit=code.isupper(), reason="x" if verdict is D else None)


@pytest.mark.parametrize(
    ("groups", "codes", "out_of_order", "kinds"),
    [
        # an explicit ack behind a retry of its group: it holds, and it is named
        ("aa", "RA", [1], "HE"),
        ("aaa", "RAa", [1], "HEH"),  # the undecided one behind is held back (retried)
        ("aaa", "RaA", [2], "HHE"),
        # behind a retry caused by the handler's failure (outcome's retry), the same
        ("aa", "rA", [1], "HE"),
        # other groups, and acks before the retry, are in order
        ("ab", "RA", [], "HE"),
        ("aa", "AR", [], "EH"),
        ("aba", "RAA", [2], "HEE"),
        # a dead-letter leaves its group: no order to break after it
        ("aa", "DA", [], "XE"),
        # no group (a standard queue's messages): nothing to say
        ("--", "RA", [], "HE"),
    ],
)
def test_an_explicit_ack_behind_a_retry_of_its_group_holds_and_is_named(
    groups: str, codes: str, out_of_order: list[int], kinds: str
) -> None:
    messages = [Delivered(1, 0.0, None if g == "-" else g) for g in groups]
    decisions = [decision(code) for code in codes]
    assert acks_out_of_order(messages, decisions) == out_of_order
    actions = actions_of(
        messages,
        decisions,
        fifo=True,
    )
    letters = {ActionKind.HIDE: "H", ActionKind.DELETE: "E", ActionKind.DEAD_LETTER: "X"}
    assert "".join(letters[action.kind] for action in actions) == kinds


@pytest.mark.parametrize("lambda_", [False, True])
def test_the_settle_flows_warn_of_it_once_per_batch(lambda_: bool) -> None:
    # Given a FIFO batch m0, m1, m2 of group g: m0 retried, m1 and m2 acked by the handler
    batch = batch_of(1, 1, 1, groups="ggg")
    batch.messages[0].retry()
    batch.messages[1].ack()
    batch.messages[2].ack()
    closing = closed(batch, Outcome.RETURNED, fifo=True, acks_free=lambda_)
    assert closing.out_of_order == [1, 2]
    # When it is settled, by a poller or under Lambda
    flow = settle_for_lambda(closing, batch) if lambda_ else settle(closing, batch)
    result, _ = drive(ScriptedSqs(), flow)
    # Then one WARNING names both; their acks hold (deleted), m0 is hidden for its retry
    assert result.lines == [
        (
            logging.WARNING,
            "orders: 2 messages acked by the handler after an earlier message of the same "
            "FIFO group was retried (m1, m2): the acks hold, so the group was handled out of "
            "order; retry the later messages too (or leave them undecided) to keep it",
        )
    ]
    assert closing.kinds == [ActionKind.HIDE, ActionKind.DELETE, ActionKind.DELETE]


def test_a_standard_queue_says_nothing() -> None:
    batch = batch_of(1, 1)
    batch.messages[0].retry()
    batch.messages[1].ack()
    assert closed(batch, Outcome.RETURNED).out_of_order == []
