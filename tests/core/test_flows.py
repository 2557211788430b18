"""The flows (every exchange with SQS, written once) driven by `SyncSqs` over a scripted client.

The client's methods are named like boto3's; each call gets the reply the test scripted for its
operation (by default SQS accepts every entry), or raises botocore's `ClientError`, which the
door translates and throws into the flow. The tests read what was asked, in which order, and
what the flow concluded: send before delete, no delete for a message whose copy SQS refused,
counters from the entries SQS accepted.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sqsbatch import ConsumerConfig, MessageBatch
from sqsbatch._core.closing import Closing, close_batch
from sqsbatch._core.context import QueueContext
from sqsbatch._core.entries import postpone_entries
from sqsbatch._core.envelope import ATTRIBUTE, Envelope, decode
from sqsbatch._core.flows import (
    Settled,
    heartbeat,
    postpone,
    read_settings,
    settle,
    settle_for_lambda,
)
from sqsbatch._core.heartbeat import next_heartbeat
from sqsbatch._core.intake import Received, ReceiveErrors, receive
from sqsbatch._core.ledger import ActionKind, LastFailure, Outcome
from sqsbatch._core.message import _Delivery
from sqsbatch._sync.door import SyncSqs
from sqsbatch.errors import CredentialsError, QueueNotFound

URL = "https://sqs.eu-west-1.amazonaws.com/1/orders"
DLQ = "https://sqs.eu-west-1.amazonaws.com/1/orders-dlq"
WALL = 1_700_000_000.0
Reply = Callable[[Mapping[str, Any]], Mapping[str, Any]] | Exception


def who(entry: Mapping[str, Any]) -> str:
    """The message an entry is about: `r3` is the receipt of `m3`; a copy carries its id."""
    if "ReceiptHandle" in entry:
        return "m" + str(entry["ReceiptHandle"])[1:]
    return str(json.loads(entry["MessageAttributes"][ATTRIBUTE]["StringValue"])["id"])


def answer(
    refuse: Mapping[str, tuple[str, bool]] | None = None, skip: frozenset[str] = frozenset()
) -> Reply:
    """A batch call's reply: entries of messages in `refuse` fail with (code, SenderFault), those
    in `skip` are missing from the answer, the others succeed."""
    refused = refuse or {}

    def reply(params: Mapping[str, Any]) -> Mapping[str, Any]:
        done: list[dict[str, Any]] = []
        failed: list[dict[str, Any]] = []
        for entry in params["Entries"]:
            message = who(entry)
            if message in refused:
                code, sender = refused[message]
                failed.append({"Id": entry["Id"], "Code": code, "SenderFault": sender})
                failed[-1]["Message"] = f"{code} for {message}"
            elif message not in skip:
                done.append({"Id": entry["Id"]})
        return {"Successful": done, "Failed": failed}

    return reply


def client_error(code: str, op: str = "Op") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": f"{code} says no"}}, op)


class ScriptedSqs:
    """A client named like boto3's: each call is recorded and gets the next reply scripted for its
    operation (`answer()`, every entry accepted, once the script runs out)."""

    def __init__(self, **script: list[Reply]) -> None:
        self.script = {op: list(replies) for op, replies in script.items()}
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, op: str) -> Callable[..., Any]:
        if op.startswith("_"):
            raise AttributeError(op)

        def call(**params: Any) -> Mapping[str, Any]:
            self.calls.append((op, params))
            replies = self.script.get(op)
            reply = replies.pop(0) if replies else answer()
            if isinstance(reply, Exception):
                raise reply
            return reply(params)

        return call

    def asked(self) -> list[tuple[str, str, list[str]]]:
        """(operation, queue name, messages named by its entries) of each call, in order."""
        return [
            (op, params["QueueUrl"].rsplit("/", 1)[-1], [who(e) for e in params["Entries"]])
            for op, params in self.calls
        ]


def drive(client: ScriptedSqs, flow: Any) -> tuple[Any, list[float]]:
    """Run `flow` through the sync door; returns what it concluded and the pauses it took."""
    sleeps: list[float] = []
    return SyncSqs(client, sleep=sleeps.append).run(flow), sleeps


def raw(
    index: int, *, attempts: int = 1, group: str | None = None, **envelope: Any
) -> dict[str, Any]:
    """A message as boto3's `ReceiveMessage` returns it (with sqsbatch's envelope if given)."""
    system = {"ApproximateReceiveCount": str(attempts), "SentTimestamp": "1700000000000"}
    if group is not None:
        system["MessageGroupId"] = group
    user = {ATTRIBUTE: dict(Envelope(**envelope).to_attribute())} if envelope else {}
    return {
        "MessageId": f"m{index}",
        "ReceiptHandle": f"r{index}",
        "Body": f"body {index}",
        "Attributes": system,
        "MessageAttributes": user,
    }


def batch_of(*attempts: int, groups: str | None = None) -> MessageBatch:
    deliveries = [
        _Delivery(decode(raw(i, attempts=a, group=groups and groups[i])), f"r{i}", 0.0, 30.0)
        for i, a in enumerate(attempts)
    ]
    return MessageBatch("orders", deliveries)


def context(*, fifo: bool = False) -> QueueContext:
    suffix = ".fifo" if fifo else ""
    return QueueContext(
        "orders" + suffix,
        URL + suffix,
        DLQ + suffix,
        ConsumerConfig(max_retries=3, retry_delay=30),
        LastFailure.DEAD_LETTER,
        fifo,
    )


def closed(
    batch: MessageBatch, outcome: Outcome, *, fifo: bool = False, acks_free: bool = False
) -> Closing:
    error = KeyError("x") if outcome is Outcome.RAISED else None
    return close_batch(
        batch, outcome, error, context(fifo=fifo), now=10.0, wall_now=WALL, acks_free=acks_free
    )


def mixed_batch() -> MessageBatch:
    """m0 acked, m1 retried in 60 s, m2 on its last delivery (dead-lettered when the handler
    raises), m3 retried in 50,000 s (past the 12 h ceiling: re-sent)."""
    batch = batch_of(1, 1, 4, 1)
    batch.messages[0].ack()
    batch.messages[1].retry(delay_seconds=60)
    batch.messages[3].retry(delay_seconds=50_000)
    return batch


COUNTS = {
    "acked": 0,
    "retried": 0,
    "dead_lettered": 0,
    "dropped": 0,
    "left_to_redrive_policy": 0,
    "batches": 1,
    "expired_receipts": 0,
    "settle_failures": 0,
}


def counts(*, reasons: dict[str, int] | None = None, **changes: int) -> dict[str, int]:
    """A settled batch's counts; `reasons`: its dead letters by reason (for the metrics)."""
    by_reason = {f"dead_lettered:{reason}": n for reason, n in (reasons or {}).items()}
    return COUNTS | changes | by_reason


# -- settle ------------------------------------------------------------------------------------


def test_settle_sends_and_hides_first_then_deletes_the_acked_and_the_copied() -> None:
    # Given a batch whose handler acked m0, retried m1 and m3 and raised (m2's last delivery)
    batch = mixed_batch()
    closing = closed(batch, Outcome.RAISED)
    client = ScriptedSqs()
    # When it is settled and SQS accepts everything
    result, sleeps = drive(client, settle(closing, batch))
    # Then the hide and both copies go first, then one delete for the ack and the two copied
    assert client.asked() == [
        ("change_message_visibility_batch", "orders", ["m1"]),
        ("send_message_batch", "orders-dlq", ["m2"]),
        ("send_message_batch", "orders", ["m3"]),
        ("delete_message_batch", "orders", ["m0", "m2", "m3"]),
    ]
    dead = "orders: 1 message dead-lettered to orders-dlq: retries_exhausted (m2)"
    assert result == Settled(
        counts(acked=1, retried=2, dead_lettered=1, reasons={"retries_exhausted": 1}),
        [(logging.WARNING, dead)],
    )
    assert sleeps == []
    # And the entries say what each became
    hide = client.calls[0][1]["Entries"][0]
    assert hide == {"Id": "0", "ReceiptHandle": "r1", "VisibilityTimeout": 60}
    dead = client.calls[1][1]["Entries"][0]
    envelope = json.loads(dead["MessageAttributes"][ATTRIBUTE]["StringValue"])
    assert (dead["MessageBody"], envelope["id"], envelope["q"]) == ("body 2", "m2", "orders")
    assert (envelope["err"]["type"], envelope["err"]["at"], "a" in envelope) == (
        "KeyError",
        WALL,
        False,  # the dead-lettered copy starts its attempts over
    )
    resent = client.calls[2][1]["Entries"][0]
    envelope = json.loads(resent["MessageAttributes"][ATTRIBUTE]["StringValue"])
    assert (resent["DelaySeconds"], envelope["due"], envelope["a"]) == (900, WALL + 50_000, 1)


def test_settle_with_deletes_later_stops_after_phase_one_and_returns_the_deletes() -> None:
    # Given the mixed batch, settled with its deletes left for later (beside the next receive)
    batch = mixed_batch()
    closing = closed(batch, Outcome.RAISED)
    client = ScriptedSqs()
    first, _ = drive(client, settle(closing, batch, deletes_later=True))
    # Then phase one alone went out: the hide and both copies, no delete yet
    assert [op for op, _, _ in client.asked()] == [
        "change_message_visibility_batch",
        "send_message_batch",
        "send_message_batch",
    ]
    assert first.counts == {} and first.rest is not None
    # And the rest deletes what SQS accepted, concluding as the whole settle does
    whole, _ = drive(ScriptedSqs(), settle(closed(mixed_batch(), Outcome.RAISED), mixed_batch()))
    rest, _ = drive(client, first.rest)
    assert client.asked()[3:] == [("delete_message_batch", "orders", ["m0", "m2", "m3"])]
    assert rest == whole


def test_deletes_left_for_later_still_skip_a_copy_sqs_refused() -> None:
    batch = mixed_batch()
    refused = answer({"m2": ("InvalidMessageContents", True)})
    client = ScriptedSqs(send_message_batch=[refused])
    first, _ = drive(client, settle(closed(batch, Outcome.RAISED), batch, deletes_later=True))
    drive(client, first.rest)
    assert client.asked()[-1] == ("delete_message_batch", "orders", ["m0", "m3"])  # not m2


@pytest.mark.parametrize(
    ("code", "level"),
    [("InvalidMessageContents", logging.ERROR), ("AccessDenied", logging.ERROR)],
)
def test_a_message_whose_copy_sqs_refused_is_never_deleted(code: str, level: int) -> None:
    # Given the mixed batch, and a DLQ that refuses m2's copy (the sender's fault)
    batch = mixed_batch()
    client = ScriptedSqs(send_message_batch=[answer({"m2": (code, True)})])
    # When it is settled
    result, _ = drive(client, settle(closed(batch, Outcome.RAISED), batch))
    # Then m2 is not deleted (it reappears; the RedrivePolicy is the safety net), nor retried
    deleted = [m for op, _, ms in client.asked() if op == "delete_message_batch" for m in ms]
    assert deleted == ["m0", "m3"]
    assert [op for op, _, _ in client.asked()].count("send_message_batch") == 2
    assert result.counts == counts(acked=1, retried=2, settle_failures=1)
    assert result.lines == [(level, f"settling on orders: message m2: {code} {code} for m2")]


def test_a_copy_failed_by_sqs_is_sent_again_after_a_pause_then_deleted() -> None:
    # Given a DLQ whose first answer fails m2's copy for a passing reason
    batch = mixed_batch()
    client = ScriptedSqs(send_message_batch=[answer({"m2": ("InternalError", False)})])
    # When settled
    result, sleeps = drive(client, settle(closed(batch, Outcome.RAISED), batch))
    # Then the copy is sent again in a second round, 0.1 s later, before any delete
    assert [(op, q, ms) for op, q, ms in client.asked() if op == "send_message_batch"] == [
        ("send_message_batch", "orders-dlq", ["m2"]),
        ("send_message_batch", "orders", ["m3"]),
        ("send_message_batch", "orders-dlq", ["m2"]),
    ]
    assert client.asked()[-1] == ("delete_message_batch", "orders", ["m0", "m2", "m3"])
    assert sleeps == [0.1]
    dead = "orders: 1 message dead-lettered to orders-dlq: retries_exhausted (m2)"
    assert result == Settled(
        counts(acked=1, retried=2, dead_lettered=1, reasons={"retries_exhausted": 1}),
        [(logging.WARNING, dead)],
    )


def test_a_copy_that_fails_every_round_is_given_up_and_its_message_kept() -> None:
    batch = mixed_batch()
    transient = answer({"m3": ("ServiceUnavailable", False)})
    client = ScriptedSqs(send_message_batch=[answer(), transient, transient, transient])
    result, sleeps = drive(client, settle(closed(batch, Outcome.RAISED), batch))
    # three rounds, then given up: m3 (re-sent long retry) is never deleted
    assert sleeps == [0.1, 0.2]
    assert client.asked()[-1] == ("delete_message_batch", "orders", ["m0", "m2"])
    assert result.counts == counts(
        acked=1, retried=1, dead_lettered=1, settle_failures=1, reasons={"retries_exhausted": 1}
    )


def test_an_entry_missing_from_the_answer_is_never_taken_for_done() -> None:
    batch = batch_of(1, 1, 1)
    client = ScriptedSqs(delete_message_batch=[answer(skip=frozenset({"m1"}))])
    result, sleeps = drive(client, settle(closed(batch, Outcome.RETURNED), batch))
    assert client.asked() == [
        ("delete_message_batch", "orders", ["m0", "m1", "m2"]),
        ("delete_message_batch", "orders", ["m1"]),
    ]
    assert (result.counts, sleeps) == (counts(acked=3), [0.1])


def test_an_expired_receipt_is_counted_apart_and_logged_as_no_error() -> None:
    # Given a batch acked in full, where m1's receipt handle has expired
    batch = batch_of(1, 1, 1)
    gone = answer({"m1": ("ReceiptHandleIsInvalid", True)})
    client = ScriptedSqs(delete_message_batch=[gone])
    # When settled
    result, sleeps = drive(client, settle(closed(batch, Outcome.RETURNED), batch))
    # Then the delete is not retried: m1 may be redelivered, logged at INFO, counted apart
    assert len(client.calls) == 1 and sleeps == []
    assert result.counts == counts(acked=2, expired_receipts=1)
    assert result.lines == [
        (
            logging.INFO,
            "settling on orders: message m1: ReceiptHandleIsInvalid ReceiptHandleIsInvalid for m1",
        )
    ]


def test_a_throttled_call_is_made_again_whole() -> None:
    batch = batch_of(1, 1)
    throttled = client_error("ThrottlingException", "DeleteMessageBatch")
    client = ScriptedSqs(delete_message_batch=[throttled])
    result, sleeps = drive(client, settle(closed(batch, Outcome.RETURNED), batch))
    assert client.asked() == [("delete_message_batch", "orders", ["m0", "m1"])] * 2
    assert (result.counts, sleeps) == (counts(acked=2), [0.1])


def test_a_missing_dlq_is_not_asked_again_and_its_messages_are_kept() -> None:
    # Given a DLQ that does not exist
    batch = mixed_batch()
    missing = client_error("AWS.SimpleQueueService.NonExistentQueue", "SendMessageBatch")
    client = ScriptedSqs(send_message_batch=[missing])
    # When settled
    result, sleeps = drive(client, settle(closed(batch, Outcome.RAISED), batch))
    # Then the send is not retried, and m2 is not deleted
    assert [ms for op, q, ms in client.asked() if q == "orders-dlq"] == [["m2"]]
    assert client.asked()[-1] == ("delete_message_batch", "orders", ["m0", "m3"])
    assert sleeps == []
    assert result.counts == counts(acked=1, retried=2, settle_failures=1)
    [(level, line)] = result.lines
    assert level == logging.ERROR
    assert line.startswith("settling on orders: message m2: AWS.SimpleQueueService.NonExist")
    assert "queue does not exist" in line and "orders-dlq" in line


def test_deletes_go_ten_at_a_time() -> None:
    batch = batch_of(*[1] * 25)
    client = ScriptedSqs()
    result, _ = drive(client, settle(closed(batch, Outcome.RETURNED), batch))
    assert [(op, len(ms)) for op, _, ms in client.asked()] == [
        ("delete_message_batch", 10),
        ("delete_message_batch", 10),
        ("delete_message_batch", 5),
    ]
    assert result.counts == counts(acked=25)


def test_a_bulk_ack_whose_deletes_sqs_partly_refused_goes_on_entry_by_entry() -> None:
    # Given 25 messages acked in bulk: SQS accepts the first call, throttles the second and
    # fails m21 of the third for a passing reason
    batch = batch_of(*[1] * 25)
    throttled = client_error("ThrottlingException", "DeleteMessageBatch")
    client = ScriptedSqs(
        delete_message_batch=[answer(), throttled, answer({"m21": ("InternalError", False)})]
    )
    # When settled
    result, sleeps = drive(client, settle(closed(batch, Outcome.RETURNED), batch))
    # Then only what was not accepted is asked again, after a pause, and every message counts
    assert [ms for _, _, ms in client.asked()] == [
        [f"m{i}" for i in range(10)],
        [f"m{i}" for i in range(10, 20)],
        [f"m{i}" for i in range(20, 25)],
        [f"m{i}" for i in range(10, 20)],
        ["m21"],
    ]
    assert (result.counts, sleeps, result.lines) == (counts(acked=25), [0.1], [])


def test_drops_and_messages_left_to_the_redrive_policy_are_logged_by_id() -> None:
    # Given a queue without RedrivePolicy or DLQ, and a failed last delivery of m1
    batch = batch_of(1, 4)
    batch.messages[0].ack()
    plan = close_batch(
        batch,
        Outcome.RAISED,
        KeyError("x"),
        QueueContext("orders", URL, None, ConsumerConfig(), LastFailure.DROP, False),
        now=0.0,
        wall_now=WALL,
    )
    client = ScriptedSqs()
    result, _ = drive(client, settle(plan, batch))
    # Then m1 is deleted like the ack, counted as dropped, and named in a warning
    assert client.asked() == [("delete_message_batch", "orders", ["m0", "m1"])]
    assert result.counts == counts(acked=1, dropped=1)
    assert result.lines == [
        (
            logging.WARNING,
            "orders: 1 message deleted (the queue has no RedrivePolicy and no "
            "dead_letter_queue): retries_exhausted (m1)",
        )
    ]


# -- settle_for_lambda ---------------------------------------------------------------------------


def test_lambda_a_batch_acked_in_bulk_costs_no_call() -> None:
    batch = batch_of(1, 2, 3)
    batch.ack_all()
    client = ScriptedSqs()
    plan = closed(batch, Outcome.RAISED, acks_free=True)
    result, _ = drive(client, settle_for_lambda(plan, batch))
    assert (client.calls, result) == ([], Settled({"batches": 1, "acked": 3}, []))


def test_lambda_reports_retries_and_refused_copies_and_deletes_nothing_itself() -> None:
    # Given: m0 acked, m1 retried, m2 and m3 on their last delivery when the handler raises
    batch = batch_of(1, 1, 4, 4)
    batch.messages[0].ack()
    batch.messages[1].retry(delay_seconds=60)
    plan = closed(batch, Outcome.RAISED, acks_free=True)
    # When the DLQ takes m2's copy and refuses m3's
    client = ScriptedSqs(send_message_batch=[answer({"m3": ("InvalidMessageContents", True)})])
    result, _ = drive(client, settle_for_lambda(plan, batch))
    # Then only phase one runs here: Lambda deletes what is not reported
    assert client.asked() == [
        ("change_message_visibility_batch", "orders", ["m1"]),
        ("send_message_batch", "orders-dlq", ["m2", "m3"]),
    ]
    assert result.listed == [1, 3]
    assert result.counts == counts(
        acked=1, retried=1, dead_lettered=1, settle_failures=1, reasons={"retries_exhausted": 1}
    )


def test_lambda_on_fifo_deletes_an_ack_behind_a_failure_of_its_group_and_reports_it() -> None:
    # Given a FIFO batch: m0 (group a) retried, m1 (a) acked, m2 (b) left to the default ack
    batch = batch_of(1, 1, 1, groups="aab")
    batch.messages[0].retry(delay_seconds=60)
    batch.messages[1].ack()
    plan = closed(batch, Outcome.RETURNED, fifo=True, acks_free=True)
    client = ScriptedSqs()
    result, _ = drive(client, settle_for_lambda(plan, batch))
    # Then m1 is deleted here and reported (Lambda must not see it done before m0)
    assert client.asked() == [
        ("change_message_visibility_batch", "orders.fifo", ["m0"]),
        ("delete_message_batch", "orders.fifo", ["m1"]),
    ]
    assert result.listed == [0, 1]
    assert plan.kinds == [ActionKind.HIDE, ActionKind.DELETE, ActionKind.DELETE]


# -- postpone: early delay hops ------------------------------------------------------------------


def early(index: int) -> tuple[Any, str]:
    due = WALL + 5_000 + index
    message = decode(raw(index, attempts=1, id=f"m{index}", base_attempts=2, due_at=due))
    return message, f"r{index}"


@pytest.mark.parametrize("delete", [True, False], ids=["poller", "lambda"])
def test_postpone_resends_early_hops_and_deletes_only_what_was_sent(delete: bool) -> None:
    # Given two hops received 5,000 s early, and SQS refusing the second copy
    plan = postpone_entries([early(0), early(1)], queue_url=URL, wall_now=WALL)
    client = ScriptedSqs(send_message_batch=[answer({"m1": ("InvalidMessageContents", True)})])
    # When postponed
    result, _ = drive(client, postpone(plan, delete=delete))
    # Then both are re-sent 900 s out with their due time; only the accepted one is deleted
    expected = [("send_message_batch", "orders", ["m0", "m1"])]
    if delete:
        expected.append(("delete_message_batch", "orders", ["m0"]))
    assert client.asked() == expected
    assert (result.sent, result.unsent) == (1, [1])
    copy = client.calls[0][1]["Entries"][0]
    envelope = json.loads(copy["MessageAttributes"][ATTRIBUTE]["StringValue"])
    assert (copy["DelaySeconds"], envelope["due"], envelope["a"]) == (900, WALL + 5_000, 2)


# -- heartbeat -------------------------------------------------------------------------------------


def test_heartbeat_extends_what_is_due_and_counts_expired_receipts() -> None:
    # Given three messages of a running batch: two due for an extension at t=20, one not
    deliveries = [
        _Delivery(decode(raw(i)), f"r{i}", 0.0, until) for i, until in enumerate((30, 30, 90))
    ]
    gone = answer({"m1": ("ReceiptHandleIsInvalid", True)})
    client = ScriptedSqs(change_message_visibility_batch=[gone])
    # When the heartbeat runs
    flow = heartbeat(
        MessageBatch("orders", deliveries), queue_url=URL, now=20.0, visibility_timeout=30
    )
    beat, _ = drive(client, flow)
    expired = beat.counts["expired_receipts"]
    # Then one call extends the two due ones by the visibility timeout
    assert client.asked() == [("change_message_visibility_batch", "orders", ["m0", "m1"])]
    assert [e["VisibilityTimeout"] for e in client.calls[0][1]["Entries"]] == [30, 30]
    # And the expired receipt is counted and never extended again
    assert expired == 1
    assert [(d.hidden_until, d.at_ceiling) for d in deliveries] == [
        (50.0, False),
        (30.0, True),
        (90.0, False),
    ]


def test_heartbeat_with_nothing_due_asks_nothing() -> None:
    deliveries = [_Delivery(decode(raw(0)), "r0", 0.0, 90.0)]
    client = ScriptedSqs()
    beat, _ = drive(
        client,
        heartbeat(
            MessageBatch("orders", deliveries), queue_url=URL, now=20.0, visibility_timeout=30
        ),
    )
    assert (beat.counts, beat.lines, client.calls) == ({}, [], [])


def test_heartbeat_retries_a_throttled_call() -> None:
    deliveries = [_Delivery(decode(raw(0)), "r0", 0.0, 30.0)]
    client = ScriptedSqs(change_message_visibility_batch=[client_error("ThrottlingException")])
    beat, sleeps = drive(
        client,
        heartbeat(
            MessageBatch("orders", deliveries), queue_url=URL, now=20.0, visibility_timeout=30
        ),
    )
    assert (beat.counts, sleeps, len(client.calls)) == ({"expired_receipts": 0}, [0.1], 2)
    assert deliveries[0].hidden_until == 50.0


def test_a_refused_extension_is_logged_once_and_not_asked_for_again_at_once() -> None:
    # Given a running batch whose extension SQS refuses as a whole (AccessDenied)
    deliveries = [_Delivery(decode(raw(i)), f"r{i}", 0.0, 30.0) for i in range(2)]
    client = ScriptedSqs(change_message_visibility_batch=[client_error("AccessDenied")])
    batch = MessageBatch("orders", deliveries)
    # When the heartbeat runs
    beat, _ = drive(client, heartbeat(batch, queue_url=URL, now=20.0, visibility_timeout=30))
    # Then one warning says the messages may show again, and the next heartbeat is not due
    # at once (before the fix the poller asked again in a tight loop until the handler ended)
    assert beat.counts == {"expired_receipts": 0}
    assert [level for level, _ in beat.lines] == [logging.WARNING]
    assert "AccessDenied" in beat.lines[0][1] and "orders" in beat.lines[0][1]
    assert next_heartbeat(deliveries, 30) == math.inf


def test_a_dead_letter_copy_refused_with_a_receipt_like_code_is_a_settle_failure() -> None:
    # Given the mixed batch closed as raised: m2's last delivery goes to the DLQ
    batch = mixed_batch()
    closing = closed(batch, Outcome.RAISED)
    # When SQS refuses m2's copy with a code that, on a delete, would mean an expired receipt
    refused = answer({"m2": ("InvalidParameterValue", True)})
    client = ScriptedSqs(send_message_batch=[refused, refused])
    settled, _ = drive(client, settle(closing, batch))
    # Then m2 is a settle failure logged as an error, not an expired receipt, and not deleted
    assert settled.counts["settle_failures"] == 1
    assert settled.counts["expired_receipts"] == 0
    errors = [text for level, text in settled.lines if level == logging.ERROR]
    assert any("InvalidParameterValue" in text for text in errors)
    deleted = [
        who(e)
        for op, params in client.calls
        if op == "delete_message_batch"
        for e in params["Entries"]
    ]
    assert "m2" not in deleted


def test_a_failed_batch_call_names_the_queue_not_its_url() -> None:
    batch = batch_of(1)
    batch.messages[0].ack()
    client = ScriptedSqs(delete_message_batch=[client_error("AccessDenied")] * 3)
    settled, _ = drive(client, settle(closed(batch, Outcome.RETURNED), batch))
    (line,) = [text for level, text in settled.lines if level == logging.ERROR]
    assert "(orders)" in line and "https://" not in line


# -- receive, through the door's error translation -------------------------------------------------


def receive_flow(errors: ReceiveErrors) -> Any:
    return receive(
        "orders",
        URL,
        asked=10,
        wait_seconds=20,
        visibility=35,
        received_at=100.0,
        wall_clock=lambda: WALL,
        errors=errors,
        random=Highest(),
    )


class Highest:
    def uniform(self, a: float, b: float) -> float:
        return b


def test_receive_postpones_early_hops_and_delivers_the_rest() -> None:
    # Given a receive that returns a plain message and a hop due in 5,000 s
    hop = raw(1, id="m1", due_at=WALL + 5_000)
    client = ScriptedSqs(receive_message=[lambda params: {"Messages": [raw(0), hop]}])
    # When received
    received, _ = drive(client, receive_flow(ReceiveErrors()))
    # Then the hop is re-sent and its early copy deleted; only m0 is delivered
    assert [op for op, _ in client.calls] == [
        "receive_message",
        "send_message_batch",
        "delete_message_batch",
    ]
    assert client.calls[0][1]["VisibilityTimeout"] == 35
    assert received.counts == {"received": 1, "postponed": 1}
    assert [(d.id, d.received_at, d.hidden_until) for d in received.deliveries] == [
        ("m0", 100.0, 135.0)
    ]


@pytest.mark.parametrize(
    ("code", "fatal", "pause"),
    [
        ("ThrottlingException", None, 0.4),
        ("AWS.SimpleQueueService.NonExistentQueue", QueueNotFound, 0.0),
        ("InvalidClientTokenId", CredentialsError, 0.0),
    ],
    ids=["throttled", "queue gone", "credentials refused"],
)
def test_receive_errors_are_translated_at_the_door(
    code: str, fatal: type[Exception] | None, pause: float
) -> None:
    errors = ReceiveErrors(1)
    client = ScriptedSqs(receive_message=[client_error(code, "ReceiveMessage")])
    received, sleeps = drive(client, receive_flow(errors))
    assert isinstance(received, Received) and sleeps == []  # the shell waits, not the flow
    assert (received.deliveries, received.counts) == ([], {"receive_errors": 1})
    assert received.pause == pytest.approx(pause)
    if fatal is None:
        assert received.fatal is None and errors.failures == 2
    else:
        assert isinstance(received.fatal, fatal) and received.fatal.code == code  # type: ignore[attr-defined]
        assert errors.failures == 1


# -- read_settings ---------------------------------------------------------------------------------

POLICY = json.dumps(
    {"deadLetterTargetArn": "arn:aws:sqs:eu-west-1:1:orders-dlq", "maxReceiveCount": 5}
)


@pytest.mark.parametrize(
    ("reply", "config", "expected"),
    [
        (
            {"Attributes": {"RedrivePolicy": POLICY}},
            {},
            (LastFailure.DEAD_LETTER, 4, "orders-dlq", True),
        ),
        ({"Attributes": {}}, {}, (LastFailure.DROP, 3, None, True)),
        (client_error("ThrottlingException"), {}, (LastFailure.LEAVE, 3, None, False)),
        (client_error("AccessDenied"), {}, (LastFailure.LEAVE, 3, None, True)),
        (
            client_error("ThrottlingException"),
            {"dead_letter_queue": "mine", "max_retries": 1},
            (LastFailure.DEAD_LETTER, 1, "mine", False),
        ),
    ],
    ids=["policy", "no policy", "throttled", "access denied", "throttled, DLQ configured"],
)
def test_read_settings(
    reply: Mapping[str, Any] | Exception,
    config: dict[str, Any],
    expected: tuple[LastFailure, int, str | None, bool],
) -> None:
    # Given a queue whose GetQueueAttributes answers `reply`
    scripted: Reply = reply if isinstance(reply, Exception) else (lambda params: reply)
    client = ScriptedSqs(get_queue_attributes=[scripted])
    # When a consumer reads its settings
    (settings, kept), _ = drive(client, read_settings("orders", URL, ConsumerConfig(**config)))
    # Then it asked for the RedrivePolicy once, and resolved: (last failure, max_retries, DLQ,
    # whether the answer may be kept)
    assert client.calls == [
        (
            "get_queue_attributes",
            {"QueueUrl": URL, "AttributeNames": ["RedrivePolicy", "MessageRetentionPeriod"]},
        )
    ]
    effective = settings.config
    got = (settings.last_failure, effective.max_retries, effective.dead_letter_queue, kept)
    assert got == expected


def test_read_settings_of_a_missing_queue_raises() -> None:
    missing = client_error("AWS.SimpleQueueService.NonExistentQueue", "GetQueueAttributes")
    client = ScriptedSqs(get_queue_attributes=[missing])
    with pytest.raises(QueueNotFound, match=r"queue does not exist \(orders\)") as raised:
        drive(client, read_settings("orders", URL, ConsumerConfig()))
    assert raised.value.__cause__ is missing
