"""examples/ecs_worker.py runs: until idle (a batch job) and until SIGTERM (an ECS task)."""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

import pytest

from sqsbatch import Producer, create_queue
from sqsbatch._async.door import AsyncSqs
from sqsbatch.dev.server import LocalSqs
from tests.support.front_ends import load_example
from tests.support.sqs_helpers import depth


@pytest.fixture
def worker_env(local_sqs: LocalSqs, name: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The environment an ECS task definition would set, pointing at the local SQS."""
    for key, value in local_sqs.environment().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("QUEUE_NAME", name)
    monkeypatch.setenv("SQSBATCH_MAX_BATCH_TIMEOUT", "0.2")
    sqs = local_sqs.client()
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send_batch([{"body": {"id": n}} for n in range(5)])
    return sqs


def test_the_ecs_worker_runs_until_idle(worker_env: Any, name: str) -> None:
    consumer = load_example("ecs_worker").main(idle_seconds=1.0)
    assert consumer.stats.acked == 5
    assert depth(worker_env, name) == 0


def test_the_ecs_worker_stops_gracefully_on_sigterm(
    worker_env: Any, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the worker running as a service, its five messages handled and a long poll under
    # way (waited for, not guessed with sleeps: this must hold on a loaded machine)
    polling = threading.Event()
    returned: list[int] = []
    call = AsyncSqs.call

    async def watched(self: AsyncSqs, op: str, params: dict[str, Any], **kw: Any) -> Any:
        if op == "receive_message" and sum(returned) >= 5:
            polling.set()
        answer = await call(self, op, params, **kw)
        if op == "receive_message":
            returned.append(len(answer.get("Messages", [])))
        return answer

    monkeypatch.setattr(AsyncSqs, "call", watched)

    def stop_task() -> None:
        # When ECS sends SIGTERM during that long poll, and a message arrives just after
        if polling.wait(60):
            os.kill(os.getpid(), signal.SIGTERM)
            Producer(name, client=worker_env).send({"id": 99})
        else:  # never polled again: stop the worker all the same, the asserts say what failed
            os.kill(os.getpid(), signal.SIGTERM)

    stopper = threading.Thread(target=stop_task, daemon=True)
    stopper.start()
    consumer = load_example("ecs_worker").main()
    stopper.join(5)
    # Then the poll under way ended early, what it returned was delivered, all was settled
    assert polling.is_set()
    assert consumer.stats.acked == consumer.stats.received == 6
    assert depth(worker_env, name) == 0
