"""ECS scale-in protection through a real poller run (both pollers, moto on 127.0.0.1, the fake
ECS agent of tests/shell/test_task_protection.py): one take and one drop per busy period, none
without `ECS_AGENT_URI` or with `scale_in_protection = false`, and a protected poller still
drains on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from sqsbatch import AsyncConsumer, Consumer, ConsumerConfig, MessageBatch, create_queue
from sqsbatch._shell.task_protection import AGENT_ENV
from tests.shell.test_task_protection import DROP, FakeAgent
from tests.support.front_ends import aio_client, as_async
from tests.support.pollers import POLLERS, SHORT_POLLS, Background
from tests.support.waiting import wait_for

TAKE = {"ProtectionEnabled": True, "ExpiresInMinutes": 2}  # handler_timeout 60 s + a minute
CONFIG = ConsumerConfig(handler_timeout=60, max_batch_timeout=0.2)


@pytest.fixture
def agent(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAgent]:
    found = FakeAgent()
    monkeypatch.setenv(AGENT_ENV, found.uri)
    yield found
    found.release.set()
    found.server.shutdown()
    found.server.server_close()


def send(sqs: Any, url: str, count: int) -> None:
    entries = [{"Id": str(i), "MessageBody": f"m{i}"} for i in range(count)]
    sqs.send_message_batch(QueueUrl=url, Entries=entries)


@pytest.mark.parametrize("kind", POLLERS)
def test_each_busy_period_is_one_take_and_one_drop(
    kind: str, agent: FakeAgent, sqs: Any, name: str
) -> None:
    url = create_queue(name, client=sqs)
    handled: list[str] = []
    release = threading.Event()

    def script(batch: MessageBatch) -> None:
        assert release.wait(60)
        handled.extend(message.body for message in batch.messages)

    run = Background(kind, name, script, CONFIG, sqs).start()
    for period in (1, 2):
        release.clear()
        send(sqs, url, 3)
        taken, dropped = 2 * period - 1, 2 * period
        wait_for(lambda: len(agent.calls) == taken, "protection taken while busy")  # noqa: B023
        assert agent.bodies()[-1] == TAKE  # while the handler runs
        release.set()
        wait_for(lambda: len(agent.calls) == dropped, "protection dropped once idle")  # noqa: B023
        assert len(handled) == 3 * period
    run.stop()
    assert run.error is None
    assert agent.bodies() == [TAKE, DROP, TAKE, DROP]  # 2 calls per busy period


def run_to_idle(kind: str, config: ConsumerConfig, sqs: Any, name: str) -> Background:
    url = create_queue(name, client=sqs)
    send(sqs, url, 3)
    handled: list[str] = []

    def script(batch: MessageBatch) -> None:
        handled.extend(message.body for message in batch.messages)

    run = Background(kind, name, script, config, sqs, idle_seconds=0.5)
    run.start().join()
    assert run.error is None and len(handled) == 3
    return run


@pytest.mark.parametrize("kind", POLLERS)
def test_no_call_without_the_agent(
    kind: str, agent: FakeAgent, sqs: Any, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(AGENT_ENV)
    run = run_to_idle(kind, CONFIG, sqs, name)
    assert agent.calls == [] and not run.poller._protection.active


@pytest.mark.parametrize("kind", POLLERS)
def test_no_call_with_scale_in_protection_off(
    kind: str, agent: FakeAgent, sqs: Any, name: str
) -> None:
    config = ConsumerConfig(handler_timeout=60, max_batch_timeout=0.2, scale_in_protection=False)
    run = run_to_idle(kind, config, sqs, name)
    assert agent.calls == [] and not run.poller._protection.active


@pytest.mark.parametrize("kind", POLLERS)
def test_a_protected_poller_still_drains_on_sigterm(
    kind: str, agent: FakeAgent, sqs: Any, name: str
) -> None:
    """SIGTERM while a batch is protected: the batch finishes and is acked, protection is
    dropped, and `run()` returns (a deploy is not held up past the batch)."""
    url = create_queue(name, client=sqs)
    send(sqs, url, 3)
    handled: list[str] = []
    release = threading.Event()

    def script(batch: MessageBatch) -> None:
        assert release.wait(60)
        handled.extend(message.body for message in batch.messages)

    def terminate() -> None:  # what ECS does on a deploy, once the batch is protected
        wait_for(lambda: agent.bodies() == [TAKE], "protection taken")
        os.kill(os.getpid(), signal.SIGTERM)
        release.set()

    helper = threading.Thread(target=terminate, daemon=True)
    helper.start()
    if kind == "sync":
        Consumer(name, script, CONFIG, client=sqs, limits=SHORT_POLLS).run()
    else:

        async def main() -> None:
            async with aio_client(sqs) as aio:
                poller = AsyncConsumer(
                    name, as_async(script), CONFIG, client=aio, limits=SHORT_POLLS
                )
                await poller.run()

        asyncio.run(main())
    helper.join(60)
    assert sorted(handled) == ["m0", "m1", "m2"]
    assert agent.bodies() == [TAKE, DROP]
    visible = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert visible["ApproximateNumberOfMessages"] == "0"
    assert visible["ApproximateNumberOfMessagesNotVisible"] == "0"


@pytest.mark.parametrize("kind", POLLERS)
def test_a_hanging_agent_never_stalls_the_poller(
    kind: str, agent: FakeAgent, sqs: Any, name: str
) -> None:
    """The agent never answers: every message is still handled and settled, and the run ends
    (its last wait for the agent is bounded)."""
    agent.hang = True
    run_to_idle(kind, CONFIG, sqs, name)
    assert agent.bodies() == [TAKE]  # one call at a time: the take, still out
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    assert [attributes[n] for n in names] == ["0", "0"]


class Ahead:
    """The monotonic clock, `ahead` seconds ahead (a poller's injected clock)."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.ahead


@pytest.mark.parametrize("kind", POLLERS)
def test_a_long_handler_has_its_protection_renewed(
    kind: str, agent: FakeAgent, sqs: Any, name: str
) -> None:
    """handler_timeout 600 s: 11 minutes of protection, renewed once 5.5 minutes have passed on
    the poller's clock while the batch is still held."""
    url = create_queue(name, client=sqs)
    send(sqs, url, 1)
    clock = Ahead()
    release = threading.Event()
    config = ConsumerConfig(handler_timeout=600, max_batch_timeout=0.2)
    take = {"ProtectionEnabled": True, "ExpiresInMinutes": 11}

    def script(batch: MessageBatch) -> None:
        assert release.wait(60)

    async def handler(batch: MessageBatch) -> None:  # the event loop runs on meanwhile
        while not release.is_set():
            await asyncio.sleep(0.01)

    run = Background(
        kind,
        name,
        script if kind == "sync" else handler,
        config,
        sqs,
        clock=clock,
    ).start()
    wait_for(lambda: agent.bodies() == [take], "protection taken")
    clock.ahead = 331.0  # past half of 11 minutes
    wait_for(lambda: agent.bodies() == [take, take], "protection renewed while busy")
    release.set()
    wait_for(lambda: agent.bodies() == [take, take, DROP], "protection dropped once idle")
    run.stop()
    assert run.error is None
