"""The demo's story, without the screen: a queue and its DLQ on an embedded local SQS, orders
that succeed, fail transiently, hit a downstream outage or are poison, a consumer with retries
and backoff, then the redrive daemon bringing the outage's victims back once it is over.

Each order's body says what it is (`kind`): the stand-in for the real world the handler meets.
"""

from __future__ import annotations

import importlib
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from sqsbatch import Consumer, MessageSendRequest, Producer
from sqsbatch._core.message import MessageBatch
from sqsbatch.backoff import exponential_backoff
from sqsbatch.config import ConsumerConfig
from sqsbatch.limits import SqsLimits
from sqsbatch.queues import create_queue

__all__ = ["KINDS", "DemoSettings", "Ledger", "Story"]

KINDS = ("ok", "flaky", "outage", "poison")
"""ok: acked at once; flaky: fails once or twice, then a retry succeeds; outage: its downstream
is down until the redrive phase, so it is dead-lettered and comes back; poison: always fails."""


@dataclass(frozen=True)
class DemoSettings:
    messages: int = 300
    max_retries: int = 2
    retry_base_seconds: float = 1.0
    redrive_base_seconds: float = 1.0
    max_batch_size: int = 25
    max_batch_timeout: float = 0.5
    max_concurrency: int = 4
    deadline_seconds: float = 90.0

    @classmethod
    def fast(cls) -> DemoSettings:
        return cls(
            messages=40,
            retry_base_seconds=0.0,
            redrive_base_seconds=0.2,
            max_batch_size=10,
            max_batch_timeout=0.0,
            deadline_seconds=45.0,
        )

    def kind_of(self, index: int) -> str:
        """A fixed mix, spread through the queue: ~3% poison, ~7% outage, ~15% flaky."""
        slot = index % 100
        if slot % 33 == 7:
            return "poison"
        if slot % 14 == 3:
            return "outage"
        if slot % 7 == 5:
            return "flaky"
        return "ok"


@dataclass
class Ledger:
    """What the handler saw, per message id; thread-safe."""

    kinds: dict[str, str] = field(default_factory=dict)
    deliveries: Counter[str] = field(default_factory=Counter)
    acked_in_phase: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def delivered(self, message_id: str) -> None:
        with self._lock:
            self.deliveries[message_id] += 1

    def acked(self, message_id: str, phase: int) -> None:
        with self._lock:
            self.acked_in_phase.setdefault(message_id, phase)

    def batch(self) -> None:
        with self._lock:
            self.batches += 1

    def acked_count(self, kinds: tuple[str, ...]) -> int:
        with self._lock:
            return sum(1 for mid in self.acked_in_phase if self.kinds[mid] in kinds)


class Story:
    """Runs the demo against `client` (a boto3 SQS client); `pipeline_requests` counts calls."""

    def __init__(self, client: Any, monitor: Any, settings: DemoSettings) -> None:
        self.settings = settings
        self.client = client
        self.monitor = monitor
        self.ledger = Ledger()
        self.phase = 0
        self.phase_name = "setting up"
        self.requests: Counter[str] = Counter()
        suffix = uuid.uuid4().hex[:6]
        self.queue = f"demo-orders-{suffix}"
        self.dlq = f"demo-orders-{suffix}-dlq"
        self.started = time.monotonic()
        self.consumer: Consumer | None = None
        self.redriver: Any = None
        self.timed_out = False
        self._thread: threading.Thread | None = None
        client.meta.events.register("before-call.sqs.*", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        self.requests[model.name] += 1

    def expected(self, *kinds: str) -> int:
        return sum(1 for kind in self.ledger.kinds.values() if kind in kinds)

    # -- the phases ------------------------------------------------------------------------------

    def setup(self) -> None:
        s = self.settings
        create_queue(
            self.queue, dead_letter_queue=self.dlq, max_retries=s.max_retries, client=self.client
        )
        self.phase_name = f"producing {s.messages} orders"
        producer = Producer(self.queue, delivery_delay=0, client=self.client)
        requests = [
            MessageSendRequest({"order": i, "kind": s.kind_of(i)}) for i in range(s.messages)
        ]
        for start in range(0, len(requests), 100):
            chunk = requests[start : start + 100]
            ids = producer.send_batch(chunk)
            for message_id, request in zip(ids, chunk, strict=True):
                self.ledger.kinds[message_id] = request.body["kind"]

    def consume(self) -> None:
        """Phase 1: everything but the outage's and the poison's messages is acked."""
        s = self.settings
        values: dict[str, Any] = {
            "max_batch_size": s.max_batch_size,
            "max_batch_timeout": s.max_batch_timeout,
            "max_retries": s.max_retries,
            "dead_letter_queue": self.dlq,
            "max_concurrency": s.max_concurrency,
            "retry_delay": 1 if s.retry_base_seconds else 0,
        }
        config = ConsumerConfig(**values)
        # Long polls of at most 1 s, so that the consumer stops within a second at the end.
        limits = SqsLimits(max_wait_seconds=1)
        self.consumer = Consumer(self.queue, self.handle, config, client=self.client, limits=limits)
        self._thread = threading.Thread(target=self.consumer.run, name="demo-consumer", daemon=True)
        self._thread.start()
        self.phase, self.phase_name = 1, "consuming: retries with backoff, then the DLQ"
        dead = self.expected("outage", "poison")
        self._wait(
            lambda: (
                self.ledger.acked_count(("ok", "flaky")) >= self.expected("ok", "flaky")
                and self._dlq_total() >= dead
                and self._source_total() == 0
            )
        )

    def redrive(self) -> None:
        """Phase 2: the outage is over; the redrive daemon brings the DLQ back, poison returns."""
        redrive: Any = importlib.import_module("redrive")  # the daemon, for this phase only

        s = self.settings
        policy = redrive.BackoffPolicy(
            base_delay=s.redrive_base_seconds,
            factor=2.0,
            max_delay=max(10.0, s.redrive_base_seconds),
            jitter=s.redrive_base_seconds / 2,
            max_redrives=1,
        )
        self.redriver = redrive.Redriver([self.dlq], policy=policy, client=self.client)
        self.phase, self.phase_name = 2, "outage over: the redrive daemon drains the DLQ"
        poison = self.expected("poison")

        def done() -> bool:
            self.redriver.run_once(wait_seconds=0)
            return (
                self.ledger.acked_count(("outage",)) >= self.expected("outage")
                and self._source_total() == 0
                and self._dlq_total() == poison
                and all(
                    self.ledger.deliveries[m] >= 2 * (s.max_retries + 1)
                    for m in self._ids("poison")
                )
            )

        self._wait(done)

    def finish(self) -> None:
        if self.consumer is not None:
            self.consumer.stop()
            if self._thread is not None:
                self._thread.join(timeout=30)
        self.phase, self.phase_name = 3, "done" if not self.timed_out else "gave up (deadline)"

    # -- the handler -----------------------------------------------------------------------------

    def handle(self, batch: MessageBatch) -> None:
        self.ledger.batch()
        poisoned = False
        for message in batch.messages:
            self.ledger.delivered(message.id)
            body = message.body if isinstance(message.body, dict) else {"kind": "poison"}
            if body["kind"] == "poison":
                poisoned = True  # left undecided: the raise below retries it and names the error
            elif self._fails(body, message.attempts):
                message.retry(delay_seconds=self._backoff(message.attempts))
            else:
                message.ack()
                self.ledger.acked(message.id, self.phase)
        if poisoned:
            raise ValueError("malformed order: no such product")

    def _fails(self, body: dict[str, Any], attempts: int) -> bool:
        if body["kind"] == "outage":
            return self.phase < 2  # the downstream is down until the redrive phase
        if body["kind"] == "flaky":
            return attempts <= 1 + int(body["order"]) % 2  # once or twice, then it works
        return False

    def _backoff(self, attempts: int) -> int:
        base = self.settings.retry_base_seconds
        return exponential_backoff(attempts, base, max_seconds=8) if base else 0

    # -- watching (through `monitor`, so that it is not counted) ---------------------------------

    def _ids(self, kind: str) -> list[str]:
        return [mid for mid, k in self.ledger.kinds.items() if k == kind]

    def _wait(self, done: Any) -> None:
        deadline = self.started + self.settings.deadline_seconds
        while not done():
            if time.monotonic() > deadline:
                self.timed_out = True
                return
            time.sleep(0.25)

    def _total(self, queue: str) -> int:
        url = self.monitor.get_queue_url(QueueName=queue)["QueueUrl"]
        names = [
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ]
        attributes = self.monitor.get_queue_attributes(QueueUrl=url, AttributeNames=names)
        return sum(int(attributes["Attributes"].get(name, 0)) for name in names)

    def _source_total(self) -> int:
        return self._total(self.queue)

    def _dlq_total(self) -> int:
        return self._total(self.dlq)

    # -- the outcome -----------------------------------------------------------------------------

    def outcome(self) -> dict[str, Any]:
        rows = [self._ended(mid, kind) for mid, kind in self.ledger.kinds.items()]
        by_kind: dict[str, Counter[str]] = {kind: Counter() for kind in KINDS}
        for row in rows:
            by_kind[row["kind"]][row["ended"]] += 1
        total = sum(self.requests.values())
        return {
            "messages": len(rows),
            "seconds": round(time.monotonic() - self.started, 2),
            "complete": not self.timed_out,
            "queue": self.queue,
            "dead_letter_queue": self.dlq,
            "requests": total,
            "requests_per_message": round(total / max(1, len(rows)), 2),
            "requests_by_operation": dict(sorted(self.requests.items())),
            "batches": self.ledger.batches,
            "consumer": self.consumer.stats.as_dict() if self.consumer else {},
            "redrive": self.redriver.stats.as_dict() if self.redriver else {},
            "ended": dict(Counter(row["ended"] for row in rows)),
            "by_kind": {kind: dict(counts) for kind, counts in by_kind.items() if counts},
            "details": rows,
        }

    def _ended(self, message_id: str, kind: str) -> dict[str, Any]:
        deliveries = self.ledger.deliveries[message_id]
        phase = self.ledger.acked_in_phase.get(message_id)
        if phase is None:
            ended = "dead-letter queue" if not self.timed_out else "unsettled"
        elif phase == 2:
            ended = "acked after redrive"
        elif deliveries > 1:
            ended = "acked after retries"
        else:
            ended = "acked"
        return {"id": message_id, "kind": kind, "ended": ended, "deliveries": deliveries}
