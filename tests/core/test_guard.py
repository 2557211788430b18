"""The idempotency guard's steps (`sqsbatch._core.guard`), driven by the sync door over a
scripted SQS client and a `MemoryStore` on a fake clock: intake's step 4 on both kinds of
arrivals, the settle step, the heartbeat's extension, a store that fails."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from sqsbatch._core.guard import (
    STORE_DOWN_SECONDS,
    Guard,
    extend_claims,
    kept_while_copies_can_arrive,
    settle_claims,
)
from sqsbatch._core.idempotency import CLAIMED, COMPLETED
from sqsbatch._core.intake import Screening, Taken, intake, nothing_to_take
from sqsbatch._core.ledger import ActionKind
from sqsbatch._core.message import MessageBatch
from sqsbatch._core.receiving import Answer
from sqsbatch._core.screening import Screen
from sqsbatch.errors import SqsError
from sqsbatch.idempotency import MemoryStore
from tests.core.test_flows import WALL, ScriptedSqs, context, drive
from tests.core.test_intake import FRONT_ENDS, arrivals, ids, message


class Clock:
    def __init__(self) -> None:
        self.now = WALL

    def __call__(self) -> float:
        return self.now


class Down:
    """A store whose every call fails, as an unreachable table's does."""

    def __getattr__(self, name: str) -> Any:
        def fail(*_: Any, **__: Any) -> Any:
            raise ConnectionError("table unreachable")

        return fail


def guard_of(store: Any, **kwargs: Any) -> Guard:
    tokens = iter(f"owner-{n}" for n in range(100))
    return Guard(store, 3600.0, lambda: next(tokens), **kwargs)


def take(front_end: str, client: ScriptedSqs, guard: Guard, *messages: dict[str, Any]) -> Any:
    taking = arrivals(front_end, *messages)
    flow = intake(
        taking,
        Screening(context(), Screen()),
        wall_clock=lambda: WALL,
        for_lambda=front_end == "event",
        guard=guard,
    )
    taken: Taken[Any] = drive(client, flow)[0]
    return taken


def handed(taken: Taken[Any]) -> list[Any]:
    return taken.batch if isinstance(taken.batch, list) else list(taken.batch._deliveries)


def sent_ids(client: ScriptedSqs) -> list[str]:
    return [
        json.loads(entry["MessageAttributes"]["sqsbatch"]["StringValue"])["id"]
        for op, params in client.calls
        if op == "send_message_batch"
        for entry in params["Entries"]
    ]


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_a_completed_key_is_acked_without_the_handler(front_end: str) -> None:
    store = MemoryStore(clock=Clock())
    store.complete(["m1"], owner="earlier", ttl_seconds=60)
    client = ScriptedSqs()
    taken = take(front_end, client, guard_of(store), message(0), message(1))
    assert ids(taken) == ["m0"]
    assert taken.counts == {"acked": 1, "duplicates_skipped": 1}
    deletes = [op for op, _ in client.calls if op == "delete_message_batch"]
    # a poller deletes the duplicate; Lambda deletes what it is not told about
    assert deletes == (["delete_message_batch"] if front_end == "receive" else [])
    assert list(taken.refused) == []
    assert store.read(["m0"])["m0"].state == CLAIMED


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_a_key_claimed_elsewhere_is_re_sent_after_its_claim_costing_no_attempt(
    front_end: str,
) -> None:
    store = MemoryStore(clock=Clock())
    store.claim(["m1"], owner="another", expires=WALL + 42.5)
    client = ScriptedSqs()
    taken = take(front_end, client, guard_of(store), message(0), message(1))
    assert ids(taken) == ["m0"]
    assert taken.counts == {"retried": 1}
    assert sent_ids(client) == ["m1"]
    entry = next(p for op, p in client.calls if op == "send_message_batch")["Entries"][0]
    assert entry["DelaySeconds"] == 43
    carried = json.loads(entry["MessageAttributes"]["sqsbatch"]["StringValue"])
    assert "a" not in carried  # carried attempts: none; this delivery not counted
    assert store.read(["m1"])["m1"].owner == "another"  # untouched


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_an_unreachable_store_fails_closed_the_batch_retried_none_skipped(front_end: str) -> None:
    client = ScriptedSqs()
    taken = take(front_end, client, guard_of(Down()), message(0), message(1))
    assert ids(taken) == []
    assert taken.counts == {"retried": 2}
    assert "duplicates_skipped" not in taken.counts and "dead_lettered" not in taken.counts
    assert sent_ids(client) == ["m0", "m1"]
    sent = next(p for op, p in client.calls if op == "send_message_batch")["Entries"]
    assert {entry["DelaySeconds"] for entry in sent} == {STORE_DOWN_SECONDS}
    assert taken.line is not None and taken.line[0] == logging.WARNING
    assert "orders" in taken.line[1] and "2 messages" in taken.line[1]


def test_fifo_a_held_message_holds_its_group_and_a_skip_does_not() -> None:
    store = MemoryStore(clock=Clock())
    store.complete(["a0"], owner="earlier", ttl_seconds=60)
    store.claim(["b0"], owner="another", expires=WALL + 10)
    fifo = context(fifo=True)
    raw = [fifo_message(i, key, group) for i, (key, group) in enumerate(_FIFO)]
    answer = Answer(raw, queue_url=fifo.url, received_at=100.0, visibility=35)
    guard = guard_of(store)
    client = ScriptedSqs()
    flow = intake(answer, Screening(fifo, Screen()), wall_clock=lambda: WALL, guard=guard)
    taken: Taken[Any] = drive(client, flow)[0]
    # a0 skipped (its group goes on: a1 runs); b0 held, b1 held behind it (its claim released)
    assert [d.id for d in taken.batch] == ["m1", "m4"]
    assert taken.counts == {"acked": 1, "duplicates_skipped": 1, "retried": 2}
    hidden = [p for op, p in client.calls if op == "change_message_visibility_batch"]
    assert [e["VisibilityTimeout"] for e in hidden[0]["Entries"]] == [10, 10]
    assert "b1" not in store.read(["b1"])  # released at once


_FIFO = [("a0", "a"), ("a1", "a"), ("b0", "b"), ("b1", "b"), ("c0", "c")]


def fifo_message(index: int, key: str, group: str) -> dict[str, Any]:
    raw = message(index, idempotency_key=key)
    raw["Attributes"]["MessageGroupId"] = group
    return raw


def test_settle_completes_the_acked_and_releases_the_rest() -> None:
    clock = Clock()
    store = MemoryStore(clock=clock)
    guard = guard_of(store)
    taken = take("receive", ScriptedSqs(), guard, message(0), message(1), message(2))
    batch = MessageBatch("orders", handed(taken))
    kinds = [ActionKind.DELETE, ActionKind.HIDE, ActionKind.DEAD_LETTER]
    assert drive(ScriptedSqs(), settle_claims(guard, batch, kinds))[0] is None
    records = store.read(["m0", "m1", "m2"])
    assert records["m0"].state == COMPLETED and records["m0"].expires == WALL + 3600
    assert set(records) == {"m0"}  # released: the next delivery runs
    assert guard.held == {}


def test_settle_logs_an_error_when_the_store_fails_and_forgets_the_claims() -> None:
    store = MemoryStore(clock=Clock())
    guard = guard_of(store)
    taken = take("receive", ScriptedSqs(), guard, message(0))
    broken = Guard(Down(), 60.0, lambda: "x", held=guard.held)
    line = drive(ScriptedSqs(), settle_claims(broken, MessageBatch("orders", handed(taken)), None))
    assert line[0] is not None and line[0][0] == logging.WARNING
    assert guard.held == {}


def test_a_heartbeat_extends_the_claims_with_the_visibility() -> None:
    store = MemoryStore(clock=Clock())
    guard = guard_of(store)
    taken = take("receive", ScriptedSqs(), guard, message(0))
    assert store.read(["m0"])["m0"].expires == WALL + 35  # the visibility
    delivery = handed(taken)[0]
    delivery.hidden_until = 100.0 + 300  # the heartbeat pushed it on
    flow = extend_claims(guard, [delivery], now=110.0, wall_now=WALL + 10)
    assert drive(ScriptedSqs(), flow)[0] is None
    assert store.read(["m0"])["m0"].expires == WALL + 10 + 290


def test_claim_seconds_and_lambdas_deadline_bound_the_claim() -> None:
    store = MemoryStore(clock=Clock())
    take("event", ScriptedSqs(), guard_of(store, lambda_deadline=WALL + 3.5), message(0))
    assert store.read(["m0"])["m0"].expires == WALL + 3.5
    take("receive", ScriptedSqs(), guard_of(store, claim_seconds=7), message(1))
    assert store.read(["m1"])["m1"].expires == WALL + 7


def test_the_lambda_short_path_is_off_with_a_guard() -> None:
    screening = Screening(context(), Screen())
    assert nothing_to_take(screening) and nothing_to_take(None)
    assert not nothing_to_take(screening, guard_of(MemoryStore()))


DAY = 86_400


def retention(seconds: int) -> Any:
    return lambda params: {"Attributes": {"MessageRetentionPeriod": str(seconds)}}


@pytest.mark.parametrize(
    ("queue_retention", "dlq", "expected"),
    [
        (4 * DAY, None, 4 * DAY),  # no DLQ: the queue's retention, no call made
        (4 * DAY, retention(2 * DAY), 6 * DAY),  # the DLQ's retention added
        (14 * DAY, retention(14 * DAY), 28 * DAY),  # SQS's longest, both
        (None, retention(60), 28 * DAY),  # the queue's unknown: the longest
        (DAY, SqsError("denied", code="AccessDenied"), 15 * DAY),  # the DLQ's unreadable: 14 d
        (DAY, lambda params: {"Attributes": {}}, 15 * DAY),  # or absent from the answer
    ],
)
def test_the_default_ttl_covers_the_queues_and_its_dlqs_retention(
    queue_retention: int | None, dlq: Any, expected: int
) -> None:
    client = ScriptedSqs(get_queue_attributes=[dlq] if dlq is not None else [])
    dlq_url = None if dlq is None else "https://sqs.example/123/orders-dlq"
    flow = kept_while_copies_can_arrive(guard_of(MemoryStore()), queue_retention, dlq_url)
    guard, _ = drive(client, flow)
    assert guard.ttl_seconds == expected
    expected_calls = [] if dlq is None else [("get_queue_attributes", dlq_url)]
    assert [(op, params["QueueUrl"]) for op, params in client.calls] == expected_calls
