"""The health file and the stall watchdog on the long-running front ends: the sync poller, the
async poller and the redrive daemon (Lambda has no health file: its runtime is the health check).

Given a local SQS behind a loopback proxy that can go silent (it accepts and never answers),
settings that shrink the long poll to 1 s and the read timeout margin to 1 s, the tests wait for
states (the file fresh, the file stale, the loop ended), never for a time.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError
from typer.testing import CliRunner, Result

from sqsbatch import AsyncConsumer, Consumer, ConsumerConfig, MessageBatch
from sqsbatch._async.flavour import default_client as async_default_client
from sqsbatch._shell.botocore import receives_fail_fast
from sqsbatch._shell.health import age_seconds
from sqsbatch._sync.flavour import default_client as sync_default_client
from sqsbatch.cli.app import app
from sqsbatch.dev.server import LocalSqs
from sqsbatch.errors import ConfigError, SqsBatchError
from sqsbatch.limits import SqsLimits
from tests.support.silent_proxy import SilentProxy, silent_proxy
from tests.support.waiting import wait_for

LIMITS = SqsLimits(max_wait_seconds=1)
FAST = {"stall_seconds": 3.0, "read_timeout_margin": 1.0, "max_batch_timeout": 0.0}
GUARD_SECONDS = 90.0
"""Only a guard against a hung test: every wait ends on a state long before."""


def health(path: Path, max_age: float = 2.0) -> Result:
    return CliRunner().invoke(app, ["health", str(path), "--max-age", str(max_age)])


def is_fresh(path: Path) -> bool:
    return health(path).exit_code == 0


def is_stale(path: Path) -> bool:
    result = health(path)
    return result.exit_code == 1 and "last touched" in result.output


@pytest.fixture
def proxy(local_sqs: LocalSqs, monkeypatch: pytest.MonkeyPatch) -> Iterator[SilentProxy]:
    """The pollers make their own client (the product's timeouts), at the proxy."""
    with silent_proxy(local_sqs.endpoint_url) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", proxy.endpoint_url)
        yield proxy


class Runner:
    """A poller's `run()` on a thread of its own; what it raised, once it ended."""

    def __init__(self, run: Callable[[], None]) -> None:
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, args=(run,), daemon=True)
        self.thread.start()

    def _main(self, run: Callable[[], None]) -> None:
        try:
            run()
        except BaseException as exc:  # handed to the test
            self.error = exc

    def ended(self) -> bool:
        return not self.thread.is_alive()


def make(kind: str, name: str, handler: Callable[[MessageBatch], None], **keywords: Any) -> Any:
    """A sync or async poller of `handler` with the fast settings (its own client)."""
    config = ConsumerConfig(**{**FAST, **keywords.pop("config", {})})
    if kind == "sync":
        return Consumer(name, handler, config, limits=LIMITS, **keywords)

    async def handle(batch: MessageBatch) -> None:
        await asyncio.to_thread(handler, batch)

    return AsyncConsumer(name, handle, config, limits=LIMITS, **keywords)


def run_in_thread(consumer: Any, idle_seconds: float | None = None) -> Runner:
    """`run()` (or `run_until_idle`) of a sync or async poller, on a thread."""
    call = consumer.run if idle_seconds is None else lambda: consumer.run_until_idle(idle_seconds)
    if isinstance(consumer, AsyncConsumer):
        return Runner(lambda: asyncio.run(call()))
    return Runner(call)


def start(kind: str, name: str, handler: Callable[[MessageBatch], None], **keywords: Any) -> Any:
    consumer = make(kind, name, handler, **keywords)
    return consumer, run_in_thread(consumer)


def start_held(
    kind: str, sqs: Any, name: str, **config: Any
) -> tuple[str, Any, Runner, threading.Event]:
    """A queue `name` with one message, and a poller (`config` on top of the fast settings)
    whose handler has begun and waits, holding its batch, until the event returned is set."""
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="held")
    started, release = threading.Event(), threading.Event()

    def held(batch: MessageBatch) -> None:
        started.set()
        release.wait(GUARD_SECONDS)

    consumer, runner = start(kind, name, held, config=config)
    wait_for(started.is_set, "the handler runs")
    return url, consumer, runner, release


KINDS = ["sync", "async"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_poller_whose_endpoint_stops_answering_fails_its_health_check_and_its_watchdog_exits(
    kind: str, sqs: Any, name: str, proxy: SilentProxy, tmp_path: Path
) -> None:
    # Given a poller with a health file, consuming through the proxy
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="before")
    seen: list[str] = []
    path = tmp_path / "health"
    consumer, runner = start(
        kind, name, lambda b: seen.extend(m.body for m in b.messages), health_file=path
    )
    # (settled too: a delete still out when the endpoint goes silent would hold run() through
    # its rounds of retries, each a read timeout per attempt, longer than this test's guard)
    wait_for(
        lambda: seen == ["before"] and consumer.stats.as_dict()["acked"] == 1 and is_fresh(path),
        "a message consumed and settled, the file fresh",
    )
    # When the endpoint accepts connections and never answers
    proxy.silence()
    # Then the health check fails, saying how stale the file is, and the watchdog ends run()
    wait_for(lambda: is_stale(path), "sqsbatch health fails")
    wait_for(runner.ended, "the watchdog stops the poller")
    assert isinstance(runner.error, SqsBatchError), runner.error
    assert "stalled" in str(runner.error) and "stall_seconds=3" in str(runner.error)


@pytest.mark.parametrize("kind", KINDS)
def test_a_poller_touches_its_health_file_after_empty_long_polls(
    kind: str, sqs: Any, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an empty queue and a poller with a health file
    sqs.create_queue(QueueName=name)
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", sqs.meta.endpoint_url)
    path = tmp_path / "health"
    consumer, runner = start(kind, name, lambda b: None, health_file=path)
    # When it has done a few empty long polls
    wait_for(lambda: age_seconds(path, time.time()) is not None, "a first touch")
    first = os.stat(path).st_mtime_ns
    wait_for(lambda: os.stat(path).st_mtime_ns > first, "a later touch")
    # Then it is healthy, and it is not stalled: receiving is alive
    assert is_fresh(path)
    wait_for(lambda: consumer.requests_by_operation.get("receive_message", 0) >= 5, "5 polls")
    consumer.stop()
    wait_for(runner.ended, "the poller stopped")
    assert runner.error is None


@pytest.mark.parametrize("kind", KINDS)
def test_a_poller_whose_every_slot_is_busy_is_touched_and_not_stalled(
    kind: str, sqs: Any, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given one slot, and a handler that runs past stall_seconds (inside its handler_timeout)
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="slow")
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", sqs.meta.endpoint_url)
    path = tmp_path / "health"
    touches: list[int] = []
    began = time.monotonic()

    def slow(batch: MessageBatch) -> None:
        start_ns = os.stat(path).st_mtime_ns
        # busy for twice stall_seconds: no receive runs meanwhile (the only slot is taken)
        while time.monotonic() - began < 2 * FAST["stall_seconds"]:
            time.sleep(0.05)
        touches.append(os.stat(path).st_mtime_ns - start_ns)

    consumer, runner = start(kind, name, slow, health_file=path, config={"handler_timeout": 60})
    # When the handler is done
    wait_for(lambda: bool(touches), "the handler ran")
    consumer.stop()
    wait_for(runner.ended, "the poller stopped")
    # Then the file was touched while it ran, and the watchdog did not fire
    assert touches[0] > 0
    assert runner.error is None
    assert consumer.stats.as_dict()["acked"] == 1


@pytest.mark.parametrize("kind", KINDS)
def test_run_until_idle_raises_the_stall_too(
    kind: str, sqs: Any, name: str, proxy: SilentProxy, tmp_path: Path
) -> None:
    # Given run_until_idle with an idle limit far beyond stall_seconds, polling an empty queue
    sqs.create_queue(QueueName=name)
    path = tmp_path / "health"
    runner = run_in_thread(make(kind, name, lambda b: None, health_file=path), idle_seconds=600)
    wait_for(lambda: is_fresh(path), "the file fresh")
    # When the endpoint stops answering
    proxy.silence()
    # Then it raises the watchdog's error instead of waiting for an idle that never comes
    wait_for(runner.ended, "the watchdog stops the poller")
    assert isinstance(runner.error, SqsBatchError), runner.error
    assert "stalled" in str(runner.error)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("where", "says"),
    [
        ("missing/health", "no directory"),
        ("a-file/health", "no directory"),
        (".", "it is a directory"),
        ("/proc/sqsbatch-health", "cannot write it"),
    ],
)
def test_a_bad_health_file_is_one_clear_error_before_anything_starts(
    kind: str, where: str, says: str, tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_text("")
    path = Path(where) if where.startswith("/") else tmp_path / where
    config = ConsumerConfig()
    with pytest.raises(ConfigError, match=f"health_file=.*{says}"):
        if kind == "sync":
            Consumer("q", lambda b: None, config, health_file=path, client=object())
        else:

            async def nothing(batch: MessageBatch) -> None:
                return None

            AsyncConsumer("q", nothing, config, health_file=path, client=object())


@pytest.mark.parametrize("value", [0, -1, "soon", True])
def test_a_bad_stall_seconds_is_one_clear_error(value: object) -> None:
    with pytest.raises(ConfigError, match="stall_seconds="):
        ConsumerConfig(stall_seconds=value)  # type: ignore[arg-type]


def test_stall_seconds_comes_from_the_environment_and_defaults_to_three_polls_plus_visibility(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Consumer("q", lambda b: None, ConsumerConfig(), client=object()).stall_seconds == 90
    quick = Consumer("q", lambda b: None, ConsumerConfig(), client=object(), limits=LIMITS)
    assert quick.stall_seconds == 3 * 1 + 30
    monkeypatch.setenv("SQSBATCH_STALL_SECONDS", "12.5")
    assert Consumer("q", lambda b: None, ConsumerConfig(), client=object()).stall_seconds == 12.5


@pytest.mark.parametrize("kind", KINDS)
def test_the_pollers_client_times_out_a_silent_receive_once_and_botocore_does_not_retry_it(
    kind: str, sqs: Any, name: str, proxy: SilentProxy
) -> None:
    # Given the client a poller makes for itself (long poll 1 s, margin 0.5 s)
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    proxy.silence()
    # When a receive meets an endpoint that never answers
    if kind == "sync":
        client = sync_default_client(long_poll_seconds=1, margin_seconds=0.5)
        assert client.meta.config.read_timeout == 1.5
        with pytest.raises(ReadTimeoutError):
            client.receive_message(QueueUrl=url, WaitTimeSeconds=1)
    else:

        async def receive() -> None:
            async with async_default_client(long_poll_seconds=1, margin_seconds=0.5) as client:
                assert client.meta.config.read_timeout == 1.5
                receives_fail_fast(client)
                await client.receive_message(QueueUrl=url, WaitTimeSeconds=1)

        with pytest.raises(ReadTimeoutError):
            asyncio.run(receive())
    # Then it gave up after one read timeout: one connection, no retry of botocore's
    assert proxy.swallowed == 1


@pytest.mark.parametrize("kind", KINDS)
def test_the_watchdog_lets_the_batch_in_flight_finish_and_settle_before_it_raises(
    kind: str, sqs: Any, name: str, proxy: SilentProxy, caplog: pytest.LogCaptureFixture
) -> None:
    # Given two slots, one of them running a handler that waits to be released (the free
    # slot's receive, silenced, fails after 1 + 6 s: by then the test has resumed the endpoint;
    # at a 1 s margin a CI run was slower, and that failure rightly refused the settle after it)
    url, consumer, runner, release = start_held(
        kind, sqs, name, max_concurrency=2, read_timeout_margin=6.0
    )
    # When the endpoint stops answering until the watchdog fires (one slot is free: not busy)
    proxy.silence()
    wait_for(lambda: "stalled" in caplog.text, "the watchdog fires")
    assert not runner.ended()  # it waits for the batch in flight
    proxy.resume()
    release.set()
    wait_for(runner.ended, "the poller stopped")
    # Then the batch was settled (acked: deleted) before run() raised
    assert isinstance(runner.error, SqsBatchError) and "stalled" in str(runner.error)
    assert consumer.stats.as_dict()["acked"] == 1
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "0"
    assert attributes["ApproximateNumberOfMessagesNotVisible"] == "0"


@pytest.mark.parametrize("kind", KINDS)
def test_a_delete_caught_by_a_silent_endpoint_gets_one_attempt_once_the_watchdog_fires(
    kind: str, sqs: Any, name: str, proxy: SilentProxy
) -> None:
    # Given one slot whose handler is held until the endpoint has gone silent
    url, consumer, runner, release = start_held(kind, sqs, name, visibility_timeout=5)
    # When the endpoint stops answering and the handler returns: its delete meets the silence
    proxy.silence()
    release.set()
    # Then the watchdog ends run(): botocore's retries and the rounds of entry retries stop
    wait_for(runner.ended, "the watchdog stops the poller")
    assert isinstance(runner.error, SqsBatchError) and "stalled" in str(runner.error)
    assert consumer.requests_by_operation["delete_message_batch"] == 1  # no second round
    assert consumer.stats.as_dict()["acked"] == 0
    # and the message, not deleted, comes back after its visibility timeout
    wait_for(lambda: depth(sqs, url) == 1, "the message visible again")


def depth(sqs: Any, url: str) -> int:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])
