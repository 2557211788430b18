"""`Redriver`: the shell that drains DLQs back to their sources. It decides nothing itself.

Each pass receives up to 10 messages from one DLQ, asks `decide` for a disposition per message,
holds back the moves the rate limit does not allow yet, and executes the dispositions in batch
calls (`plan`): sends and hides first, then deletes for the sends SQS accepted. Nothing is kept
outside SQS, so any number of replicas may run side by side: a message received by one is
invisible to the others until it is moved or hidden.

`run()` drains each DLQ in a thread of its own (one DLQ: in the caller's thread), so that a slow
or failing call on one DLQ, or on the sources its messages go to, holds up that DLQ alone; each
call is bounded by the client's read timeout (the long poll plus a margin), as before. Within a
DLQ, a pass's sends, hides and deletes go behind its next receive (`SettlingPasses`: up to
`SETTLES_OUT_PER_SLOT` passes out at once; a FIFO DLQ's pass settles before the next receive),
so that one late answer holds up no more than its own pass. `run_once()` settles each pass in turn.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random as random_module
import signal
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from redrive.decide import Disposition, DlqMessage, Kind, decide, read, route
from redrive.plan import Step, StepResult, counts, move, throttle
from redrive.policy import BackoffPolicy, JitterSource
from redrive.reasons import Reasons
from redrive.report import RedriveStats, event
from redrive.settling import SettlingPasses
from redrive.watchdog import Watchdog, default_stall_seconds
from sqsbatch._core.intake import ReceiveErrors, receive_messages
from sqsbatch._core.metrics import REDRIVE_METRICS
from sqsbatch._core.rate import TokenBucket
from sqsbatch._core.shapes import queue_name
from sqsbatch._shell.emf_writer import EmfMetrics, check_metrics
from sqsbatch._shell.health import HealthFile
from sqsbatch._shell.lifecycle import graceful_signals
from sqsbatch._sync.door import SyncSqs, default_client
from sqsbatch.config import check_int
from sqsbatch.errors import ConfigError, QueueNotFound, SqsBatchError
from sqsbatch.limits import SQS_LIMITS, SqsLimits

__all__ = ["Redriver", "dead_letter_sources", "execute", "jitter_random", "only_source"]

SOURCES_TTL_SECONDS = 300.0
"""How long the answer of `ListDeadLetterSourceQueues` is trusted."""
JOIN_SECONDS = 0.5
"""How often `run()`'s thread looks up from waiting for the DLQs' threads (signals, a stop)."""


def jitter_random(message_id: str, redrives: int) -> random_module.Random:
    """The random source for one message at one redrive count: the same on every receive, on
    every replica (`redrive.policy` draws a due time's jitter from it)."""
    return random_module.Random(f"{message_id}:{redrives}")


class Redriver:
    """Moves dead-lettered messages back to their sources with per-message backoff.

    `dlqs` are queue names or URLs. `to` is where messages go when nothing else says (see
    `redrive.decide`). `rate` caps messages per second sent back to sources, per process.
    `random` gives the jitter's random source per (message id, redrive count); the default
    seeds it from those two, so every replica computes the same due time. `run()` long-polls
    each DLQ for `wait_seconds`, each in a thread of its own, while its earlier passes settle
    (`SettlingPasses`); a stop waits for the current polls and those passes.
    `health_file` is touched after every completed receive (docs/operations.md).
    `metrics="emf"`: each DLQ's Moved, Hidden, Parked, Skipped and Failed as CloudWatch EMF
    lines on stdout, every `metrics_interval` seconds (`sqsbatch._shell.emf_writer`).
    `stall_seconds`: `run()` stops and raises once no receive completed for that long (default:
    three long polls plus `visibility_timeout`; `redrive.watchdog`).
    """

    def __init__(
        self,
        dlqs: str | Sequence[str],
        *,
        policy: BackoffPolicy | None = None,
        to: str | None = None,
        parking_queue: str | None = None,
        rate: float | None = None,
        client: Any = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        random: JitterSource | None = None,
        visibility_timeout: int = 30,
        wait_seconds: int = 20,
        limits: SqsLimits = SQS_LIMITS,
        health_file: str | os.PathLike[str] | None = None,
        reasons: Iterable[str] | None = None,
        metrics: str = "off",
        metrics_namespace: str = "sqsbatch",
        metrics_interval: float = 60.0,
        stall_seconds: float | None = None,
    ) -> None:
        self.dlqs = [dlqs] if isinstance(dlqs, str) else list(dlqs)
        self.health_file = health_file
        _check_queues(self.dlqs, to, parking_queue)
        check_int("visibility_timeout", visibility_timeout, 1, 43_200)
        check_metrics(metrics, metrics_namespace, metrics_interval)
        self.policy = policy if policy is not None else BackoffPolicy()
        self.to = to
        self.parking_queue = parking_queue
        self.reasons = Reasons.of(reasons)
        """Which reasons are brought back (default: all but `expired` and `invalid_body`)."""
        self.stats = RedriveStats()
        self._bucket = TokenBucket(rate, now=clock()) if rate is not None else None
        self._bucket_lock = threading.Lock()  # the DLQs' threads share the rate limit
        self._sqs = SyncSqs(client if client is not None else default_client())
        self._clock = clock
        self._wall_clock = wall_clock
        self._jitter = random if random is not None else jitter_random
        self._visibility = visibility_timeout
        self._wait_seconds = max(0, min(wait_seconds, limits.max_wait_seconds))
        self._limits = limits
        self._stopping = threading.Event()
        if stall_seconds is not None and not (
            isinstance(stall_seconds, int | float) and 0 < stall_seconds <= 86_400
        ):
            raise ConfigError(
                f"stall_seconds={stall_seconds!r} is invalid (accepted: 0 < s <= 86400)"
            )
        stall = stall_seconds or default_stall_seconds(self._wait_seconds, visibility_timeout)
        self._watchdog = Watchdog(stall, clock=clock, on_stall=self._stalled)
        self._fatal: SqsBatchError | None = None
        self._random = random_module.Random()  # the pause between failed passes
        self._urls: dict[str, str] = {}
        self._sources: dict[str, tuple[str | None, float]] = {}
        self._verified: set[str] = set()  # DLQ URLs checked to be DLQs
        self._metrics = {
            dlq: EmfMetrics(
                queue_name(dlq),
                namespace=metrics_namespace,
                interval=metrics_interval,
                names=REDRIVE_METRICS,
                clock=clock,
                wall_clock=wall_clock,
            )
            for dlq in (self.dlqs if metrics == "emf" else [])
        }

    @property
    def health_file(self) -> Path | None:
        """Touched after every completed receive (an empty long poll too): for
        `sqsbatch health PATH --max-age SECONDS` (docs/operations.md)."""
        return self._health.path if self._health is not None else None

    @health_file.setter
    def health_file(self, path: str | os.PathLike[str] | None) -> None:
        self._health = HealthFile(path) if path is not None else None

    @property
    def requests(self) -> int:
        """SQS API requests made so far."""
        return sum(self._sqs.requests.values())

    @property
    def requests_by_operation(self) -> dict[str, int]:
        return dict(self._sqs.requests)

    def stop(self) -> None:
        """Finish the current pass (its sends and deletes), then `run()` returns."""
        self._stopping.set()

    @property
    def stall_seconds(self) -> float | None:
        """The watchdog's limit (docs/operations.md)."""
        return self._watchdog.stall_seconds

    def run(self) -> None:
        """Redrive until `stop()` or SIGTERM/SIGINT; long-polls each DLQ in turn. Raises the
        watchdog's `SqsBatchError` when no receive completed for `stall_seconds`."""
        self._fatal = None
        self._sqs.hook()
        self._start()
        with graceful_signals(self._on_signal), self._watchdog.watching(self._stopping):
            if len(self.dlqs) == 1:
                self._drain(self.dlqs[0])
            else:
                self._drain_apart()
        for metrics in self._metrics.values():
            metrics.flush()
        event(logging.INFO, {"action": "stopped", **self.stats.as_dict()})
        if self._fatal is not None:
            raise self._fatal

    @property
    def stalled(self) -> bool:
        """Whether the last `run()` was ended by the watchdog."""
        return self._fatal is not None

    def _stalled(self, quiet: float) -> None:
        """The watchdog fired: what is in flight gets one attempt, then `run()` raises."""
        message = (
            f"redrive of {', '.join(map(queue_name, self.dlqs))} stalled: no receive completed "
            f"for {quiet:.1f} s (stall_seconds={self.stall_seconds:g}); stopping so that the "
            "process can be replaced"
        )
        event(logging.ERROR, {"action": "stalled", "error": message})
        self._fatal = SqsBatchError(message)
        self._sqs.give_up()
        self.stop()

    def _drain(self, dlq: str) -> None:
        """`run()`'s loop for one DLQ, until stopped; its failures in a row are its own. Its
        passes settle behind its next receives (a FIFO DLQ's in turn); it returns once they are
        all settled."""
        errors = ReceiveErrors(base_seconds=0.5)
        metrics = self._metrics.get(dlq)
        behind = None if queue_name(dlq).endswith(".fifo") else SettlingPasses(queue_name(dlq))
        try:
            while not self._stopping.is_set():
                self._wait_for_tokens()
                self._guarded(dlq, errors, lambda: self._pass(dlq, self._poll, behind))
                if metrics is not None:
                    metrics.tick()
        except BaseException:  # fatal: what is behind settles, and the first failure is raised
            if behind is not None:
                with contextlib.suppress(Exception):
                    behind.wait()
            raise
        if behind is not None:
            self._guarded(dlq, errors, behind.wait)

    def _drain_apart(self) -> None:
        """Each DLQ in a thread of its own; the first fatal error stops them all (`run()`
        raises it). This thread waits in short joins, so that signals are still handled."""

        def drain(dlq: str) -> None:
            try:
                self._drain(dlq)
            except BaseException as exc:  # fatal (or a bug of ours): every DLQ stops
                if self._fatal is None:
                    self._fatal = (
                        exc
                        if isinstance(exc, SqsBatchError)
                        else SqsBatchError(f"redrive of {queue_name(dlq)} failed: {exc!r}")
                    )
                self.stop()

        threads = [
            threading.Thread(target=drain, args=(dlq,), name=f"redrive-{queue_name(dlq)}")
            for dlq in self.dlqs
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(JOIN_SECONDS)

    def _guarded(self, dlq: str, errors: ReceiveErrors, work: Callable[[], object]) -> None:
        """One pass of `run()` (or the wait for those behind): a failure of any of its calls is
        decided as a poller decides a failed receive (`ReceiveErrors.after`): fatal raises,
        transient backs off."""
        try:
            work()
        except SqsBatchError as exc:
            pause = errors.after(exc, self._random)
            if pause is None:
                raise
            event(logging.WARNING, {"action": "error", "dlq": dlq, "error": str(exc)})
            self._stopping.wait(pause)
        else:
            errors.failures = 0

    @property
    def _poll(self) -> int:
        return max(1, self._wait_seconds)

    def run_once(self, *, wait_seconds: int = 1) -> RedriveStats:
        """Move what is due now, hide what is not, then return this run's counters.

        Each DLQ is received from until a receive (long poll of `wait_seconds`) returns nothing
        new. Messages the run could not settle stay hidden for `visibility_timeout`.
        """
        self._start()
        this_run = RedriveStats()
        for dlq in self.dlqs:
            seen: set[str] = set()
            while not self._stopping.is_set():
                handled, ids = self._pass(dlq, wait_seconds)
                this_run.add(handled)
                if not ids or ids <= seen:
                    break
                seen |= ids
        for metrics in self._metrics.values():
            metrics.flush()
        return this_run

    # -- one pass --------------------------------------------------------------------------------

    def _start(self) -> None:
        """Resolve every queue once: an unknown DLQ, `to` or parking queue fails here, and so
        does a DLQ that is not one (its messages would be hidden from its own consumers)."""
        self._stopping.clear()
        for queue in (*self.dlqs, self.to, self.parking_queue):
            if queue is not None:
                self._urls[queue] = self._sqs.queue_url(queue)
        for dlq in self.dlqs:
            if self._urls[dlq] not in self._verified:  # once per Redriver, not per run_once
                self._check_is_dlq(dlq, self._urls[dlq])
        if self._health is not None:  # every queue answered
            self._health.touch()

    def _check_is_dlq(self, dlq: str, url: str) -> None:
        """A queue that no queue names in its RedrivePolicy is not a DLQ: refused."""
        sources, complete = dead_letter_sources(self._sqs, url)
        if not sources:
            raise ConfigError(
                f"{queue_name(dlq)} is not a dead-letter queue (no queue names it in its "
                "RedrivePolicy): redriving it would hide its messages from its consumers; if it "
                "is a consumer's dead_letter_queue, give that queue a RedrivePolicy "
                "(create_queue does)"
            )
        only = sources[0] if len(sources) == 1 and complete else None
        self._sources[url] = (only, self._clock())  # the routing cache, filled for free
        self._verified.add(url)

    def _pass(
        self, dlq: str, wait_seconds: int, behind: SettlingPasses | None = None
    ) -> tuple[dict[str, int], set[str]]:
        """Receive one batch from `dlq` and settle it, or with `behind` have it settled there
        (its counts then come later); (counter increments, message ids)."""
        if behind is not None:
            behind.check()  # a pass out that failed is decided before the next receive
        url = self._urls[dlq]
        received_at = self._clock()
        raw = self._sqs.run(  # as received: a DLQ's messages are neither postponed nor screened
            receive_messages(
                url,
                asked=self._limits.max_entries,
                wait_seconds=wait_seconds,
                visibility=self._visibility,
                queue=queue_name(dlq),
            )
        )
        self._watchdog.alive()
        if self._health is not None:
            self._health.touch()
        if not raw:
            return {}, set()
        messages = [read(item) for item in raw]
        steps = self._steps(url, messages, received_at)
        ids = {m.message_id for m in messages}
        if behind is not None:
            behind.start(lambda: self._settle(dlq, url, steps))
            return {}, ids
        return self._settle(dlq, url, steps), ids

    def _settle(self, dlq: str, dlq_url: str, steps: list[Step]) -> dict[str, int]:
        """A pass's calls (sends and hides, then deletes), logged and counted."""
        handled = self._execute(dlq, dlq_url, steps)
        self.stats.add(handled)
        if dlq in self._metrics:
            self._metrics[dlq].add(handled)
        return handled

    def _steps(self, dlq_url: str, messages: list[DlqMessage], received_at: float) -> list[Step]:
        only = None
        if any(m.known_source is None for m in messages):
            only = self._only_source(dlq_url)
        now, held_for = self._wall_clock(), self._clock() - received_at
        steps = []
        for message in messages:
            disposition = decide(
                message,
                self.policy,
                target=route(message, only_source=only, fallback=self.to),
                parking_queue=self.parking_queue,
                now=now,
                random=self._jitter(message.message.id, message.redrives),
                held_for=held_for,
                limits=self._limits,
                reasons=self.reasons,
            )
            steps.append(self._resolved(message, disposition))
        with self._bucket_lock:
            return throttle(steps, self._bucket, self._clock())

    def _resolved(self, message: DlqMessage, disposition: Disposition) -> Step:
        """The step with its target's URL; a target that does not exist makes it unroutable."""
        if disposition.target is None:
            return Step(message, disposition)
        try:
            url = self._urls.get(disposition.target) or self._sqs.queue_url(disposition.target)
        except QueueNotFound:
            hold = Disposition(Kind.UNROUTABLE, hide_seconds=self.policy.hold_seconds)
            return Step(message, hold, note=f"queue {disposition.target} does not exist")
        return Step(message, disposition, target_url=url)

    def _execute(self, dlq: str, dlq_url: str, steps: list[Step]) -> dict[str, int]:
        found = execute(self._sqs, steps, dlq_url=dlq_url, limits=self._limits)
        for outcome in found:
            _log(dlq, outcome, self._wall_clock())
        return counts(found)

    def _only_source(self, dlq_url: str) -> str | None:
        """The DLQ's only source queue (URL), cached for `SOURCES_TTL_SECONDS`."""
        cached = self._sources.get(dlq_url)
        if cached is not None and self._clock() - cached[1] < SOURCES_TTL_SECONDS:
            return cached[0]
        only = only_source(self._sqs, dlq_url)
        self._sources[dlq_url] = (only, self._clock())
        return only

    def _wait_for_tokens(self) -> None:
        if self._bucket is not None:
            with self._bucket_lock:
                wait = self._bucket.wait_seconds(1, self._clock())
            with self._watchdog.busy():  # waiting for the rate limit is work, not a stall
                self._stopping.wait(wait)

    def _on_signal(self, sig: signal.Signals) -> None:
        event(logging.INFO, {"action": "stopping", "signal": sig.name})
        self.stop()


def execute(
    sqs: SyncSqs, steps: list[Step], *, dlq_url: str, limits: SqsLimits = SQS_LIMITS
) -> list[StepResult]:
    """Run the steps' calls: sends and hides, then deletes for the sends SQS accepted."""
    return sqs.run(move(steps, dlq_url=dlq_url, limits=limits))


def only_source(sqs: SyncSqs, dlq_url: str) -> str | None:
    """The URL of the DLQ's only source queue (`ListDeadLetterSourceQueues`), else None."""
    urls, complete = dead_letter_sources(sqs, dlq_url)
    return urls[0] if len(urls) == 1 and complete else None


def dead_letter_sources(sqs: SyncSqs, dlq_url: str) -> tuple[list[str], bool]:
    """The first page of the URLs of the queues that dead-letter into the DLQ, and whether
    that page is all of them."""
    answer = sqs.call("list_dead_letter_source_queues", {"QueueUrl": dlq_url})
    return [str(url) for url in answer.get("queueUrls", [])], not answer.get("NextToken")


def _check_queues(dlqs: list[str], to: str | None, parking_queue: str | None) -> None:
    if not dlqs or not all(isinstance(q, str) and q for q in dlqs):
        raise ConfigError(f"dlqs={dlqs!r} is invalid: give at least one DLQ name or URL")
    names = {queue_name(q) for q in dlqs}
    for setting, queue in (("to", to), ("parking_queue", parking_queue)):
        if queue is not None and queue_name(queue) in names:
            raise ConfigError(f"{setting}={queue!r} is invalid: it is one of the DLQs drained")


def _log(dlq: str, outcome: StepResult, wall_now: float) -> None:
    step = outcome.step
    row = outcome.row(source=step.message.known_source)
    fields = {
        "action": row.action,
        "dlq": queue_name(dlq),
        "id": row.id,
        "target": row.target,
        "redrives": step.message.redrives,
        "hide_seconds": step.disposition.hide_seconds or None,
        "due_in": round(step.disposition.due_at - wall_now, 3) if step.disposition.due_at else None,
        "reason": row.reason,
        "error_type": row.error_type,
        "error": row.error,
    }
    quiet = row.action in ("moved", "parked", "delayed", "throttled") and not row.error
    level = logging.INFO if quiet else logging.WARNING
    event(level, fields)
