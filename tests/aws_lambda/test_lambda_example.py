"""examples/lambda_function.py runs behind a simulated event source mapping, configured only by
its environment, as in Lambda."""

from __future__ import annotations

import pytest

from sqsbatch import Producer, create_queue
from sqsbatch.dev.server import LocalSqs
from tests.support.front_ends import EventSourceMapping, load_example
from tests.support.sqs_helpers import depth


def test_the_lambda_function_settles_through_lambda(
    local_sqs: LocalSqs, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the function's environment (endpoint, SQSBATCH_*) and six orders
    for key, value in local_sqs.environment().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("SQSBATCH_MAX_RETRIES", "3")
    monkeypatch.setenv("SQSBATCH_DEAD_LETTER_QUEUE", f"{name}-dlq")
    sqs = local_sqs.client()
    create_queue(name, dead_letter_queue=f"{name}-dlq", max_retries=3, client=sqs)
    Producer(name, client=sqs).send_batch([{"body": {"id": n}} for n in range(6)])
    function = load_example("lambda_function").handler
    # When Lambda invokes it until the queue is idle (order 3 is retried after 1-2 s)
    mapping = EventSourceMapping(sqs, name, window=0.2)
    try:
        mapping.run_until_idle(function, idle_seconds=3.0)
    finally:
        function.close()
    # Then only order 3 was ever reported failed, and everything was deleted in the end
    reported = [item for r in mapping.responses for item in r["batchItemFailures"]]
    assert len(reported) == 1
    assert depth(sqs, name) == 0 and depth(sqs, f"{name}-dlq") == 0
