"""What goes in the DLQ and why (issue 12), table-tested on the pure core, without SQS.

`dead_letter(reason)` / `dead_letter_all(reason)` precedence, what each queue kind makes of a
requested dead-lettering, the history a dead-letter copy carries (`message.deaths`), and the
settle flows' calls for it (send before delete; under Lambda the record is left out of
`batchItemFailures` only when SQS accepted the copy).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from sqsbatch._core.closing import Closing
from sqsbatch._core.entries import TwoPhase, dead_envelope
from sqsbatch._core.envelope import ATTRIBUTE, MAX_DEATHS, Death, Envelope, ErrorInfo, decode
from sqsbatch._core.flows import settle, settle_for_lambda
from sqsbatch._core.ledger import (
    Action,
    ActionKind,
    Decision,
    Delivered,
    LastFailure,
    Ledger,
    Outcome,
    Verdict,
)
from sqsbatch._core.notices import dead_letter_line
from sqsbatch.errors import MessageError
from tests.core.test_flows import (
    WALL,
    ScriptedSqs,
    answer,
    batch_of,
    closed,
    counts,
    drive,
    raw,
)
from tests.support.actions import actions_of

ACK, RETRY, DEAD = Verdict.ACK, Verdict.RETRY, Verdict.DEAD_LETTER


# -- precedence ----------------------------------------------------------------------------------

# (name, calls: (index or None for the batch, verdict, reason), outcome, expected verdicts)
CALLS: list[tuple[str, list[tuple[int | None, Verdict, str | None]], Outcome, list[Verdict]]] = [
    ("dead_letter(m) holds on return", [(0, DEAD, "x")], Outcome.RETURNED, [DEAD, ACK, ACK]),
    ("dead_letter(m) holds on a raise", [(0, DEAD, "x")], Outcome.RAISED, [DEAD, RETRY, RETRY]),
    ("ack(m) then dead_letter(m): acked", [(0, ACK, None), (0, DEAD, "x")], Outcome.RETURNED,
     [ACK, ACK, ACK]),
    ("retry(m) then dead_letter(m): retried", [(0, RETRY, None), (0, DEAD, "x")],
     Outcome.RETURNED, [RETRY, ACK, ACK]),
    ("dead_letter(m) then ack(m): dead-lettered", [(0, DEAD, "x"), (0, ACK, None)],
     Outcome.RETURNED, [DEAD, ACK, ACK]),
    ("ack(m) then dead_letter_all: the rest", [(1, ACK, None), (None, DEAD, "x")],
     Outcome.RETURNED, [DEAD, ACK, DEAD]),
    ("dead_letter_all then retry_all: dead-lettered", [(None, DEAD, "x"), (None, RETRY, None)],
     Outcome.RAISED, [DEAD, DEAD, DEAD]),
    ("ack_all then dead_letter_all: acked", [(None, ACK, None), (None, DEAD, "x")],
     Outcome.RAISED, [ACK, ACK, ACK]),
    ("dead_letter_all then dead_letter(m): ignored", [(None, DEAD, "a"), (0, RETRY, None)],
     Outcome.RETURNED, [DEAD, DEAD, DEAD]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "calls", "outcome", "expected"), CALLS, ids=[c[0] for c in CALLS])
def test_dead_letter_precedence(
    name: str,
    calls: list[tuple[int | None, Verdict, str | None]],
    outcome: Outcome,
    expected: list[Verdict],
) -> None:
    ledger = Ledger(3)
    for index, verdict, reason in calls:
        if index is None:
            ledger.on_batch(verdict, None, reason)
        else:
            ledger.on_message(index, verdict, None, reason)
    assert [d.verdict for d in ledger.decisions(outcome)] == expected


def test_message_and_batch_calls_go_through_the_ledger_and_warn_when_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    batch = batch_of(1, 1)
    batch.messages[0].ack()
    batch.messages[0].dead_letter("too late")
    batch.dead_letter_all("the rest")
    decisions = batch._ledger.decisions(Outcome.RETURNED)
    assert [(d.verdict, d.reason) for d in decisions] == [(ACK, None), (DEAD, "the rest")]
    assert "ignored dead_letter() on message m0" in caplog.text


@pytest.mark.parametrize(
    ("reason", "error"),
    [
        ("", "reason of 0 characters is invalid: must be 1..1024 characters, not blank"),
        ("   ", "reason of 3 characters is invalid: must be 1..1024 characters, not blank"),
        ("x" * 1025, "reason of 1025 characters is invalid: must be 1..1024 characters"),
        (None, "reason=None is invalid: must be a str of 1..1024"),
        (7, "reason=7 is invalid: must be a str of 1..1024"),
    ],
)
def test_a_bad_reason_is_one_clear_error_and_settles_nothing(reason: Any, error: str) -> None:
    batch = batch_of(1, 1)
    for call in (batch.messages[0].dead_letter, batch.dead_letter_all):
        with pytest.raises(MessageError) as raised:
            call(reason)
        assert error in str(raised.value) and "\n" not in str(raised.value)
    # nothing was recorded: the message is still free for a later call
    batch.messages[0].ack()
    assert batch._ledger.decisions(Outcome.RAISED)[0].verdict is ACK


def test_a_reason_of_1024_characters_is_accepted() -> None:
    batch = batch_of(1)
    batch.messages[0].dead_letter("x" * 1024)
    assert batch._ledger.decisions(Outcome.RETURNED)[0].reason == "x" * 1024


# -- actions -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("last_failure", "kind", "delay"),
    [
        (LastFailure.DEAD_LETTER, ActionKind.DEAD_LETTER, 0),
        (LastFailure.DROP, ActionKind.DROP, 0),
        (LastFailure.LEAVE, ActionKind.LEAVE, 30),  # hidden like a retry; SQS's redrive moves it
    ],
)
def test_dead_letter_whatever_the_attempts_as_the_queue_allows(
    last_failure: LastFailure, kind: ActionKind, delay: int
) -> None:
    actions = actions_of(
        [Delivered(1, 0.0)],
        [Decision(DEAD, reason="tenant gone")],
        retry_delay=30,
        last_failure=last_failure,
    )
    assert actions == [Action(0, kind, delay, reason="tenant gone")]


def test_on_fifo_a_dead_lettered_message_does_not_hold_back_its_group() -> None:
    # Given a FIFO group a: m0 dead-lettered, m1 undecided; group b: m2 retried, m3 undecided
    messages = [Delivered(1, 0.0, g) for g in "aabb"]
    decisions = [
        Decision(DEAD, reason="poison"),
        Decision(ACK, explicit=False),
        Decision(RETRY, 5),
        Decision(ACK, explicit=False),
    ]
    actions = actions_of(
        messages,
        decisions,
        fifo=True,
    )
    # Then the rest of a goes on as decided; a retry still holds the rest of b
    kinds = [a.kind for a in actions]
    assert kinds == [ActionKind.DEAD_LETTER, ActionKind.DELETE, ActionKind.HIDE, ActionKind.HIDE]


# -- the history ---------------------------------------------------------------------------------


def received(**envelope: Any) -> Any:
    return decode(raw(0, attempts=2, **envelope))


def test_a_dead_letter_copy_appends_its_death_and_restarts_attempts() -> None:
    message = received(id="orig", timestamp=1.0, base_attempts=1)
    action = Action(0, ActionKind.DEAD_LETTER, reason="tenant gone")
    envelope = dead_envelope(message, action, "orders", WALL)
    assert envelope.deaths == (Death("tenant gone", "orders", 3, WALL),)
    assert (envelope.id, envelope.base_attempts, envelope.source_queue) == ("orig", 0, "orders")
    assert envelope.error is None


def test_a_death_before_the_handler_costs_no_attempt() -> None:
    message = received()
    action = Action(0, ActionKind.DEAD_LETTER, reason="expired", costs_attempt=False)
    assert dead_envelope(message, action, "orders", WALL).deaths[0].attempts == 1


def test_the_history_keeps_the_last_ten_oldest_first_through_the_attribute() -> None:
    past = tuple(Death(f"r{i}", "orders", i, float(i)) for i in range(MAX_DEATHS))
    message = received(id="orig", deaths=past)
    action = Action(0, ActionKind.DEAD_LETTER, reason="again")
    envelope = dead_envelope(message, action, "billing", WALL)
    assert [d.reason for d in envelope.deaths] == [f"r{i}" for i in range(1, 10)] + ["again"]
    again = Envelope.from_attribute(envelope.to_attribute()["StringValue"])
    assert again is not None and again.deaths == envelope.deaths
    assert again.deaths[-1].when.isoformat() == "2023-11-14T22:13:20+00:00"


def test_a_handler_error_is_in_the_death_and_in_err_for_older_readers() -> None:
    message = received()
    action = Action(0, ActionKind.DEAD_LETTER, error=_error(), reason="retries_exhausted")
    envelope = dead_envelope(message, action, "orders", WALL)
    text = envelope.to_attribute()["StringValue"]
    assert json.loads(text)["err"] == {"type": "KeyError", "message": "'x'", "at": WALL}
    again = Envelope.from_attribute(text)
    assert again is not None and again.error == envelope.error
    assert again.deaths[0].error_type == "KeyError"


def _error() -> ErrorInfo:
    return ErrorInfo("KeyError", "'x'", WALL)


@pytest.mark.parametrize(
    "dh",
    [[{"r": "x"}], "nope", [{"r": "x", "q": "o", "a": "z", "t": 1}], [{"r": 1, "q": 2, "a": 1}]],
)
def test_a_corrupt_history_reads_as_a_foreign_message(dh: Any) -> None:
    assert Envelope.from_attribute(json.dumps({"v": 1, "ct": "json", "dh": dh})) is None


def test_message_deaths_and_message_attribute_stay_one() -> None:
    past = (Death("expired", "orders", 0, 5.0),)
    batch_deaths = decode(raw(0, deaths=past))
    assert batch_deaths.envelope.deaths == past
    assert ATTRIBUTE not in batch_deaths.attributes


# -- the settle flows ----------------------------------------------------------------------------


def test_settle_sends_the_requested_copy_before_deleting_it() -> None:
    batch = batch_of(1, 1)
    batch.messages[0].dead_letter("tenant gone")
    client = ScriptedSqs()
    result, _ = drive(client, settle(closed(batch, Outcome.RETURNED), batch))
    assert client.asked() == [
        ("send_message_batch", "orders-dlq", ["m0"]),
        ("delete_message_batch", "orders", ["m1", "m0"]),  # the acked, then the copied
    ]
    assert result.counts == counts(acked=1, dead_lettered=1, reasons={"requested": 1})
    sent = client.calls[0][1]["Entries"][0]["MessageAttributes"][ATTRIBUTE]["StringValue"]
    assert json.loads(sent)["dh"] == [{"r": "tenant gone", "q": "orders", "a": 1, "t": WALL}]


@pytest.mark.parametrize(("refused", "listed"), [(False, []), (True, [0])])
def test_lambda_leaves_a_record_out_only_when_sqs_accepted_its_copy(
    refused: bool, listed: list[int]
) -> None:
    batch = batch_of(1, 1)
    batch.messages[0].dead_letter("tenant gone")
    refuse = {"m0": ("InvalidMessageContents", True)} if refused else {}
    client = ScriptedSqs(send_message_batch=[answer(refuse)])
    result, _ = drive(
        client, settle_for_lambda(closed(batch, Outcome.RETURNED, acks_free=True), batch)
    )
    assert client.asked() == [("send_message_batch", "orders-dlq", ["m0"])]  # Lambda deletes
    assert result.listed == listed


def test_without_a_dlq_a_requested_dead_letter_is_deleted_and_logged_with_its_reason() -> None:
    batch = batch_of(3)
    closing = Closing(TwoPhase([], [], {}), [ActionKind.DROP], reasons={0: "tenant gone"})
    assert dead_letter_line(batch, closing, [0]) == (
        "orders: 1 message deleted (the queue has no RedrivePolicy and no dead_letter_queue): "
        "requested 'tenant gone' (m0)"
    )
