"""The Lambda adapter's hot path (`sqsbatch._lambda_hot`), on moto's server.

A warm invocation of plain records (no message attributes) skips the general path's intake and
closing: these tests check that it does, that it answers and settles exactly as the general path
does whatever the handler does, and that it is never taken where a step of the general path
applies (metrics, screening, an async handler, records with sqsbatch's attribute, a trace).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import sqsbatch.lambda_adapter as adapter_module
from sqsbatch import ConsumerConfig, MessageBatch, Producer, create_queue, lambda_handler
from sqsbatch._core.lambda_event import parse_event
from sqsbatch.lambda_adapter import LambdaAdapter
from tests.support.front_ends import EventSourceMapping
from tests.support.sqs_helpers import depth, drain

Handler = Callable[[MessageBatch], Any]


def config(**values: Any) -> ConsumerConfig:
    return ConsumerConfig.load(**{"max_batch_timeout": 0.2, "max_retries": 3, **values})


def plain_queue(sqs: Any, name: str, bodies: list[int], **options: Any) -> EventSourceMapping:
    """A queue holding `bodies` as JSON text sent by plain boto3 (no message attributes)."""
    create_queue(name, client=sqs, **options)
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    entries = [{"Id": str(b), "MessageBody": json.dumps(b)} for b in bodies]
    if entries:
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    return EventSourceMapping(sqs, name, window=0.2)


@pytest.fixture
def general_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many invocations took the general path (each parses its event with `parse_event`)."""
    calls: list[int] = []
    real = parse_event

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(adapter_module, "parse_event", counted)
    yield calls


def warm(function: LambdaAdapter, sqs: Any, name: str) -> EventSourceMapping:
    """`function` after one invocation of a plain record of `name` (the general path)."""
    mapping = plain_queue(sqs, name, [-1])
    assert mapping.invoke(function, mapping.receive(wait_seconds=1)) == set()
    return mapping


def test_a_warm_plain_event_skips_the_general_path(
    sqs: Any, name: str, general_calls: list[int]
) -> None:
    # Given a function that has handled one plain event of a queue (its first: the general path)
    seen: list[list[Any]] = []
    function = lambda_handler(config=config(), client=sqs)(
        lambda batch: seen.append([m.body for m in batch.messages])
    )
    mapping = warm(function, sqs, name)
    assert len(general_calls) == 1
    # When another plain event of that queue comes
    plain = plain_queue(sqs, f"{name}-x", [])  # (a second queue: not warm)
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    sqs.send_message_batch(
        QueueUrl=url, Entries=[{"Id": str(b), "MessageBody": json.dumps(b)} for b in (1, 2)]
    )
    failed = mapping.invoke(function, mapping.receive(wait_seconds=1))
    # Then it took the hot path (no parse_event), the handler got the bodies as text, all acked
    assert len(general_calls) == 1
    assert failed == set() and sorted(seen[-1]) == ["1", "2"]
    assert depth(sqs, name) == 0
    # and an event of another queue takes the general path
    sqs.send_message(QueueUrl=plain.url, MessageBody="3")
    assert plain.invoke(function, plain.receive(wait_seconds=1)) == set()
    assert len(general_calls) == 2


def _retry_second(batch: MessageBatch) -> None:
    batch.messages[1].retry()


def _retry_second_in_eleven_hours(batch: MessageBatch) -> None:
    # within SQS's 12-hour visibility ceiling counted from the first receive: hidden, not re-sent
    batch.messages[1].retry(delay_seconds=11 * 3600)


def _ack_first_then_raise(batch: MessageBatch) -> None:
    batch.messages[0].ack()
    raise RuntimeError("boom")


def _dead_letter_first(batch: MessageBatch) -> None:
    batch.messages[0].dead_letter("bad")


def _retry_all(batch: MessageBatch) -> None:
    batch.retry_all()


def _returns_a_coroutine(batch: MessageBatch) -> Any:
    async def acks() -> None:
        batch.messages[0].ack()

    return acks()


BEHAVIOURS: dict[str, Handler] = {
    "returns": lambda batch: None,
    "retries one": _retry_second,
    "retries one in 11 hours": _retry_second_in_eleven_hours,
    "acks one, raises": _ack_first_then_raise,
    "dead-letters one": _dead_letter_first,
    "retries all": _retry_all,
    "returns a coroutine": _returns_a_coroutine,
}


def outcome(sqs: Any, name: str, handler: Handler, *, hot: bool) -> tuple[Any, ...]:
    """(bodies reported, bodies visible again, bodies dead-lettered) of one invocation of three
    plain records [0, 1, 2] under `handler`: on the hot path (a warmed function) or not."""
    function = lambda_handler(config=config(dead_letter_queue=f"{name}-dlq"), client=sqs)(
        lambda batch: handler(batch) if batch.messages[0].body != "-1" else None
    )
    create_queue(f"{name}-dlq", client=sqs)
    mapping = warm(function, sqs, name) if hot else plain_queue(sqs, name, [])
    sqs.send_message_batch(
        QueueUrl=mapping.url,
        Entries=[{"Id": str(b), "MessageBody": json.dumps(b)} for b in (0, 1, 2)],
    )
    messages = mapping.receive(wait_seconds=1)
    assert len(messages) == 3
    by_id = {m["MessageId"]: int(m["Body"]) for m in messages}
    failed = sorted(by_id[i] for i in mapping.invoke(function, messages))
    visible = sorted(int(m["Body"]) for m in drain(sqs, name))
    dead = sorted(int(m["Body"]) for m in drain(sqs, f"{name}-dlq"))
    return failed, visible, dead


@pytest.mark.parametrize("behaviour", BEHAVIOURS)
def test_the_hot_path_settles_as_the_general_path_does(
    sqs: Any, name: str, behaviour: str, general_calls: list[int]
) -> None:
    # Given the same handler, on a warm function and on a cold one
    handler = BEHAVIOURS[behaviour]
    # When each handles the records [0, 1, 2]
    cold = outcome(sqs, f"{name}-c", handler, hot=False)
    calls = len(general_calls)
    hot = outcome(sqs, f"{name}-h", handler, hot=True)
    # Then the warm one took the hot path (only its warming invocation was general)
    assert len(general_calls) == calls + 1
    # and reported, retried and dead-lettered the same records
    assert hot == cold


def test_on_the_hot_path_a_handler_past_its_budget_is_stopped_and_acks_hold(
    sqs: Any, name: str, general_calls: list[int]
) -> None:
    # Given a warm function with 1.5 s left at its next invocation (about 1.2 s for the handler)
    release = threading.Event()

    def stuck(batch: MessageBatch) -> None:
        if batch.messages[0].body == "-1":
            return
        batch.messages[0].ack()
        release.wait(10)

    function = lambda_handler(config=config(), client=sqs)(stuck)
    mapping = warm(function, sqs, name)
    mapping.function_timeout = 1.5
    url = mapping.url
    sqs.send_message_batch(
        QueueUrl=url, Entries=[{"Id": str(b), "MessageBody": json.dumps(b)} for b in (0, 1, 2)]
    )
    messages = mapping.receive(wait_seconds=1)
    # When the handler runs past its budget
    started = time.monotonic()
    try:
        failed = mapping.invoke(function, messages)
    finally:
        release.set()
    # Then the hot path returned in time, reporting the undecided records; the ack held
    assert time.monotonic() - started < 60  # a hang guard, not a timing
    assert len(general_calls) == 1
    first = messages[0]["MessageId"]
    assert failed == {m["MessageId"] for m in messages} - {first}
    assert sorted(m["Body"] for m in drain(sqs, name)) == sorted(
        m["Body"] for m in messages if m["MessageId"] != first
    )


async def _async_handler(batch: MessageBatch) -> None:
    return None


LEFT_TO_THE_GENERAL_PATH: dict[str, tuple[dict[str, Any], dict[str, Any], Handler]] = {
    "metrics": ({"metrics": "emf"}, {}, lambda batch: None),
    "max_message_age": ({"max_message_age": 3600}, {}, lambda batch: None),
    "body_model": ({}, {"body_model": int}, lambda batch: None),
    "envelope": ({"envelope": "sns"}, {}, lambda batch: None),  # issue 31 item 4
    "an async handler": ({}, {}, _async_handler),
}


@pytest.mark.parametrize("case", LEFT_TO_THE_GENERAL_PATH)
def test_where_a_step_applies_every_invocation_takes_the_general_path(
    sqs: Any, name: str, case: str, general_calls: list[int]
) -> None:
    # Given a function with metrics, screening, or an async handler
    values, options, handler = LEFT_TO_THE_GENERAL_PATH[case]
    function = lambda_handler(config=config(**values), client=sqs, **options)(handler)
    # When it handles two plain events of one queue
    mapping = warm(function, sqs, name)
    sqs.send_message(QueueUrl=mapping.url, MessageBody="1")
    assert mapping.invoke(function, mapping.receive(wait_seconds=1)) == set()
    function.close()
    # Then both took the general path
    assert len(general_calls) == 2


def test_records_with_sqsbatchs_attribute_take_the_general_path(
    sqs: Any, name: str, general_calls: list[int]
) -> None:
    # Given a warm function, and a record sent by sqsbatch's Producer (its attribute)
    seen: list[Any] = []
    function = lambda_handler(config=config(), client=sqs)(
        lambda batch: seen.extend(m.body for m in batch.messages)
    )
    mapping = warm(function, sqs, name)
    Producer(name, client=sqs).send({"n": 1})
    # When it comes
    assert mapping.invoke(function, mapping.receive(wait_seconds=1)) == set()
    # Then the general path decoded it
    assert len(general_calls) == 2
    assert seen[-1] == {"n": 1}


def test_a_record_past_max_message_age_is_screened_on_a_warm_function(sqs: Any, name: str) -> None:
    # Given a warm function with max_message_age, whose wall clock then moves two hours on
    now = [time.time()]
    cfg = config(max_message_age=3600, dead_letter_queue=f"{name}-dlq")
    create_queue(f"{name}-dlq", client=sqs)
    function = LambdaAdapter(lambda batch: None, cfg, client=sqs, wall_clock=lambda: now[0])
    mapping = warm(function, sqs, name)
    now[0] += 7200
    # When a plain record comes
    sqs.send_message(QueueUrl=mapping.url, MessageBody="1")
    assert mapping.invoke(function, mapping.receive(wait_seconds=1)) == set()
    # Then it was dead-lettered before the handler, as on a cold function
    assert [m["Body"] for m in drain(sqs, f"{name}-dlq")] == ["1"]
    assert depth(sqs, name) == 0
