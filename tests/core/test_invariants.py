"""Invariants of settlement and the heartbeat, on random batches and a randomly failing SQS.

A random batch (1..100 messages, FIFO or not, any attempts, bodies up to past 1 MiB, received
over a minute) gets random `ack`/`retry` calls (delays up to a day), a random handler outcome and
a random `LastFailure`; it is closed at a random `now` up to past the 12 h ceiling and settled
through the `settle` flow against a fake SQS that accepts, fails (for a passing reason or the
sender's), expires, forgets or refuses whole calls at random. Whatever happens:

(a) every message ends in exactly one terminal state: the tally's per-message counters add up
    to the batch size, and those that count a settled message agree with what SQS accepted;
(b) no batch call has more than 10 entries, no `SendMessageBatch` more than 1 MiB;
(c) no visibility change asks for more than the ceiling less the time since that receive;
(d) no message is deleted before SQS accepted its dead-letter or re-sent copy, and a message
    that is hidden or left to the RedrivePolicy is never deleted.

Settings as in `tests/support/fuzzing.py` (derandomized, fixed example counts); run with
`--hypothesis-show-statistics` to see the counts.
"""

from __future__ import annotations

import functools
import json
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError
from hypothesis import event, given, settings
from hypothesis import strategies as st

from sqsbatch import ConsumerConfig, MessageBatch
from sqsbatch._core.closing import close_batch
from sqsbatch._core.context import QueueContext
from sqsbatch._core.envelope import ATTRIBUTE, Envelope, decode, payload_size
from sqsbatch._core.flows import heartbeat, settle
from sqsbatch._core.heartbeat import next_heartbeat
from sqsbatch._core.ledger import ActionKind, LastFailure, Outcome
from sqsbatch._core.message import _Delivery
from sqsbatch._sync.door import SyncSqs
from sqsbatch.limits import SQS_LIMITS, SqsLimits
from tests.support.fuzzing import FUZZ

SETTLE_EXAMPLES = 200
HEARTBEAT_EXAMPLES = 300
CEILING = SQS_LIMITS.visibility_ceiling_seconds
MIB = SQS_LIMITS.max_payload_bytes
WALL = 1_700_000_000.0

# -- a fake SQS that answers at random, and keeps a log of what it accepted ---------------------


@dataclass
class Wire:
    """Every call the fake SQS got, in order, with which entries it accepted."""

    calls: list[tuple[str, str, list[dict[str, Any]], set[str]]] = field(default_factory=list)
    """(operation, queue URL, entries, ids of the accepted entries)."""


def who(entry: Mapping[str, Any]) -> int:
    """The index of the message an entry is about (receipts are `r<i>`, copies carry `m<i>`)."""
    if "ReceiptHandle" in entry:
        return int(str(entry["ReceiptHandle"])[1:])
    envelope = json.loads(entry["MessageAttributes"][ATTRIBUTE]["StringValue"])
    return int(str(envelope["id"])[1:])


class RandomSqs:
    """Batch calls answered at random (seeded): accepted, failed for a passing reason, failed as
    the sender's fault, an expired receipt, missing from the answer, or the whole call refused."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)
        self.wire = Wire()

    def __getattr__(self, op: str) -> Callable[..., Any]:
        if not op.endswith("_batch"):
            raise AttributeError(op)
        return functools.partial(self._batch, op)

    def _batch(self, op: str, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        draw = self.random.random()
        if draw < 0.04:
            self.wire.calls.append((op, QueueUrl, Entries, set()))
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow"}}, op)
        if draw < 0.05:
            self.wire.calls.append((op, QueueUrl, Entries, set()))
            code = "AWS.SimpleQueueService.NonExistentQueue"
            raise ClientError({"Error": {"Code": code, "Message": "gone"}}, op)
        done: list[dict[str, Any]] = []
        failed: list[dict[str, Any]] = []
        for entry in Entries:
            fate = self.random.random()
            if fate < 0.7:
                done.append({"Id": entry["Id"]})
            elif fate < 0.8:
                failed.append({"Id": entry["Id"], "Code": "InternalError", "SenderFault": False})
            elif fate < 0.9:
                code = "InvalidMessageContents" if op == "send_message_batch" else "AccessDenied"
                failed.append({"Id": entry["Id"], "Code": code, "SenderFault": True})
            elif fate < 0.95 and op != "send_message_batch":
                failed.append(
                    {"Id": entry["Id"], "Code": "ReceiptHandleIsInvalid", "SenderFault": True}
                )
            # else: missing from the answer
        self.wire.calls.append((op, QueueUrl, Entries, {item["Id"] for item in done}))
        return {"Successful": done, "Failed": failed}


# -- random batches --------------------------------------------------------------------------


@functools.cache
def body(size: int) -> str:
    return "x" * size


@dataclass(frozen=True)
class Scenario:
    fifo: bool
    messages: list[tuple[int, int, int, float, str]]
    """(receive count, carried attempts, body size, received_at, group) per message."""
    calls: list[tuple[str, int, int | None]]
    """(call, message index or -1 for a batch call, delay) in the handler's order."""
    outcome: Outcome
    last_failure: LastFailure
    max_retries: int
    retry_delay: int
    elapsed: float
    """Seconds from the last receive to `now`."""
    seed: int


DELAYS = st.one_of(
    st.none(),
    st.sampled_from([0, 1, 899, 900, 901, 43_199, 43_200, 43_201, 86_400]),
    st.integers(0, 86_400),
)
SIZES = st.sampled_from([5, 5, 5, 1_000, 100_000, 262_144, 262_144, MIB])
MESSAGE = st.tuples(
    st.integers(1, 5),
    st.integers(0, 3),
    SIZES,
    st.floats(0, 60, allow_nan=False),
    st.sampled_from("abc"),
)
CALL = st.one_of(
    st.tuples(st.sampled_from(["ack", "retry"]), st.integers(0, 99), DELAYS),
    st.tuples(st.sampled_from(["ack_all", "retry_all"]), st.just(-1), DELAYS),
)
ELAPSED = st.one_of(
    st.floats(0, 43_300, allow_nan=False),
    st.sampled_from([0.0, 43_139.5, 43_199.0, 43_199.9, 43_200.0, 43_260.0]),
)


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    return Scenario(
        fifo=draw(st.booleans()),
        messages=draw(
            st.integers(1, 100).flatmap(lambda n: st.lists(MESSAGE, min_size=n, max_size=n))
        ),
        calls=draw(st.lists(CALL, max_size=12)),
        outcome=draw(st.sampled_from(Outcome)),
        last_failure=draw(st.sampled_from([*LastFailure, LastFailure.DEAD_LETTER])),
        max_retries=draw(st.sampled_from([0, 1, 3])),
        retry_delay=draw(st.sampled_from([0, 30, 900, 50_000])),
        elapsed=draw(ELAPSED),
        seed=draw(st.integers(0, 2**32)),
    )


def batch_for(scenario: Scenario) -> MessageBatch:
    deliveries = []
    for i, (receives, carried, size, received_at, group) in enumerate(scenario.messages):
        system = {"ApproximateReceiveCount": str(receives), "SentTimestamp": "1700000000000"}
        if scenario.fifo:
            system["MessageGroupId"] = group
        envelope = Envelope(id=f"m{i}", content_type="text", base_attempts=carried)
        raw = {
            "MessageId": f"sqs-{i}",
            "ReceiptHandle": f"r{i}",
            "Body": body(size),
            "Attributes": system,
            "MessageAttributes": {ATTRIBUTE: dict(envelope.to_attribute())},
        }
        deliveries.append(_Delivery(decode(raw), f"r{i}", received_at, received_at + 30))
    batch = MessageBatch("orders", deliveries)
    for call, index, delay in scenario.calls:
        if call == "ack_all":
            batch.ack_all()
        elif call == "retry_all":
            batch.retry_all(delay)
        elif index < len(batch.messages):
            message = batch.messages[index]
            message.ack() if call == "ack" else message.retry(delay)
    return batch


def context_for(scenario: Scenario) -> QueueContext:
    suffix = ".fifo" if scenario.fifo else ""
    dlq = "https://sqs/1/dlq" + suffix if scenario.last_failure is LastFailure.DEAD_LETTER else None
    config = ConsumerConfig(max_retries=scenario.max_retries, retry_delay=scenario.retry_delay)
    return QueueContext(
        "orders" + suffix,
        "https://sqs/1/orders" + suffix,
        dlq,
        config,
        scenario.last_failure,
        scenario.fifo,
    )


COUNTED = {
    ActionKind.DELETE: "acked",
    ActionKind.HIDE: "retried",
    ActionKind.RESEND: "retried",
    ActionKind.DEAD_LETTER: "dead_lettered",
    ActionKind.DROP: "dropped",
    ActionKind.LEAVE: "left_to_redrive_policy",
}
COPIED = (ActionKind.RESEND, ActionKind.DEAD_LETTER)
OPS = {
    ActionKind.DELETE: {"delete_message_batch"},
    ActionKind.DROP: {"delete_message_batch"},
    ActionKind.HIDE: {"change_message_visibility_batch"},
    ActionKind.LEAVE: {"change_message_visibility_batch"},
    ActionKind.RESEND: {"send_message_batch", "delete_message_batch"},
    ActionKind.DEAD_LETTER: {"send_message_batch", "delete_message_batch"},
}


@settings(FUZZ, max_examples=SETTLE_EXAMPLES)
@given(scenarios())
def test_settling_any_batch_against_a_failing_sqs_keeps_every_invariant(
    scenario: Scenario,
) -> None:
    # Given a random batch, closed at a random time after its receives
    batch = batch_for(scenario)
    received = [d.received_at for d in batch._deliveries]
    now = max(received) + scenario.elapsed
    error = RuntimeError("boom") if scenario.outcome is Outcome.RAISED else None
    closing = close_batch(
        batch, scenario.outcome, error, context_for(scenario), now=now, wall_now=WALL + now
    )
    # When it is settled against an SQS that fails at random
    client = RandomSqs(scenario.seed)
    settled = SyncSqs(client, sleep=lambda seconds: None).run(settle(closing, batch))
    # Then every invariant holds
    wire = client.wire
    each_message_ends_once(closing.kinds, settled.counts, wire)
    calls_keep_the_limits(wire)
    visibility_stays_under_the_ceiling(wire, received, now)
    copies_come_before_deletes(closing.kinds, closing.entries.refused, wire)
    event(f"kinds: {sorted({kind.value for kind in closing.kinds})}")
    sends = [len(entries) for op, _, entries, _ in wire.calls if op == "send_message_batch"]
    event(f"a send call cut short of 10 by its size: {any(0 < n < 10 for n in sends[:-1])}")
    event(f"copies refused before any call: {bool(closing.entries.refused)}")


def each_message_ends_once(kinds: list[ActionKind], counts: dict[str, int], wire: Wire) -> None:
    """(a) Counted once, in one terminal state, and as settled exactly when SQS accepted what
    settles it; nothing asked that its action does not call for."""
    per_message = {*COUNTED.values(), "expired_receipts", "settle_failures"}
    assert sum(counts[name] for name in per_message) == len(kinds)
    accepted: dict[tuple[int, str], bool] = {}
    asked: dict[int, set[str]] = {}
    for op, _, entries, ok in wire.calls:
        for entry in entries:
            accepted[who(entry), op] = entry["Id"] in ok  # the last answer holds
            asked.setdefault(who(entry), set()).add(op)
    expected = dict.fromkeys(set(COUNTED.values()), 0)
    for index, kind in enumerate(kinds):
        hides = kind in (ActionKind.HIDE, ActionKind.LEAVE)
        op = "change_message_visibility_batch" if hides else "delete_message_batch"
        expected[COUNTED[kind]] += accepted.get((index, op), False)
        assert asked.get(index, set()) <= OPS[kind], (index, kind, asked.get(index))
    assert {name: counts[name] for name in expected} == expected


def calls_keep_the_limits(wire: Wire) -> None:
    """(b) At most 10 entries a call, and sends of at most 1 MiB in all."""
    for op, _, entries, _ in wire.calls:
        assert 1 <= len(entries) <= SQS_LIMITS.max_entries
        if op == "send_message_batch":
            sizes = [payload_size(e["MessageBody"], e["MessageAttributes"]) for e in entries]
            assert sum(sizes) <= MIB


def visibility_stays_under_the_ceiling(wire: Wire, received: list[float], now: float) -> None:
    """(c) Never past the ceiling counted from that message's receive."""
    for op, _, entries, _ in wire.calls:
        if op == "change_message_visibility_batch":
            for entry in entries:
                left = CEILING - (now - received[who(entry)])
                assert entry["VisibilityTimeout"] <= max(0.0, left)


def copies_come_before_deletes(
    kinds: list[ActionKind], refused: Mapping[int, str], wire: Wire
) -> None:
    """(d) A copied message is deleted only once SQS accepted its copy, which went where its
    action says; a copy SQS would refuse is never sent, and its message never deleted."""
    sent_ok: set[int] = set()
    for op, queue_url, entries, ok in wire.calls:
        for entry in entries:
            index = who(entry)
            assert index not in refused
            if op == "send_message_batch":
                to_dlq = kinds[index] is ActionKind.DEAD_LETTER
                assert queue_url.rsplit("/", 1)[-1].startswith("dlq" if to_dlq else "orders")
                if entry["Id"] in ok:
                    sent_ok.add(index)
            elif op == "delete_message_batch" and kinds[index] in COPIED:
                assert index in sent_ok, f"m{index} deleted before its copy was accepted"


# -- the heartbeat, over a handler's whole run --------------------------------------------------


@dataclass(frozen=True)
class Run:
    ceiling: int
    visibility_timeout: int
    received: list[float]
    seed: int


@st.composite
def runs(draw: st.DrawFn) -> Run:
    ceiling = draw(st.sampled_from([100, 1_000, CEILING]))
    return Run(
        ceiling=ceiling,
        visibility_timeout=draw(st.integers(max(1, ceiling // 40), ceiling)),
        received=draw(st.lists(st.floats(0, 60, allow_nan=False), min_size=1, max_size=30)),
        seed=draw(st.integers(0, 2**32)),
    )


@settings(FUZZ, max_examples=HEARTBEAT_EXAMPLES)
@given(runs())
def test_a_heartbeat_never_asks_past_the_ceiling_and_ends_with_it(run: Run) -> None:
    # Given a running batch received over a minute, its visibility timeout, a small ceiling
    limits = SqsLimits(visibility_ceiling_seconds=run.ceiling)
    vt = run.visibility_timeout
    deliveries = [
        _Delivery(decode({"MessageId": f"m{i}", "Body": ""}), f"r{i}", at, at + vt)
        for i, at in enumerate(run.received)
    ]
    client = RandomSqs(run.seed)
    door = SyncSqs(client, sleep=lambda seconds: None)
    now = 0.0
    beats = 0
    # When the handler runs on and the heartbeat wakes each time it is due
    while (due := next_heartbeat(deliveries, vt)) < math.inf:
        now = max(now + 1, due)
        calls_before = len(client.wire.calls)
        door.run(
            heartbeat(
                MessageBatch("q", deliveries),
                queue_url="q",
                now=now,
                visibility_timeout=vt,
                limits=limits,
            )
        )
        beats += 1
        assert now <= max(run.received) + run.ceiling + 1, "the heartbeat outlives the ceiling"
        # Then no extension goes past the ceiling counted from its message's receive
        for _, _, entries, _ in client.wire.calls[calls_before:]:
            for entry in entries:
                received_at = run.received[who(entry)]
                assert entry["VisibilityTimeout"] <= max(0.0, run.ceiling - (now - received_at))
        for delivery in deliveries:
            assert delivery.hidden_until <= delivery.received_at + run.ceiling + 1e-6  # float sums
    # And it ran, and ended once every message was at its ceiling (or its receipt was gone)
    assert beats >= 1
    assert all(d.at_ceiling for d in deliveries)
