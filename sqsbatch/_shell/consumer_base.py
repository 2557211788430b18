"""What both pollers keep and look after without ever waiting: written once, by hand.

`Poller` is the base of `Consumer` and `AsyncConsumer`: their settings, counters and request
count, the slots' bookkeeping with the core's `Receivers`, health and the watchdog (the core's
`Liveness`), and the metrics. None of it does I/O or awaits anything, so it is the same for
threads and asyncio; the coroutines that receive, run the handler and settle are in
`sqsbatch/_async/consumer.py`, from which unasync generates `sqsbatch/_sync/consumer.py`. A poller
sets its door (`_sqs`) and its two flags (`stopping`, `changed`), then gives this base a lock
of its flavour.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from sqsbatch._core.circuit import Change
from sqsbatch._core.closing import (
    Closing,
    SettleTimes,
    close_batch,
    deletes_behind,
    settles_behind,
)
from sqsbatch._core.context import QueueContext
from sqsbatch._core.flows import Settled
from sqsbatch._core.groups import Waiting, group_batches, splits_groups
from sqsbatch._core.holding import Hold, Holding, close_held
from sqsbatch._core.intake import ReceiveErrors, Screening
from sqsbatch._core.ledger import Outcome
from sqsbatch._core.liveness import Liveness, Pulse, all_busy, default_stall_seconds
from sqsbatch._core.message import MessageBatch, _Delivery
from sqsbatch._core.metrics import batch_sample
from sqsbatch._core.pause_state import PauseCheck, next_check
from sqsbatch._core.protection import expires_minutes_for
from sqsbatch._core.queue_settings import check_dead_letter_queue
from sqsbatch._core.receive_attempts import ReceiveAttempts
from sqsbatch._core.receivers import Receivers
from sqsbatch._core.receiving import is_idle
from sqsbatch._core.screening import BodyModel
from sqsbatch._shell import tracing
from sqsbatch._shell.emf_writer import EmfMetrics
from sqsbatch._shell.guarding import FROM_CONFIG, Idempotency, guard_for
from sqsbatch._shell.health import HealthFile
from sqsbatch._shell.lifecycle import ConsumerStats
from sqsbatch._shell.payload_store import payload_store
from sqsbatch._shell.task_protection import TaskProtection
from sqsbatch.config import ConsumerConfig
from sqsbatch.errors import SqsBatchError
from sqsbatch.limits import SqsLimits

if TYPE_CHECKING:
    from sqsbatch._async.door import AsyncSqs
    from sqsbatch._sync.door import SyncSqs

__all__ = ["Poller", "Running"]

log = logging.getLogger("sqsbatch")


class _Flag(Protocol):
    """What the base needs of a flavour's `Flag` (the pollers also wait on theirs)."""

    def set(self) -> None: ...
    def clear(self) -> None: ...
    def is_set(self) -> bool: ...


@dataclass(slots=True)
class Running:
    """A batch handed to the handler, and what its end needs (by the slot or the watcher)."""

    batch: MessageBatch
    trace: tracing.BatchTrace
    started: float
    delivered_at: float
    closed: bool = False
    probe: bool = False
    """The circuit's half-open probe batch."""


class Poller:
    """The flavour-free half of a poller (see the module's docstring)."""

    _sqs: SyncSqs | AsyncSqs
    _stopping: _Flag
    _changed: _Flag  # a slot has news: a slot is free, or a receiver could start

    def __init__(
        self,
        queue: str,
        handler: Any,
        config: ConsumerConfig | None,
        *,
        lock: AbstractContextManager[object],
        limits: SqsLimits,
        clock: Callable[[], float],
        wall_clock: Callable[[], float],
        health_file: str | os.PathLike[str] | None,
        body_model: Any,
        idempotency: Idempotency = FROM_CONFIG,
    ) -> None:
        self._body_model = BodyModel(body_model) if body_model is not None else None
        self.config = config if config is not None else ConsumerConfig.load(queue)
        self._guard = guard_for(idempotency, self.config)  # docs/idempotency.md
        check_dead_letter_queue(queue, self.config.dead_letter_queue)
        self._health = HealthFile(health_file) if health_file is not None else None
        self.queue = queue
        self.handler = handler
        self.stats = ConsumerStats()
        self._lock = lock
        self._limits = limits
        self._clock = clock
        self._wall_clock = wall_clock
        self._receivers = Receivers(self.config.max_concurrency)
        self._waiting = Waiting()  # FIFO: group batches waiting for a slot (`_core.groups`)
        self._attempts = ReceiveAttempts(lambda: uuid.uuid4().hex)  # FIFO receives' attempt ids
        self._random = random.Random()
        self._context: QueueContext | None = None
        self._screening: Screening | None = None
        self._payloads = payload_store(self._sqs_client, keep=self.config.keep_payloads)
        """Large payloads in S3: a client made at the first offloaded message (docs/payloads.md)."""
        self._last_activity = 0.0
        self._receive_errors = ReceiveErrors()
        self._fatal: SqsBatchError | None = None
        self._stall: SqsBatchError | None = None  # the watchdog's error, once it fired
        self._liveness = Liveness(self.stall_seconds, alive_at=clock())
        self._handlers: dict[int, float] = {}  # a running handler's batch -> when it started
        self._metrics: EmfMetrics | None = None
        self._settle_times = SettleTimes()  # whether threads settle behind the next receive
        self._holding = Holding(self.config, now=clock())  # pause, circuit, rate limit
        self._pause_due = -1.0  # wall clock: when the pause tags are read again
        self._protection = TaskProtection(
            expires_minutes=expires_minutes_for(self.config.handler_timeout),
            enabled=self.config.scale_in_protection,
            clock=clock,  # the poller's: its renewal is due on the poller's time
        )

    def _sqs_client(self) -> Any:
        """The SQS client the poller runs with (its door's), for the S3 client beside it."""
        return self._sqs.client

    @property
    def stall_seconds(self) -> float:
        """The watchdog's limit: the setting, else three long polls plus the visibility timeout
        (and a store's claim, with the idempotency guard)."""
        if self.config.stall_seconds is not None:
            return self.config.stall_seconds
        return default_stall_seconds(
            self._limits.max_wait_seconds,
            self.config.visibility_timeout,
            guarded=self._guard is not None,
        )

    @property
    def stalled(self) -> bool:
        """Whether the last run was ended by the watchdog (`run()` raised its error)."""
        return self._stall is not None and self._fatal is self._stall

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

    def _on_signal(self, sig: signal.Signals) -> None:
        log.info("%s: stopping after in-flight batches", sig.name)
        self.stop()

    def _count(self, counts: dict[str, int]) -> None:
        """What a flow or a handler's end concluded: into `stats`, and into the metrics."""
        if not counts:
            return
        self.stats.add(counts)
        if self._metrics is not None:
            self._metrics.add(counts)

    def _require_context(self) -> QueueContext:
        assert self._context is not None, "the loop starts before its slots do"
        return self._context

    # -- the slots, with the core's `Receivers` --------------------------------------------------

    def _next_receivers(self, idle_seconds: float | None) -> int | None:
        """How many receivers to start now; None once idle with nothing in flight."""
        idle = is_idle(idle_seconds, self._clock() - self._last_activity)
        with self._lock:
            return self._receivers.start(stopping=self._stopping.is_set(), idle=idle)

    def _received(self, got: int, asked: int) -> bool:
        with self._lock:
            return self._receivers.received(got=got, asked=asked)

    def _stopped_receiving(self, *, with_batch: bool) -> None:
        with self._lock:
            news = self._receivers.stopped_receiving(with_batch=with_batch)
        if with_batch:
            self._protect()
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
        self._protect()
        if news:
            self._changed.set()
        return again

    def _forget(self, running: Running) -> None:
        """The handler is no longer running: out of the watchdog's view, into the metrics."""
        with self._lock:
            del self._handlers[id(running.batch)]
        if self._metrics is not None:
            ran = self._clock() - running.started
            sample = batch_sample(
                running.batch.messages, handler_seconds=ran, wall_now=running.delivered_at
            )
            self._metrics.sample(sample)

    def _overlaps(self, closing: Closing | None, *, free: bool) -> tuple[bool, bool]:
        """Whether `closing`'s settle calls go beside the slot's next receive: all of them
        (`settles_behind`), or its deletes (`deletes_behind`)."""
        seconds, slow = self._settle_times.seconds, self._settle_times.slow
        return (
            settles_behind(closing, free=free, settle_seconds=seconds, slow=slow),
            deletes_behind(closing, free=free, settle_seconds=seconds, slow=slow),
        )

    def _settled_flow(self, closing: Closing, settled: Settled, seconds: float) -> Any:
        """A settle flow ended after `seconds`: timed, counted, logged; its deletes still to go
        (`Settled.rest`), if any."""
        self._settle_times.settled(closing, seconds, self._limits)
        self._count(settled.counts)
        for level, text in settled.lines:
            log.log(level, "%s", text)
        return settled.rest

    # -- FIFO: groups in parallel (`_core.groups`), receive attempt ids -------------------------

    def _new_slots(self, context: QueueContext) -> None:
        """A run's slots, none in use, no batch waiting."""
        self._receivers = Receivers(self.config.max_concurrency, fifo=context.fifo)
        self._waiting = Waiting()

    def _by_group(self, deliveries: list[_Delivery], probe: bool) -> list[_Delivery]:
        """A FIFO window split by group (`fifo_batches = "by_group"`): the first group's batch
        is this slot's, the others wait for slots of their own (the loop hears of them)."""
        fifo = self._require_context().fifo
        if not deliveries or not splits_groups(
            fifo=fifo,
            fifo_batches=self.config.fifo_batches,
            slots=self.config.max_concurrency,
            probe=probe,
        ):
            return deliveries
        first, *others = group_batches(deliveries)
        if others:
            with self._lock:
                self._waiting.put(self._receivers, others)
        return first

    def _handed_out(self) -> list[list[_Delivery]]:
        """The waiting group batches that free slots start on now."""
        with self._lock:
            return self._waiting.hand_out(self._receivers)

    def _next_waiting(self) -> list[_Delivery] | None:
        """A slot's batch is settled: the next waiting group batch is its (else None)."""
        with self._lock:
            return self._waiting.next(self._receivers)

    def _any_waiting(self) -> bool:
        with self._lock:
            return bool(self._waiting)

    def _waiting_due(self) -> MessageBatch | None:
        """The waiting group batches' messages, as one batch for the heartbeat, when any needs
        its visibility extended now (else None)."""
        with self._lock:
            due = self._waiting.due(self._clock(), self.config.visibility_timeout)
        return MessageBatch(self._require_context().name, due) if due else None

    def _attempt(self, asked: int) -> str | None:
        """A FIFO receive's `ReceiveRequestAttemptId` (`_core.receive_attempts`); else None."""
        if not self._require_context().fifo:
            return None
        with self._lock:
            return self._attempts.claim(asked, self._clock())

    def _attempted(self, attempt_id: str | None, asked: int, *, retry: bool) -> None:
        """The receive is done: `retry` (it failed for a passing reason) keeps its attempt id
        for the next receive asking as many."""
        if attempt_id is None:
            return
        with self._lock:
            if retry:
                self._attempts.failed(attempt_id, asked)
            else:
                self._attempts.answered(attempt_id)

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
        self._protect()
        with self._lock:
            paused = self._holding.paused_seconds(now)
        self._count({"paused_seconds": paused})
        if self._metrics is not None:
            self._metrics.tick()

    def _pulse(self, pulse: Pulse) -> None:
        if pulse.touch and self._health is not None:
            self._health.touch()
        if pulse.stalled_for is not None:
            message = self._liveness.stall_message(self.queue, pulse.stalled_for)
            log.error("%s", message)
            self._fatal = self._stall = SqsBatchError(message)
            self._sqs.give_up()  # what is in flight gets one attempt, then the process exits
            self.stop()

    # -- holding back: pause, circuit, rate limit; scale-in protection ---------------------------

    def _admit(self, wanted: int) -> Hold:
        """How many of `wanted` messages the next receive may ask for (0: hold back)."""
        with self._lock:
            hold = self._holding.admit(self._clock(), wanted)
        self._circuit_changed(hold.change)
        return hold

    def _returned(self, hold: Hold, got: int) -> None:
        if self._holding.bucket is not None or hold.probe:
            with self._lock:
                self._holding.returned(hold, got, self._clock())

    def _circuit_changed(self, change: Change | None) -> None:
        if change is None:
            return
        log.warning("%s: %s", self.queue, change.line())
        if change.opened:
            self._count({"circuit_open": 1})

    def _paused(self, check: PauseCheck) -> None:
        """What a pause check read: logged when it changed; the next check is due."""
        if check.line is not None:
            log.log(check.line[0], "%s: %s", self.queue, check.line[1])
        with self._lock:
            line = self._holding.read(check.state, self._clock(), self.queue)
        if line is not None:
            log.log(*line)
        every = self.config.pause_check_seconds
        self._pause_due = next_check(check.state, self._wall_clock(), every)

    def _close_batch(
        self, running: Running, outcome: Outcome, error: BaseException | None
    ) -> Closing:
        """The circuit hears how the batch ended; a batch that opened it (or raised
        `Overloaded`) is held (`close_held`), any other is closed as usual."""
        now, wall_now, context = self._clock(), self._wall_clock(), self._require_context()
        with self._lock:
            change, hold = self._holding.record(
                now, outcome=outcome, error=error, probe=running.probe
            )
        self._circuit_changed(change)
        batch = running.batch
        if hold is not None:
            return close_held(
                batch, outcome, error, context, hold_seconds=hold, now=now, wall_now=wall_now
            )
        return close_batch(batch, outcome, error, context, now=now, wall_now=wall_now)

    def _protect(self) -> None:
        """ECS scale-in protection while any slot holds a batch (a no-op off ECS)."""
        if self._protection.active:
            self._protection.update(self._receivers.handling > 0)
