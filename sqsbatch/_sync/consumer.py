"""The long-running poller (ECS, EC2, a laptop), written once for both flavours.

`sqsbatch/_async/consumer.py` is the source and `sqsbatch/_sync/consumer.py` is generated from it by
unasync (`make twins`; a test fails when it is stale): edit the source, never the generated
file. What threads and asyncio do their own way (the client, an event any thread may set, units
of work, a handler run against a deadline, signals) is in the flavour module beside each; what
never waits (settings, counters, the slots' bookkeeping, health and the watchdog) is written
once, by hand, in the base class both pollers share (`sqsbatch._shell.consumer_base.Poller`).

A thin shell: every decision comes from the core (`sqsbatch._core`), and every exchange with SQS
is one of its flows, driven by the door. The loop starts receivers as `Receivers` allows (one
while the queue is quiet, up to `max_concurrency` while it has a backlog); each holds a slot: it
assembles its own batch window, then supervises its handler (heartbeat, `handler_timeout`) and
settles its batch in batch calls, then receives again in the same slot while a receiver is
wanted. The loop hears from a slot only when it has something to do, looks at its slots every
`WAKE_SECONDS` anyway, and reads the queue's pause tags when due. Before each receive a slot
asks how many messages it may ask for (`_core.holding`: pause, circuit breaker, rate limit).
Health, the stall watchdog (the core's `Liveness`) and metrics: docs/operations.md.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from sqsbatch._core.batching import BatchWindow
from sqsbatch._core.closing import Closing, handler_end
from sqsbatch._core.context import QueueContext
from sqsbatch._core.fetching import delete_acked
from sqsbatch._core.flows import Flow, Settled, heartbeat, read_settings, settle
from sqsbatch._core.guard import extend_claims, kept_while_copies_can_arrive, settle_claims
from sqsbatch._core.handlers import check_handler
from sqsbatch._core.heartbeat import Watch
from sqsbatch._core.holding import Hold
from sqsbatch._core.intake import Screening, receive
from sqsbatch._core.liveness import Liveness
from sqsbatch._core.message import MessageBatch, _Delivery, deliveries_of
from sqsbatch._core.pause_state import check_pause
from sqsbatch._core.receiving import Assembly, connections_for, is_idle, receive_visibility
from sqsbatch._core.screening import Screen
from sqsbatch._shell import tracing
from sqsbatch._shell.consumer_base import Poller, Running
from sqsbatch._shell.emf_writer import consumer_metrics
from sqsbatch._shell.guarding import FROM_CONFIG, Idempotency, flush, log_line
from sqsbatch._sync.door import SyncSqs
from sqsbatch._sync.flavour import (
    HANDLER_IS_ASYNC,
    OVERLAP_IS_FREE,
    BatchHandler,
    Behind,
    Flag,
    HandlerRun,
    Slots,
    counter_lock,
    graceful,
    opened,
)
from sqsbatch.config import ConsumerConfig
from sqsbatch.errors import ConfigError
from sqsbatch.limits import SQS_LIMITS, SqsLimits

__all__ = ["Consumer"]

log = logging.getLogger("sqsbatch")

WAKE_SECONDS = 0.5
"""How long the loop waits for news from its slots before it looks again anyway."""


class Consumer(Poller):
    """Polls one queue and hands batches to `handler`, with Cloudflare Queues' semantics.

    `client`: a boto3 SQS client for `Consumer`, an aiobotocore one already entered
    (`async with session.client(...)`) for `AsyncConsumer`; without one, `run()` makes its own,
    with read timeouts that fit the long poll (`sqsbatch._shell.botocore.client_config`).
    `health_file`: a path touched while the poller is alive, for `sqsbatch health`; a directory
    that does not exist or cannot be written is a `ConfigError` here (docs/operations.md).
    `idempotency`: a store for the idempotency guard, or None; not given, the settings'
    `idempotency_table` makes one (docs/idempotency.md).
    """

    handler: BatchHandler
    _sqs: SyncSqs
    _stopping: Flag
    _changed: Flag

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
        health_file: str | os.PathLike[str] | None = None,
        body_model: Any = None,
        idempotency: Idempotency = FROM_CONFIG,
    ) -> None:
        check_handler(handler, is_async=HANDLER_IS_ASYNC)
        self._sqs = SyncSqs(client)
        self._stopping = Flag()
        self._changed = Flag()
        super().__init__(
            queue,
            handler,
            config,
            lock=counter_lock(),
            limits=limits,
            clock=clock,
            wall_clock=wall_clock,
            health_file=health_file,
            body_model=body_model,
            idempotency=idempotency,
        )

    def run(self) -> None:
        """Poll until `stop()` or SIGTERM/SIGINT, then shut down gracefully."""
        with graceful(self._on_signal):
            self._loop(idle_seconds=None)

    def run_until_idle(self, idle_seconds: float = 1.0) -> None:
        """Poll until nothing arrived for `idle_seconds` and nothing is in flight."""
        if idle_seconds <= 0:
            raise ConfigError(f"idle_seconds={idle_seconds!r} is invalid: must be > 0")
        self._loop(idle_seconds=idle_seconds)

    # -- the loop -------------------------------------------------------------------------------

    def _start(self) -> QueueContext:
        self._stopping.bind()
        self._changed.bind()
        self._fatal = None
        url = self._sqs.queue_url(self.queue)
        settings, _ = self._sqs.run(read_settings(self.queue, url, self.config))
        for level, note in settings.notes:
            log.log(level, "%s", note)
        dlq = settings.config.dead_letter_queue
        dlq_url = self._sqs.queue_url(dlq) if dlq is not None else None
        if self._guard is not None and self.config.idempotency_ttl is None:
            kept = kept_while_copies_can_arrive(self._guard, settings.retention_seconds, dlq_url)
            self._guard = self._sqs.run(kept)
        self._last_activity = self._clock()
        self._alive()  # the queue answered
        context = QueueContext.of(url, settings, dlq_url, self._limits)
        self._new_slots(context)
        screen = Screen(settings.config.max_message_age, self._body_model, settings.config.envelope)
        self._screening = Screening(context, screen, payloads=self._payloads)
        self._metrics = consumer_metrics(
            context.name, self.config, clock=self._clock, wall_clock=self._wall_clock
        )
        return context

    def _loop(self, idle_seconds: float | None) -> None:
        self._liveness = Liveness(self.stall_seconds, alive_at=self._clock())
        timeouts = {
            "long_poll_seconds": self._limits.max_wait_seconds,
            "margin_seconds": self.config.read_timeout_margin,
        }
        with opened(self._sqs, connections_for(self.config), **timeouts):
            self._sqs.hook()  # the watchdog can turn botocore's retries off
            self._context = self._start()
            self._check_pause()  # at start, before any receive
            try:
                with Slots(self.config.max_concurrency, self._clock) as slots:
                    try:
                        self._tend(slots, idle_seconds)
                    except BaseException:  # cancelled, or interrupted: stop as stop() does
                        self.stop()  # (else the slots would go on receiving, and Slots wait)
                        raise
            finally:
                self._stopping.unbind()
                self._changed.unbind()
                self._protection.close()
                flush(self._guard)
                if self._metrics is not None:
                    self._metrics.flush()
        log.info("consumer of %s stopped: %s", self.queue, self.stats.as_dict())
        if self._fatal is not None:
            raise self._fatal

    def _tend(self, slots: Slots, idle_seconds: float | None) -> None:
        """Start receivers as they are wanted, until stopped (or idle); free slots start first
        on FIFO group batches waiting for one (stopping, too: they are delivered)."""
        while not self._stopping.is_set() or self._any_waiting():
            self._changed.clear()
            for batch in self._handed_out():
                slots.start(partial(self._serve, first=batch), idle_seconds)
            count = self._next_receivers(idle_seconds)
            if count is None:
                break
            for _ in range(count):
                slots.start(self._serve, idle_seconds)
            self._changed.wait(WAKE_SECONDS)
            self._look()
            self._keep_waiting()
            self._check_pause()

    def _check_pause(self) -> None:
        """Read the pause tags when due (1 `ListQueueTags` every `pause_check_seconds`)."""
        now = self._wall_clock()
        if now < self._pause_due:
            return
        url = self._require_context().url
        self._paused(self._sqs.run(check_pause(url, now, last=self._holding.pause)))

    def _serve(self, idle_seconds: float | None, first: list[_Delivery] | None = None) -> None:
        """One slot: receive a batch of its own (or start on `first`, a FIFO group's batch
        waiting for a slot), then hand it to the handler and settle it; again, in the same slot,
        on a waiting group batch or while a receiver is wanted (an all-acked batch's deletes may
        be still out meanwhile: `Behind`)."""
        behind = Behind()
        again = True
        try:
            while again:
                deliveries, probe = first or [], False
                if first is None:
                    deliveries, probe = self._take_batch(idle_seconds)
                if not deliveries:
                    return
                again, taken = False, False
                try:
                    taken = not self._process(deliveries, idle_seconds, behind, probe)
                    again = not taken
                finally:
                    if not taken:  # else the watcher settled the batch and freed the slot
                        first = self._next_waiting() if again else None
                        if first is None:
                            again = self._settled(idle_seconds, again=again)
        finally:
            behind.wait()

    def _take_batch(self, idle_seconds: float | None) -> tuple[list[_Delivery], bool]:
        """Receive a batch (`_assemble`); on a FIFO queue by group, the first group's."""
        deliveries: list[_Delivery] = []
        probe = False
        try:
            deliveries, probe = self._assemble(idle_seconds)
            deliveries = self._by_group(deliveries, probe)
        except Exception:  # a bug of ours: what was received reappears later
            log.exception("receiving from %s failed", self.queue)
        finally:
            self._stopped_receiving(with_batch=bool(deliveries))
        return deliveries, probe

    def _assemble(self, idle_seconds: float | None) -> tuple[list[_Delivery], bool]:
        """Receive until the batch is due (full or window closed), or until stop/idle; asks
        no more than holding back allows (pause, circuit, rate). (the batch, whether it is
        the circuit's probe: then it is the probe receive's messages alone)."""
        window: BatchWindow[_Delivery] = BatchWindow(
            self.config.max_batch_size, self.config.max_batch_timeout, self._limits
        )
        assembly = Assembly(window, idle_seconds)
        now = self._clock()
        stopping = self._stopping.is_set
        probe = False
        while ask := assembly.next_receive(now, now - self._last_activity, stopping=stopping()):
            hold = self._admit(ask[0])
            if not hold.count:  # held back: deliver what is in hand, else wait and look again
                if window.is_open or not self._held(hold, idle_seconds):
                    break
                now = self._clock()
                continue
            received = self._receive(hold.count, ask[1], window.remaining(now))
            now = self._clock()
            self._returned(hold, len(received))
            probe = hold.probe and bool(received)
            assembly.surplus = self._received(len(received), hold.count)
            if not assembly.add(received, asked=hold.count, now=now, stopping=stopping()):
                break
            if probe:
                break
        return window.take(), probe

    def _held(self, hold: Hold, idle_seconds: float | None) -> bool:
        """Held back (paused, circuit open, rate): alive meanwhile; False when the slot ends
        (stopping, or idle)."""
        self._alive()
        if is_idle(idle_seconds, self._clock() - self._last_activity):
            return False
        self._stopping.wait(hold.wait)
        return not self._stopping.is_set()

    def _receive(self, asked: int, wait_seconds: int, window_left: float) -> list[_Delivery]:
        context = self._require_context()
        attempt_id = self._attempt(asked)
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
            guard=self._guard,
            attempt_id=attempt_id,
        )
        received = self._sqs.run(flow)
        retry = "receive_errors" in received.counts and received.fatal is None
        self._attempted(attempt_id, asked, retry=retry)
        self._count(received.counts)
        if "receive_errors" not in received.counts:
            self._alive()
        if received.line is not None:
            log.log(received.line[0], "%s", received.line[1])
        if received.fatal is not None:
            self._fatal = received.fatal
            self.stop()
        elif received.pause:
            self._stopping.wait(received.pause)
        if received.deliveries:
            self._last_activity = self._clock()
        return received.deliveries

    # -- one batch, in its own slot --------------------------------------------------------------

    def _process(
        self, deliveries: list[_Delivery], idle_seconds: float | None, behind: Behind, probe: bool
    ) -> bool:
        """Hand a batch to the handler, then settle it (`behind`); False when the slot did not
        settle it (threads: the watcher did, past `handler_timeout`, and freed the slot, while
        the handler runs on in this slot's thread, unwaited)."""
        batch = MessageBatch(self._require_context().name, deliveries)
        running = Running(
            batch, tracing.start(batch), self._clock(), self._wall_clock(), probe=probe
        )
        with self._lock:
            self._handlers[id(batch)] = running.started
        try:
            ended = self._supervise(running, idle_seconds)
            if ended is None:
                return False
            closing = self._end(running, *ended)
            overlap, deletes_later = self._overlaps(closing, free=OVERLAP_IS_FREE)
            later = behind if deletes_later else None
            behind.start(overlap, self._settle, running, closing, later)
        except Exception:  # a bug of ours: the messages reappear after their visibility
            log.exception("settling a batch of %s failed", self.queue)
        finally:
            if not running.closed:  # a bug (or a cancellation) before the handler ended
                self._forget(running)
                self._last_activity = self._clock()
                running.trace.finish()
            running.trace.leave()
        return True

    def _supervise(
        self, running: Running, idle_seconds: float | None
    ) -> tuple[bool, BaseException | None] | None:
        """Run the handler; its messages are kept hidden meanwhile, and it is given up on at
        `handler_timeout`. (timed out, what it raised); None when the watcher settled the batch
        without the slot (threads: the handler runs on in this slot's thread, unwaited)."""
        batch = running.batch

        def heartbeat() -> None:
            self._heartbeat(batch)

        def give_up() -> None:  # threads: past the deadline, with the handler running on
            self._close(running, timed_out=True, error=None)
            self._settled(idle_seconds, again=False)

        watch = Watch.start(running.started, self.config)
        run = HandlerRun(self.handler, batch, watch, heartbeat, give_up, clock=self._clock)
        run.run()
        if run.taken():
            return None
        return run.timed_out(), run.failure()

    def _close(self, running: Running, timed_out: bool, error: BaseException | None) -> None:
        """The handler is done (or given up): its end, then its settle calls (by the slot, or by
        the watcher past `handler_timeout`: exactly once)."""
        self._settle(running, self._end(running, timed_out, error))

    def _end(
        self, running: Running, timed_out: bool, error: BaseException | None
    ) -> Closing | None:
        """Count and log how the handler ended; what settling the batch takes (None: a bug of
        ours, logged: the messages reappear after their visibility)."""
        running.closed = True
        self._last_activity = self._clock()  # a handler's end is activity, settled or not yet
        batch, trace = running.batch, running.trace
        try:
            try:
                end = handler_end(batch, self.config, timed_out=timed_out, error=error)
                self._count(end.counts)
                if end.log is not None:
                    log.log(end.log[0], "%s", end.log[1], exc_info=end.exc_info)
            finally:
                self._forget(running)
            trace.ended(end.outcome, end.error)
            return self._close_batch(running, end.outcome, end.error)
        except Exception:
            log.exception("settling a batch of %s failed", self.queue)
            return None

    def _settle(
        self,
        running: Running,
        closing: Closing | None,
        later: Behind | None = None,
        flow: Flow[Settled] | None = None,
    ) -> None:
        """The settle calls of a closed batch (or `flow`: its deletes), in batch calls; then its
        span ends. `later`: its deletes go there, beside the slot's next receive."""
        claims = flow is None  # the batch's first settle flow, not its deletes left for later
        if closing is not None and flow is None:
            flow = settle(closing, running.batch, self._limits, deletes_later=later is not None)
        rest = self._settle_flow(running, closing, flow, claims=claims)
        if rest is not None and later is not None:
            later.start(True, self._settle, running, closing, None, rest)

    def _settle_flow(
        self,
        running: Running,
        closing: Closing | None,
        flow: Flow[Settled] | None,
        *,
        claims: bool = False,
    ) -> Flow[Settled] | None:
        """Drive one settle flow; the span ends unless its deletes are still to go (returned).
        `claims`: the idempotency guard's claims are settled first (completed or released)."""
        rest = None
        try:
            if claims and self._guard is not None:  # claims completed or released first
                log_line(self._sqs.run(settle_claims(self._guard, running.batch, closing)))
            if closing is not None and flow is not None:
                started = time.perf_counter()  # the network's time, not the injected clock's
                settled = self._sqs.run(running.trace.calls(flow))
                seconds = time.perf_counter() - started
                if settled.rest is None and self._payloads.used:  # S3, once SQS deleted them
                    acked = delete_acked(settled, running.batch, closing.kinds, self._payloads)
                    settled = self._sqs.run(acked)
                rest = self._settled_flow(closing, settled, seconds)
        except Exception:  # a bug of ours: the messages reappear after their visibility
            log.exception("settling a batch of %s failed", self.queue)
        finally:
            self._last_activity = self._clock()
            if rest is None:
                running.trace.finish()
        return rest

    def _keep_waiting(self) -> None:
        """The messages of FIFO group batches waiting for a slot stay hidden meanwhile."""
        batch = self._waiting_due()
        if batch is None:
            return
        try:
            self._heartbeat(batch)
        except Exception:  # a bug of ours: their slot's heartbeat still extends them
            log.exception("a heartbeat of %s failed", self.queue)

    def _heartbeat(self, batch: MessageBatch) -> None:
        flow = heartbeat(
            batch,
            queue_url=self._require_context().url,
            now=self._clock(),
            visibility_timeout=self.config.visibility_timeout,
            limits=self._limits,
        )
        beat = self._sqs.run(flow)
        if self._guard is not None:  # the claims follow the visibility
            now, wall_now = self._clock(), self._wall_clock()
            claims = extend_claims(self._guard, deliveries_of(batch), now=now, wall_now=wall_now)
            log_line(self._sqs.run(claims))
        self._count(beat.counts)
        for level, text in beat.lines:
            log.log(level, "%s", text)
