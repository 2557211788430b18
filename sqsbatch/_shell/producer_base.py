"""What `Producer` and `AsyncProducer` share: their settings, read once and checked before any
client is made, the request count and each send's plan (`sqsbatch._core.sending`), with the wall
clock and the sender's trace context (`tracing.outgoing`, for the consumer's span to link to).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from sqsbatch._core.calls import BatchRun
from sqsbatch._core.message import check_delay
from sqsbatch._core.payloads import DEFAULT_THRESHOLD
from sqsbatch._core.sending import MessageSendRequest, SendPlan, check_ttl
from sqsbatch._core.shapes import is_fifo
from sqsbatch._shell.tracing import outgoing
from sqsbatch.config import ProducerConfig
from sqsbatch.errors import FifoError
from sqsbatch.limits import SQS_LIMITS, SqsLimits
from sqsbatch.payloads import S3Payloads

if TYPE_CHECKING:
    from sqsbatch._async.door import AsyncSqs
    from sqsbatch._sync.door import SyncSqs

__all__ = ["ProducerBase", "large_payloads_setting", "producer_settings"]


def producer_settings(
    queue: str,
    delivery_delay: int | None,
    ttl_seconds: float | None,
    load: Callable[[], ProducerConfig] | None = None,
) -> tuple[int | None, float | None]:
    """A producer's `delivery_delay` and `ttl_seconds`: each given, else from the settings
    (`[[queues.producers]]`, `SQSBATCH_*`, read by `load`), read once; FIFO queues refuse a
    delay."""
    if delivery_delay is None or ttl_seconds is None:
        settings = load() if load is not None else ProducerConfig.load(queue)
        if delivery_delay is None:
            delivery_delay = settings.delivery_delay
        if ttl_seconds is None:
            ttl_seconds = settings.ttl_seconds
    checked = check_delay("delivery_delay", delivery_delay)
    if checked and is_fifo(queue):
        raise FifoError("delivery_delay on a FIFO queue: SQS forbids per-message delays there")
    return checked, check_ttl("ttl_seconds", ttl_seconds)


def large_payloads_setting(
    queue: str, given: S3Payloads | None, load: Callable[[], ProducerConfig] | None = None
) -> S3Payloads | None:
    """`large_payloads`: given, else from the settings (`large_payloads_bucket` and
    `large_payloads_threshold`, read by `load`), else None (no payload goes to S3)."""
    if given is not None:
        if not isinstance(given, S3Payloads):
            raise TypeError(f"large_payloads must be an S3Payloads, not {type(given).__name__}")
        return given
    settings = load() if load is not None else ProducerConfig.load(queue)
    if settings.large_payloads_bucket is None:
        return None
    threshold = settings.large_payloads_threshold or DEFAULT_THRESHOLD
    return S3Payloads(settings.large_payloads_bucket, threshold=threshold)


class ProducerBase:
    """What `Producer` and `AsyncProducer` share: their settings (checked before any client is
    made), the request count and each send's plan. The door (`_door`) and the calls, made or
    awaited, are theirs."""

    _sqs: SyncSqs | AsyncSqs

    def __init__(
        self,
        queue: str,
        *,
        delivery_delay: int | None = None,
        ttl_seconds: float | None = None,
        client: Any = None,
        limits: SqsLimits = SQS_LIMITS,
        clock: Callable[[], float] = time.time,
        large_payloads: S3Payloads | None = None,
    ) -> None:
        load = functools.cache(lambda: ProducerConfig.load(queue))  # the file read once
        self.delivery_delay, self.ttl_seconds = producer_settings(
            queue, delivery_delay, ttl_seconds, load
        )
        self.large_payloads = large_payloads_setting(queue, large_payloads, load)
        self.queue = queue
        self._limits = limits
        self._clock = clock
        self._content_dedup: bool | None = None
        self._sqs = self._door(client)

    def _door(self, client: Any) -> SyncSqs | AsyncSqs:
        raise NotImplementedError

    @property
    def requests(self) -> int:
        """SQS requests made so far."""
        return sum(self._sqs.requests.values())

    def _plan(
        self,
        messages: Iterable[MessageSendRequest | Mapping[str, Any]],
        delay_seconds: int | None,
        ttl_seconds: float | None,
    ) -> SendPlan:
        """One `send_batch` call's messages, checked and encoded, with the defaults applied."""
        return SendPlan(
            self.queue,
            messages,
            batch_delay=delay_seconds,
            default_delay=self.delivery_delay,
            batch_ttl=ttl_seconds,
            default_ttl=self.ttl_seconds,
            wall_now=self._clock(),
            trace=outgoing(),
            limits=self._limits,
            large=self.large_payloads.offload() if self.large_payloads else None,
        )

    def _orphans(self, plan: SendPlan, run: BatchRun | None) -> None:
        """Log the payloads put in S3 for messages SQS did not take (`run` None: the send
        raised). They are left in S3: when the outcome is unknown a pointer may be out."""
        if self.large_payloads is not None and plan.uploads:
            why = "the send failed" if run is None else "SQS refused their messages"
            self.large_payloads.orphaned(plan.orphans(run), why)
