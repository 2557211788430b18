"""examples/poison_messages.py behind a simulated event source mapping: a valid order is
handled, an invalid body and a deleted tenant's order go to the DLQ with their reasons, and an
expired one never reaches the handler."""

from __future__ import annotations

import time
from typing import Any

import pytest

from sqsbatch import Producer, create_queue
from sqsbatch._core.envelope import decode
from tests.support.front_ends import EventSourceMapping, load_example
from tests.support.sqs_helpers import depth, drain


def test_the_poison_example_dead_letters_what_it_cannot_process(
    sqs: Any, name: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Given orders: fine, of a deleted tenant, invalid, and one past its 1 s deadline
    dlq = f"{name}-dlq"
    create_queue(name, dead_letter_queue=dlq, client=sqs)
    example = load_example("poison_messages")
    producer = Producer(name, client=sqs)
    producer.send(example.Order(id=1, tenant="acme"))
    producer.send(example.Order(id=2, tenant="gone-inc"))
    producer.send({"id": "three"})
    late = Producer(name, client=sqs, clock=lambda: time.time() - 2)  # its clock 2 s behind
    late.send(example.Order(id=4, tenant="acme"), ttl_seconds=1)  # so already past its deadline
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", sqs.meta.endpoint_url)
    function = example.handler
    function._client = sqs
    # When the event source mapping invokes it until the queue is idle
    caplog.set_level("INFO", logger="poison_messages")
    EventSourceMapping(sqs, name).run_until_idle(function)
    # Then order 1 was processed, and the rest are in the DLQ, each with why
    assert "order 1 for acme processed" in caplog.text
    assert "order 4" not in caplog.text
    reasons = {}
    for raw in drain(sqs, dlq):
        [death] = decode(raw).envelope.deaths
        reasons[raw["Body"]] = death.reason
    assert reasons == {
        '{"id":2,"tenant":"gone-inc"}': "tenant gone-inc deleted",
        '{"id":"three"}': "invalid_body",
        '{"id":4,"tenant":"acme"}': "expired",
    }
    assert depth(sqs, name) == 0
