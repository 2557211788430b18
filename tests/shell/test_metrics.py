"""`metrics = "emf"` on every front end: the lines on stdout are EMF documents CloudWatch would
accept (tests/support/emf.py), and they say what happened to the messages, on the local SQS."""

from __future__ import annotations

from typing import Any

import pytest

from sqsbatch import ConsumerConfig, MessageBatch, Producer, create_queue, lambda_handler
from sqsbatch.dev.server import LocalSqs
from tests.support.emf import check_lines, metric
from tests.support.front_ends import FRONT_ENDS, EventSourceMapping, FrontEnd, load_example

NAMESPACE = "Tests/sqsbatch"


def dead_letter_one_fail_one_once(batch: MessageBatch) -> None:
    """Body 0 is dead-lettered on request, body 2 fails its first delivery, the rest is acked."""
    fail = False
    for message in batch.messages:
        if message.body == 0:
            message.dead_letter("tenant gone")
        elif message.body == 2 and message.attempts == 1:
            fail = True
        else:
            message.ack()
    if fail:
        raise RuntimeError("downstream said 503")


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_metrics_count_what_happened_to_every_message(
    front_end: FrontEnd, sqs: Any, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    dlq = f"{name}-dlq"
    create_queue(name, dead_letter_queue=dlq, client=sqs)
    Producer(name, client=sqs).send_batch([{"body": n} for n in range(6)])
    config = ConsumerConfig(
        max_batch_size=10,
        max_batch_timeout=1,
        dead_letter_queue=dlq,
        metrics="emf",
        metrics_namespace=NAMESPACE,
    )
    capsys.readouterr()

    front_end.consume(name, dead_letter_one_fail_one_once, config, sqs, idle_seconds=1.5)

    documents = check_lines(capsys.readouterr().out)
    assert documents, "no metric line was written"
    assert {d["_aws"]["CloudWatchMetrics"][0]["Namespace"] for d in documents} == {NAMESPACE}
    total = {
        name_: sum(metric(documents, name_, QueueName=name))
        for name_ in ("Received", "Acked", "Retried", "DeadLettered", "HandlerErrors")
    }
    assert total == {
        "Received": 7,  # body 2 came twice
        "Acked": 5,
        "Retried": 1,
        "DeadLettered": 1,
        "HandlerErrors": 1,
    }
    assert metric(documents, "DeadLettered", QueueName=name, Reason="requested") == [1]
    sizes = metric(documents, "BatchSize", QueueName=name)
    assert sum(sizes) == 7 and all(1 <= size <= 10 for size in sizes)
    assert len(metric(documents, "HandlerDuration", QueueName=name)) == len(sizes)
    ages = metric(documents, "MessageAge", QueueName=name)
    assert len(ages) == len(sizes) and all(0 <= age < 600_000 for age in ages)


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_metrics_off_writes_nothing(
    front_end: FrontEnd, sqs: Any, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send_batch([{"body": n} for n in range(3)])
    capsys.readouterr()
    front_end.consume(name, lambda batch: None, ConsumerConfig(max_batch_timeout=1), sqs)
    assert capsys.readouterr().out == ""


POLLERS = [f for f in FRONT_ENDS if not f.name.startswith("lambda")]


@pytest.mark.parametrize("front_end", POLLERS, ids=lambda f: f.name)
def test_a_poller_writes_once_per_interval_even_when_idle(
    front_end: FrontEnd, sqs: Any, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    create_queue(name, client=sqs)
    config = ConsumerConfig(metrics="emf", metrics_interval=0.2, max_batch_timeout=0.1)
    capsys.readouterr()
    front_end.consume(name, lambda batch: None, config, sqs, idle_seconds=1.5)
    documents = check_lines(capsys.readouterr().out)
    # 1.5 s idle at one look per 0.5 s at most, then the last flush: several lines, all zero
    assert len(documents) >= 2
    assert set(metric(documents, "Received", QueueName=name)) == {0}
    assert metric(documents, "BatchSize", QueueName=name) == []


def test_under_lambda_each_invocation_writes_its_batch(
    sqs: Any, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send_batch([{"body": n} for n in range(4)])
    config = ConsumerConfig(metrics="emf", max_batch_size=2)
    function = lambda_handler(config=config, client=sqs)(lambda batch: None)
    mapping = EventSourceMapping(sqs, name, batch_size=2, window=0)
    capsys.readouterr()
    messages = mapping.receive(wait_seconds=1)
    mapping.invoke(function, messages)
    documents = check_lines(capsys.readouterr().out)
    assert len(documents) == 1  # one batch, one line, written before the function returned
    assert metric(documents, "Received", QueueName=name) == [len(messages)]
    assert metric(documents, "Acked", QueueName=name) == [len(messages)]
    assert metric(documents, "BatchSize", QueueName=name) == [len(messages)]


def test_the_operations_page_example_writes_what_its_handler_did(
    local_sqs: LocalSqs, name: str, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    for key, value in local_sqs.environment().items():
        monkeypatch.setenv(key, value)
    sqs = local_sqs.client()
    create_queue(name, dead_letter_queue=f"{name}-dlq", client=sqs)
    bodies = [{"tenant": "t1"}, {"tenant": None}, {"tenant": "t2"}]
    Producer(name, client=sqs).send_batch([{"body": body} for body in bodies])
    capsys.readouterr()
    load_example("metrics_emf").main(name, idle_seconds=1.5)
    documents = check_lines(capsys.readouterr().out)
    assert sum(metric(documents, "Acked", QueueName=name)) == 2
    assert metric(documents, "DeadLettered", QueueName=name, Reason="requested") == [1]
    assert {d["_aws"]["CloudWatchMetrics"][0]["Namespace"] for d in documents} == {"Shop/Orders"}
