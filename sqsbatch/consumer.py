"""`Consumer`: the long-running boto3 poller (ECS, EC2, a laptop).

A thin shell: it receives, waits and calls SQS; every decision comes from `batching`,
`settlement`, `consuming`, `receivers` and `outbox`. The main thread starts receivers as
`receivers.Receivers` allows (one while the queue is quiet, up to `max_concurrency` while it has
a backlog); each runs on a worker thread of its own slot: it assembles its own batch window, then
supervises its handler (heartbeat, `handler_timeout`) and settles its batch in batch calls.
"""

from __future__ import annotations

import logging
import random
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from sqsbatch.backoff import pause_seconds
from sqsbatch.batching import BatchWindow
from sqsbatch.calls import BatchRun
from sqsbatch.config import ConsumerConfig
from sqsbatch.consuming import (
    Assembly,
    ConsumerStats,
    Plan,
    Watch,
    check_handler,
    connections_for,
    drops,
    extended,
    handler_end,
    heartbeat_entries,
    plan_settlement,
    receive_visibility,
    refusals,
    sent_keys,
    split_received,
    tally,
)
from sqsbatch.errors import ConfigError, SqsBatchError, SqsError
from sqsbatch.handler_tasks import HandlerThread
from sqsbatch.lifecycle import graceful_signals
from sqsbatch.limits import SQS_LIMITS, SqsLimits
from sqsbatch.message import MessageBatch, _Delivery
from sqsbatch.outbox import Settlement
from sqsbatch.queues import (
    QueueSettings,
    check_dead_letter_queue,
    lookup_refusal,
    policy_query,
    resolve_settings,
)
from sqsbatch.receivers import Receivers
from sqsbatch.settlement import LastFailure, Outcome
from sqsbatch.sqs_sync import SyncSqs, default_client
from sqsbatch.transport import is_fifo, is_transient, queue_name, receive_params

__all__ = ["BatchHandler", "Consumer"]

log = logging.getLogger("sqsbatch")

WAKE_SECONDS = 0.5
"""How long the main thread waits for news from its slots before it looks again anyway."""


class BatchHandler(Protocol):
    def __call__(self, batch: MessageBatch, /) -> object: ...


class Consumer:
    """Polls one queue and hands batches to `handler`, with Cloudflare Queues' semantics."""

    def __init__(
        self,
        queue: str,
        handler: BatchHandler,
        config: ConsumerConfig | None = None,
        *,
        client: Any = None,
        limits: SqsLimits = SQS_LIMITS,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        check_handler(handler, is_async=False)
        self.config = config if config is not None else ConsumerConfig.load(queue)
        check_dead_letter_queue(queue, self.config.dead_letter_queue)
        self.queue = queue
        self.handler = handler
        self.stats = ConsumerStats()
        self._limits = limits
        self._clock = clock
        self._wall_clock = wall_clock
        self._fifo = is_fifo(queue)
        self._stopping = threading.Event()
        self._changed = threading.Event()  # a slot has news: a receiver ended, a batch settled
        self._lock = threading.Lock()
        self._receivers = Receivers(self.config.max_concurrency)
        self._random = random.Random()
        pool = connections_for(self.config)
        self._sqs = SyncSqs(
            client if client is not None else default_client(max_pool_connections=pool)
        )
        self._url = ""
        self._settings = QueueSettings(self.config, LastFailure.LEAVE)
        self._dlq_url: str | None = None
        self._last_activity = 0.0
        self._failures = 0  # consecutive failed receives
        self._fatal: SqsBatchError | None = None

    @property
    def requests(self) -> int:
        """SQS requests made so far (the bill)."""
        return sum(self._sqs.requests.values())

    @property
    def requests_by_operation(self) -> dict[str, int]:
        """SQS requests made so far, per boto3 operation name."""
        return dict(self._sqs.requests)

    def stop(self) -> None:
        """Stop receiving; in-flight batches finish and settle, then `run()` returns."""
        self._stopping.set()
        self._changed.set()

    def run(self) -> None:
        """Poll until `stop()` or SIGTERM/SIGINT, then shut down gracefully."""
        with graceful_signals(self._on_signal):
            self._loop(idle_seconds=None)

    def run_until_idle(self, idle_seconds: float = 1.0) -> None:
        """Poll until nothing arrived for `idle_seconds` and nothing is in flight."""
        if idle_seconds <= 0:
            raise ConfigError(f"idle_seconds={idle_seconds!r} is invalid: must be > 0")
        self._loop(idle_seconds=idle_seconds)

    # -- the loop -------------------------------------------------------------------------------

    def _start(self) -> None:
        self._stopping.clear()
        self._receivers = Receivers(self.config.max_concurrency)
        self._fatal = None
        self._url = self._sqs.queue_url(self.queue)
        attributes, refused = None, ""
        try:
            answer = self._sqs.call("get_queue_attributes", policy_query(self._url))
            attributes = answer.get("Attributes", {})
        except SqsError as exc:
            refused = lookup_refusal(exc)
        self._settings = resolve_settings(self.queue, self.config, attributes, refused=refused)
        for level, note in self._settings.notes:
            log.log(level, "%s", note)
        dlq = self._settings.config.dead_letter_queue
        self._dlq_url = self._sqs.queue_url(dlq) if dlq is not None else None
        self._last_activity = self._clock()

    def _loop(self, idle_seconds: float | None) -> None:
        self._start()
        with ThreadPoolExecutor(self.config.max_concurrency, "sqsbatch-slot") as pool:
            while not self._stopping.is_set():
                self._changed.clear()
                count = self._next_receivers(idle_seconds)
                if count is None:
                    break
                for _ in range(count):
                    pool.submit(self._serve, idle_seconds)
                self._changed.wait(WAKE_SECONDS)
        log.info("consumer of %s stopped: %s", self.queue, self.stats.as_dict())
        if self._fatal is not None:
            raise self._fatal

    def _next_receivers(self, idle_seconds: float | None) -> int | None:
        """How many receivers to start now; None once idle with nothing in flight."""
        idle = idle_seconds is not None and self._idle_for() >= idle_seconds
        with self._lock:
            return self._receivers.start(stopping=self._stopping.is_set(), idle=idle)

    def _serve(self, idle_seconds: float | None) -> None:
        """One slot: receive a batch of its own, then hand it to the handler and settle it."""
        deliveries: list[_Delivery] = []
        try:
            deliveries = self._assemble(idle_seconds)
        except Exception:  # a bug of ours: what was received reappears after its visibility
            log.exception("receiving from %s failed", self.queue)
        finally:
            self._stopped_receiving(with_batch=bool(deliveries))
        if deliveries:
            try:
                self._process(deliveries)
            finally:
                self._settled()

    def _received(self, got: int, asked: int) -> bool:
        with self._lock:
            return self._receivers.received(got=got, asked=asked)

    def _stopped_receiving(self, *, with_batch: bool) -> None:
        with self._lock:
            self._receivers.stopped_receiving(with_batch=with_batch)
        self._changed.set()

    def _settled(self) -> None:
        with self._lock:
            self._receivers.settled()
        self._changed.set()

    def _idle_for(self) -> float:
        return self._clock() - self._last_activity

    def _assemble(self, idle_seconds: float | None) -> list[_Delivery]:
        """Receive until the batch is due (full or window closed), or until stop/idle."""
        window: BatchWindow[_Delivery] = BatchWindow(
            self.config.max_batch_size, self.config.max_batch_timeout, self._limits
        )
        assembly = Assembly(window, idle_seconds)
        now = self._clock()
        stopping = self._stopping.is_set
        while ask := assembly.next_receive(now, self._idle_for(), stopping=stopping()):
            asked, wait_seconds = ask
            received = self._receive(asked, wait_seconds, window.remaining(now))
            now = self._clock()
            assembly.surplus = self._received(len(received), asked)
            if not assembly.add(received, asked=asked, now=now, stopping=stopping()):
                break
        return window.take()

    def _receive(self, asked: int, wait_seconds: int, window_left: float) -> list[_Delivery]:
        visibility = receive_visibility(self.config, window_left, self._limits)
        params = receive_params(
            self._url, max_messages=asked, wait_seconds=wait_seconds, visibility_timeout=visibility
        )
        received_at = self._clock()
        try:
            raw = self._sqs.call("receive_message", params).get("Messages", [])
        except SqsBatchError as exc:
            self.stats.add({"receive_errors": 1})
            if not is_transient(exc):  # the queue is gone, or the credentials are refused
                self._fatal = exc
                self.stop()
                return []
            self._failures += 1
            pause = pause_seconds(self._failures, random=self._random)
            log.warning("receive from %s failed (%s); retrying in %.1f s", self.queue, exc, pause)
            self._stopping.wait(pause)
            return []
        self._failures = 0
        received = split_received(
            raw,
            queue_url=self._url,
            received_at=received_at,
            visibility=visibility,
            wall_now=self._wall_clock(),
            limits=self._limits,
        )
        if received.postpone is not None:
            self._postpone(received.postpone)
        if received.deliveries:
            self._last_activity = self._clock()
            self.stats.add({"received": len(received.deliveries)})
        return received.deliveries

    def _postpone(self, plan: Settlement) -> None:
        first = self._sqs.execute(BatchRun(plan.first, limits=self._limits))
        sent = sent_keys(first)
        self._sqs.execute(BatchRun(plan.second(sent), limits=self._limits))
        self.stats.add({"postponed": len(sent)})

    # -- one batch, on a worker thread -----------------------------------------------------------

    def _process(self, deliveries: list[_Delivery]) -> None:
        batch = MessageBatch(queue_name(self.queue), deliveries)
        try:
            outcome, error = self._supervise(batch)
            plan = plan_settlement(
                batch,
                outcome,
                error,
                self._settings.config,
                queue_url=self._url,
                dlq_url=self._dlq_url,
                last_failure=self._settings.last_failure,
                now=self._clock(),
                wall_now=self._wall_clock(),
                fifo=self._fifo,
                limits=self._limits,
            )
            self._settle(batch, plan)
        except Exception:  # a bug of ours: the messages reappear after their visibility
            log.exception("settling a batch of %s failed", self.queue)
        finally:
            self._last_activity = self._clock()

    def _supervise(self, batch: MessageBatch) -> tuple[Outcome, BaseException | None]:
        """Run the handler; keep its messages hidden while it runs; stop waiting at the timeout."""
        thread = HandlerThread(self.handler, batch)
        watch = Watch.start(self._clock(), self.config)
        deliveries = batch._deliveries
        timed_out = False
        while not thread.done.is_set():
            now = self._clock()
            if watch.timed_out(now):
                timed_out = True  # the thread cannot be stopped: it runs on, unwaited
                break
            if not thread.done.wait(max(0.0, watch.wake_at(deliveries) - now)):
                self._heartbeat(deliveries)
        error = None if timed_out else thread.failure
        end = handler_end(batch, self.config, timed_out=timed_out, error=error)
        self.stats.add(end.counts)
        if end.log is not None:
            log.log(end.log[0], "%s", end.log[1], exc_info=end.error)
        return end.outcome, end.error

    def _heartbeat(self, deliveries: list[_Delivery]) -> None:
        now = self._clock()
        entries = heartbeat_entries(
            deliveries,
            queue_url=self._url,
            now=now,
            visibility_timeout=self.config.visibility_timeout,
            limits=self._limits,
        )
        if entries:
            run = self._sqs.execute(BatchRun(entries, limits=self._limits))
            self.stats.add({"expired_receipts": extended(deliveries, run, now)})

    def _settle(self, batch: MessageBatch, plan: Plan) -> None:
        first = self._sqs.execute(BatchRun(plan.settlement.first, limits=self._limits))
        sent = sent_keys(first)
        second = self._sqs.execute(BatchRun(plan.settlement.second(sent), limits=self._limits))
        counts = tally(plan, first, second)
        for level, text in refusals(first, second, refused=plan.settlement.refused, batch=batch):
            log.log(level, "settling on %s: %s", self.queue, text)
        for line in drops(batch, plan):
            log.warning("%s", line)
        self.stats.add(counts)

    def _on_signal(self, sig: signal.Signals) -> None:
        log.info("%s: stopping after in-flight batches", sig.name)
        self.stop()
