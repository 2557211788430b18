"""The sync poller calls its handler inline, on the slot's own thread, and one watcher per run
keeps time for every running batch: heartbeats while a handler runs, and past
`handler_timeout` the batch is settled without it while it runs on, unwaited.

No sleep decides an outcome: a handler that must outlast something waits on a gate (an Event),
and the tests wait for states, never for guessed times.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from contextvars import ContextVar
from types import FrameType
from typing import Any

import pytest
from opentelemetry import trace

from sqsbatch import Consumer, ConsumerConfig, MessageBatch, Producer
from sqsbatch.limits import SqsLimits
from tests.support.faults import ClientProxy
from tests.support.scenarios import Recorder
from tests.support.spans import Spans
from tests.support.sqs_helpers import depth, fill
from tests.support.waiting import wait_for

WAIT = 30.0
"""How long a test waits for a state before it fails (never reached when all is well)."""
VAR: ContextVar[str] = ContextVar("VAR")


class Calls(ClientProxy):
    """Proxies a boto3 client; records each call (operation, thread, 'start'/'end'), and can
    hold calls of one operation at a gate."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self._lock = threading.Lock()
        self.log: list[tuple[str, str, int]] = []
        self.held: dict[str, tuple[threading.Event, threading.Event]] = {}

    def hold(self, op: str) -> tuple[threading.Event, threading.Event]:
        """The next call of `op` sets the first event, then waits for the second."""
        gates = threading.Event(), threading.Event()
        self.held[op] = gates
        return gates

    def ops(self, op: str) -> list[tuple[str, int]]:
        with self._lock:
            return [(when, thread) for name, when, thread in self.log if name == op]

    def index(self, op: str, when: str) -> list[int]:
        with self._lock:
            return [i for i, (name, w, _) in enumerate(self.log) if name == op and w == when]

    def _call(self, op: str, target: Callable[..., Any], params: dict[str, Any]) -> Any:
        with self._lock:
            self.log.append((op, "start", threading.get_ident()))
            gates = self.held.pop(op, None)
        if gates is not None:
            gates[0].set()
            assert gates[1].wait(WAIT)
        try:
            return target(**params)
        finally:
            with self._lock:
                self.log.append((op, "end", threading.get_ident()))


def in_thread(target: Any) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_the_handler_runs_on_its_slots_thread_in_a_copy_of_the_slots_context(
    sqs: Any, name: str, spans: Spans
) -> None:
    # Given two messages, handled one per batch, by a handler that sets a context variable
    fill(sqs, name, ["a", "b"])
    client = Calls(sqs)
    seen: list[tuple[str, int, str | None, str]] = []

    def handler(batch: MessageBatch) -> None:
        span = trace.get_current_span()
        span_name = getattr(span, "name", "")
        seen.append((batch.messages[0].body, threading.get_ident(), VAR.get(None), span_name))
        VAR.set("set by a handler")

    # When one slot handles them
    config = ConsumerConfig(max_batch_size=1, max_batch_timeout=0, max_concurrency=1)
    consumer = Consumer(name, handler, config, client=client)
    consumer.run_until_idle(0.5)

    # Then each handler ran on the thread that received and settled its batch (no thread of
    # its own), under the batch's span, and the first one's change did not reach the second
    assert consumer.stats.acked == 2 and depth(sqs, name) == 0
    receivers = {thread for _, thread in client.ops("receive_message")}
    deleters = {thread for _, thread in client.ops("delete_message_batch")}
    assert {thread for _, thread, _, _ in seen} <= receivers & deleters
    assert sorted((body, var, span) for body, _, var, span in seen) == [
        ("a", None, f"process {name}"),
        ("b", None, f"process {name}"),
    ]
    assert VAR.get(None) is None  # nor the test's


def test_a_handler_running_past_its_first_heartbeat_is_kept_hidden_then_settles_once(
    sqs: Any, name: str
) -> None:
    # Given a handler that runs until its messages' visibility was extended, and a heartbeat
    # held until the handler has returned (it is under way when the handler ends)
    fill(sqs, name, ["slow"])
    client = Calls(sqs)
    beating, go_on = client.hold("change_message_visibility_batch")
    returned = threading.Event()

    def handler(batch: MessageBatch) -> None:
        assert beating.wait(WAIT), "no heartbeat came"
        returned.set()

    def release_the_heartbeat_once_the_handler_returned() -> None:
        assert returned.wait(WAIT)
        go_on.set()

    # When the poller handles it with a short visibility timeout (a heartbeat within ~1 s)
    config = ConsumerConfig(max_batch_timeout=0, visibility_timeout=2)
    consumer = Consumer(name, handler, config, client=client)
    helper = in_thread(release_the_heartbeat_once_the_handler_returned)
    consumer.run_until_idle(0.5)
    helper.join(WAIT)

    # Then the batch settled once (acked), after the heartbeat under way had ended, and no
    # heartbeat came after the settle
    assert consumer.stats.acked == 1 and consumer.stats.handler_timeouts == 0
    assert depth(sqs, name) == 0
    [delete] = client.index("delete_message_batch", "start")
    beats_started = client.index("change_message_visibility_batch", "start")
    beats_ended = client.index("change_message_visibility_batch", "end")
    assert beats_started and max(beats_ended) < delete
    assert max(beats_started) < delete


@pytest.mark.parametrize("ending", ["run_until_idle", "stop"])
def test_a_handler_stuck_past_its_timeout_is_settled_without_it_and_not_waited_for(
    ending: str, sqs: Any, name: str, spans: Spans, caplog: Any
) -> None:
    # Given a queue with a message whose handler hangs (first delivery) and a later message
    fill(sqs, name, ["stuck"])
    gate, finished = threading.Event(), threading.Event()
    recorder = Recorder()
    threads: dict[str, int] = {}
    consumer: Consumer

    def handler(batch: MessageBatch) -> None:
        recorder.saw(batch)
        message = batch.messages[0]
        threads[f"{message.body} {message.attempts}"] = threading.get_ident()
        if message.body == "stuck" and message.attempts == 1:
            Producer(name, client=sqs).send("later")
            assert gate.wait(WAIT * 4)
            message.ack()  # too late: ignored
            finished.set()
        elif message.body == "later" and ending == "stop":
            consumer.stop()

    # When one slot handles them with a short handler_timeout
    config = ConsumerConfig(
        max_batch_size=1, max_batch_timeout=0, max_concurrency=1, handler_timeout=0.5
    )
    consumer = Consumer(name, handler, config, client=sqs, limits=SqsLimits(max_wait_seconds=1))
    run = consumer.run if ending == "stop" else lambda: consumer.run_until_idle(1.0)
    runner = in_thread(run)
    try:
        runner.join(WAIT * 2)

        # Then the run ended while the handler still hangs: the batch was settled as timed out
        # (retried at once, retry_delay 0), and a replacement slot handled what came next
        assert not runner.is_alive(), "the run waited for a stuck handler"
        assert not finished.is_set()
        assert consumer.stats.handler_timeouts == 1
        if ending == "run_until_idle":
            assert recorder.attempts() == {"stuck": [1, 2], "later": [1]}
            assert depth(sqs, name) == 0
        else:
            assert recorder.attempts()["later"] == [1]
        assert threads["later 1"] != threads["stuck 1"]
        [stuck_span] = [
            s for s in spans.named(f"process {name}") if s.status.status_code.name == "ERROR"
        ]
        assert (stuck_span.attributes or {})["error.type"] == "HandlerTimeout"

        # And when the handler ends at last, its ack is ignored and nothing else happens
        stats, requests = consumer.stats.as_dict(), consumer.requests
        with caplog.at_level(logging.WARNING, logger="sqsbatch"):
            gate.set()
            assert finished.wait(WAIT)
            wait_for(lambda: "ignored ack() on message" in caplog.text, "the ignored ack logged")
            # its slot's thread is done with the batch (back in its pool, or ended)
            idle = threads["stuck 1"]
            wait_for(lambda: not in_poller(sys._current_frames().get(idle)), "the slot idle")
        assert consumer.stats.as_dict() == stats and consumer.requests == requests
        assert "Failed to detach context" not in caplog.text
    finally:
        gate.set()  # the stuck thread ends, whatever failed above


def in_poller(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code.co_filename.endswith(os.path.join("_sync", "consumer.py")):
            return True
        frame = frame.f_back
    return False
