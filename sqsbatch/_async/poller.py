"""The long-running poller (ECS, EC2, a laptop), written once for both flavours.

`sqsbatch/_async/poller.py` is the source and `sqsbatch/_sync/poller.py` is generated from it by
unasync (`make twins`; a test fails when it is stale): edit the source, never the generated
file. What threads and asyncio do their own way (the client, an event any thread may set, units
of work, a handler run against a deadline, signals) is in the flavour module beside each.

A thin shell: every decision comes from the core (`sqsbatch._core`), and every exchange with SQS
is one of its flows, driven by the door. The loop starts receivers as `Receivers` allows (one
while the queue is quiet, up to `max_concurrency` while it has a backlog); each holds a slot: it
assembles its own batch window, then supervises its handler (heartbeat, `handler_timeout`) and
settles its batch in batch calls, then receives again in the same slot while a receiver is
wanted. The loop hears from a slot only when it has something to do (a slot is free, or another
receiver could start), and looks at its slots every `WAKE_SECONDS` anyway.

Operating it: with `health_file` the poller touches that file after every completed receive and
while every slot is busy with a handler inside its `handler_timeout`; when it has been neither
for `stall_seconds`, the watchdog stops it and `run()` raises once what it could settle is
settled (docs/operations.md). The decisions are the core's `Liveness`. With `metrics = "emf"`
it writes CloudWatch metrics every `metrics_interval` (`sqsbatch.metrics`).
"""

from __future__ import annotations

import logging
import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqsbatch import tracing
from sqsbatch._async.door import AsyncSqs
from sqsbatch._async.flavour import (
    HANDLER_IS_ASYNC,
    AsyncBatchHandler,
    Flag,
    HandlerRun,
    Slots,
    counter_lock,
    graceful,
    opened,
)
from sqsbatch._core.batching import BatchWindow
from sqsbatch._core.closing import close_batch, handler_end
from sqsbatch._core.context import QueueContext
from sqsbatch._core.flows import ReceiveErrors, Screening, heartbeat, read_settings, receive, settle
from sqsbatch._core.handlers import check_handler
from sqsbatch._core.heartbeat import Watch
from sqsbatch._core.liveness import Liveness, Pulse, all_busy, default_stall_seconds
from sqsbatch._core.metrics import batch_sample
from sqsbatch._core.queue_settings import check_dead_letter_queue
from sqsbatch._core.receivers import Receivers
from sqsbatch._core.receiving import Assembly, connections_for, is_idle, receive_visibility
from sqsbatch._core.screening import BodyModel, Screen
from sqsbatch.config import ConsumerConfig
from sqsbatch.errors import ConfigError, SqsBatchError
from sqsbatch.health import HealthFile
from sqsbatch.lifecycle import ConsumerStats
from sqsbatch.limits import SQS_LIMITS, SqsLimits
from sqsbatch.message import MessageBatch, _Delivery
from sqsbatch.metrics import EmfMetrics, consumer_metrics

__all__ = ["AsyncConsumer"]

log = logging.getLogger("sqsbatch")

WAKE_SECONDS = 0.5
"""How long the loop waits for news from its slots before it looks again anyway."""


class AsyncConsumer:
    """Polls one queue and hands batches to `handler`, with Cloudflare Queues' semantics.

    `client`: a boto3 SQS client for `Consumer`, an aiobotocore one already entered
    (`async with session.client(...)`) for `AsyncConsumer`; without one, `run()` makes its own,
    with read timeouts that fit the long poll (`sqsbatch._botocore.client_config`).
    `health_file`: a path touched while the poller is alive, for `sqsbatch health`; a directory
    that does not exist or cannot be written is a `ConfigError` here (docs/operations.md).
    """

    def __init__(
        self,
        queue: str,
        handler: AsyncBatchHandler,
        config: ConsumerConfig | None = None,
        *,
        client: Any = None,
        limits: SqsLimits = SQS_LIMITS,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        health_file: str | os.PathLike[str] | None = None,
        body_model: Any = None,
    ) -> None:
        check_handler(handler, is_async=HANDLER_IS_ASYNC)
        self._body_model = BodyModel(body_model) if body_model is not None else None
        self.config = config if config is not None else ConsumerConfig.load(queue)
        check_dead_letter_queue(queue, self.config.dead_letter_queue)
        self._health = HealthFile(health_file) if health_file is not None else None
        self.queue = queue
        self.handler = handler
        self.stats = ConsumerStats()
        self._limits = limits
        self._clock = clock
        self._wall_clock = wall_clock
        self._stopping = Flag()
        self._changed = Flag()  # a slot has news: a slot is free, or a receiver could start
        self._lock = counter_lock()
        self._receivers = Receivers(self.config.max_concurrency)
        self._random = random.Random()
        self._sqs = AsyncSqs(client)
        self._context: QueueContext | None = None
        self._screening: Screening | None = None
        self._last_activity = 0.0
        self._receive_errors = ReceiveErrors()
        self._fatal: SqsBatchError | None = None
        self._liveness = Liveness(self.stall_seconds, alive_at=clock())
        self._handlers: dict[int, float] = {}  # a running handler's batch -> when it started
        self._metrics: EmfMetrics | None = None

    @property
    def stall_seconds(self) -> float:
        """The watchdog's limit: the setting, else three long polls plus the visibility timeout."""
        if self.config.stall_seconds is not None:
            return self.config.stall_seconds
        return default_stall_seconds(self._limits.max_wait_seconds, self.config.visibility_timeout)

    @property
    def requests(self) -> int:
        """SQS requests made so far (the bill)."""
        return sum(self._sqs.requests.values())

    @property
    def requests_by_operation(self) -> dict[str, int]:
        """SQS requests made so far, per boto3 operation name."""
        return dict(self._sqs.requests)

    def stop(self) -> None:
        """Stop receiving; in-flight batches finish and settle, then `run()` returns.

        Safe to call from another thread, from a signal handler or from a handler.
        """
        self._stopping.set()
        self._changed.set()

    async def run(self) -> None:
        """Poll until `stop()` or SIGTERM/SIGINT, then shut down gracefully."""
        with graceful(self._on_signal):
            await self._loop(idle_seconds=None)

    async def run_until_idle(self, idle_seconds: float = 1.0) -> None:
        """Poll until nothing arrived for `idle_seconds` and nothing is in flight."""
        if idle_seconds <= 0:
            raise ConfigError(f"idle_seconds={idle_seconds!r} is invalid: must be > 0")
        await self._loop(idle_seconds=idle_seconds)

    # -- the loop -------------------------------------------------------------------------------

    async def _start(self) -> QueueContext:
        self._stopping.bind()
        self._changed.bind()
        self._receivers = Receivers(self.config.max_concurrency)
        self._fatal = None
        url = await self._sqs.queue_url(self.queue)
        settings, _ = await self._sqs.run(read_settings(self.queue, url, self.config))
        for level, note in settings.notes:
            log.log(level, "%s", note)
        dlq = settings.config.dead_letter_queue
        dlq_url = await self._sqs.queue_url(dlq) if dlq is not None else None
        self._last_activity = self._clock()
        self._alive()  # the queue answered
        context = QueueContext.of(url, settings, dlq_url, self._limits)
        self._screening = Screening(
            context, Screen(settings.config.max_message_age, self._body_model)
        )
        self._metrics = consumer_metrics(
            context.name, self.config, clock=self._clock, wall_clock=self._wall_clock
        )
        return context

    def _count(self, counts: dict[str, int]) -> None:
        """What a flow or a handler's end concluded: into `stats`, and into the metrics."""
        if not counts:
            return
        self.stats.add(counts)
        if self._metrics is not None:
            self._metrics.add(counts)

    async def _loop(self, idle_seconds: float | None) -> None:
        self._liveness = Liveness(self.stall_seconds, alive_at=self._clock())
        timeouts = {
            "long_poll_seconds": self._limits.max_wait_seconds,
            "margin_seconds": self.config.read_timeout_margin,
        }
        async with opened(self._sqs, connections_for(self.config), **timeouts):
            self._context = await self._start()
            try:
                async with Slots(self.config.max_concurrency, self._clock) as slots:
                    while not self._stopping.is_set():
                        self._changed.clear()
                        count = self._next_receivers(idle_seconds)
                        if count is None:
                            break
                        for _ in range(count):
                            slots.start(self._serve, idle_seconds)
                        await self._changed.wait(WAKE_SECONDS)
                        self._look()
            finally:
                self._stopping.unbind()
                self._changed.unbind()
                if self._metrics is not None:
                    self._metrics.flush()
        log.info("consumer of %s stopped: %s", self.queue, self.stats.as_dict())
        if self._fatal is not None:
            raise self._fatal

    def _next_receivers(self, idle_seconds: float | None) -> int | None:
        """How many receivers to start now; None once idle with nothing in flight."""
        idle = is_idle(idle_seconds, self._clock() - self._last_activity)
        with self._lock:
            return self._receivers.start(stopping=self._stopping.is_set(), idle=idle)

    async def _serve(self, idle_seconds: float | None) -> None:
        """One slot: receive a batch of its own, then hand it to the handler and settle it; again,
        in the same slot, while a receiver is wanted."""
        again = True
        while again:
            deliveries: list[_Delivery] = []
            try:
                deliveries = await self._assemble(idle_seconds)
            except Exception:  # a bug of ours: what was received reappears after its visibility
                log.exception("receiving from %s failed", self.queue)
            finally:
                self._stopped_receiving(with_batch=bool(deliveries))
            if not deliveries:
                return
            again, taken = False, False
            try:
                taken = not await self._process(deliveries, idle_seconds)
                again = not taken
            finally:
                if not taken:  # else the watcher settled the batch and freed the slot
                    again = self._settled(idle_seconds, again=again)

    # -- health and the watchdog -----------------------------------------------------------------

    def _alive(self) -> None:
        """A receive completed: the health file is touched."""
        with self._lock:
            pulse = self._liveness.received(self._clock())
        self._pulse(pulse)

    def _look(self) -> None:
        """The loop's look at its slots: busy counts as alive; too long neither stops it."""
        now = self._clock()
        with self._lock:
            busy = all_busy(
                now,
                self._handlers.values(),
                slots=self.config.max_concurrency,
                handler_timeout=self.config.handler_timeout,
            )
            pulse = self._liveness.look(now, busy=busy, stopping=self._stopping.is_set())
        self._pulse(pulse)
        if self._metrics is not None:
            self._metrics.tick()

    def _pulse(self, pulse: Pulse) -> None:
        if pulse.touch and self._health is not None:
            self._health.touch()
        if pulse.stalled_for is not None:
            message = self._liveness.stall_message(self.queue, pulse.stalled_for)
            log.error("%s", message)
            self._fatal = SqsBatchError(message)
            self.stop()

    def _received(self, got: int, asked: int) -> bool:
        with self._lock:
            return self._receivers.received(got=got, asked=asked)

    def _stopped_receiving(self, *, with_batch: bool) -> None:
        with self._lock:
            news = self._receivers.stopped_receiving(with_batch=with_batch)
        if news:
            self._changed.set()

    def _settled(self, idle_seconds: float | None, *, again: bool) -> bool:
        """A batch settled: whether its slot receives again (else it is free, and the loop
        hears of it). The loop is woken only when it has something to do."""
        idle = is_idle(idle_seconds, self._clock() - self._last_activity)
        with self._lock:
            stopping = self._stopping.is_set()
            again = self._receivers.settled(again=again, stopping=stopping, idle=idle)
            news = not again or self._receivers.startable > 0
        if news:
            self._changed.set()
        return again

    async def _assemble(self, idle_seconds: float | None) -> list[_Delivery]:
        """Receive until the batch is due (full or window closed), or until stop/idle."""
        window: BatchWindow[_Delivery] = BatchWindow(
            self.config.max_batch_size, self.config.max_batch_timeout, self._limits
        )
        assembly = Assembly(window, idle_seconds)
        now = self._clock()
        stopping = self._stopping.is_set
        while ask := assembly.next_receive(now, now - self._last_activity, stopping=stopping()):
            asked, wait_seconds = ask
            received = await self._receive(asked, wait_seconds, window.remaining(now))
            now = self._clock()
            assembly.surplus = self._received(len(received), asked)
            if not assembly.add(received, asked=asked, now=now, stopping=stopping()):
                break
        return window.take()

    async def _receive(self, asked: int, wait_seconds: int, window_left: float) -> list[_Delivery]:
        context = self._require_context()
        flow = receive(
            self.queue,
            context.url,
            asked=asked,
            wait_seconds=wait_seconds,
            visibility=receive_visibility(self.config, window_left, self._limits),
            received_at=self._clock(),
            wall_clock=self._wall_clock,
            errors=self._receive_errors,
            random=self._random,
            limits=self._limits,
            screening=self._screening,
        )
        received = await self._sqs.run(flow)
        self._count(received.counts)
        if "receive_errors" not in received.counts:
            self._alive()
        if received.line is not None:
            log.log(received.line[0], "%s", received.line[1])
        if received.fatal is not None:
            self._fatal = received.fatal
            self.stop()
        elif received.pause:
            await self._stopping.wait(received.pause)
        if received.deliveries:
            self._last_activity = self._clock()
        return received.deliveries

    def _require_context(self) -> QueueContext:
        assert self._context is not None, "the loop starts before its slots do"
        return self._context

    # -- one batch, in its own slot --------------------------------------------------------------

    async def _process(self, deliveries: list[_Delivery], idle_seconds: float | None) -> bool:
        """Hand a batch to the handler, then settle it; False when the slot did not settle it
        (threads: the watcher did, past `handler_timeout`, and freed the slot, while the handler
        runs on in this slot's thread, unwaited)."""
        batch = MessageBatch(self._require_context().name, deliveries)
        running = _Running(batch, tracing.start(batch), self._clock(), self._wall_clock())
        with self._lock:
            self._handlers[id(batch)] = running.started
        try:
            ended = await self._supervise(running, idle_seconds)
            if ended is None:
                return False
            await self._close(running, *ended)
        except Exception:  # a bug of ours: the messages reappear after their visibility
            log.exception("settling a batch of %s failed", self.queue)
        finally:
            if not running.closed:  # a bug (or a cancellation) before the handler ended
                self._forget(running)
                self._last_activity = self._clock()
                running.trace.finish()
            running.trace.leave()
        return True

    async def _supervise(
        self, running: _Running, idle_seconds: float | None
    ) -> tuple[bool, BaseException | None] | None:
        """Run the handler; its messages are kept hidden meanwhile, and it is given up on at
        `handler_timeout`. (timed out, what it raised); None when the watcher settled the batch
        without the slot (threads: the handler runs on in this slot's thread, unwaited)."""
        batch = running.batch

        async def heartbeat() -> None:
            await self._heartbeat(batch)

        async def give_up() -> None:  # threads: past the deadline, with the handler running on
            await self._close(running, timed_out=True, error=None)
            self._settled(idle_seconds, again=False)

        watch = Watch.start(running.started, self.config)
        run = HandlerRun(self.handler, batch, watch, heartbeat, give_up, clock=self._clock)
        await run.run()
        if run.taken():
            return None
        return run.timed_out(), run.failure()

    async def _close(self, running: _Running, timed_out: bool, error: BaseException | None) -> None:
        """The handler is done (or given up): count and log how it ended, then settle the batch
        (by the slot, or by the watcher past `handler_timeout`: exactly once)."""
        running.closed = True
        batch, trace = running.batch, running.trace
        context = self._require_context()
        try:
            try:
                end = handler_end(batch, self.config, timed_out=timed_out, error=error)
                self._count(end.counts)
                if end.log is not None:
                    log.log(end.log[0], "%s", end.log[1], exc_info=end.error)
            finally:
                self._forget(running)
            trace.ended(end.outcome, end.error)
            now, wall_now = self._clock(), self._wall_clock()
            outcome, error = end.outcome, end.error
            closing = close_batch(batch, outcome, error, context, now=now, wall_now=wall_now)
            settled = await self._sqs.run(trace.calls(settle(closing, batch, self._limits)))
            self._count(settled.counts)
            for level, text in settled.lines:
                log.log(level, "%s", text)
        except Exception:  # a bug of ours: the messages reappear after their visibility
            log.exception("settling a batch of %s failed", self.queue)
        finally:
            self._last_activity = self._clock()
            trace.finish()

    def _forget(self, running: _Running) -> None:
        """The handler is no longer running: out of the watchdog's view, into the metrics."""
        with self._lock:
            del self._handlers[id(running.batch)]
        if self._metrics is not None:
            ran = self._clock() - running.started
            sample = batch_sample(
                running.batch.messages, handler_seconds=ran, wall_now=running.delivered_at
            )
            self._metrics.sample(sample)

    async def _heartbeat(self, batch: MessageBatch) -> None:
        flow = heartbeat(
            batch,
            queue_url=self._require_context().url,
            now=self._clock(),
            visibility_timeout=self.config.visibility_timeout,
            limits=self._limits,
        )
        beat = await self._sqs.run(flow)
        self._count(beat.counts)
        for level, text in beat.lines:
            log.log(level, "%s", text)

    def _on_signal(self, sig: signal.Signals) -> None:
        log.info("%s: stopping after in-flight batches", sig.name)
        self.stop()


@dataclass(slots=True)
class _Running:
    """A batch handed to the handler, and what its end needs (by the slot or the watcher)."""

    batch: MessageBatch
    trace: tracing.BatchTrace
    started: float
    delivered_at: float
    closed: bool = False
