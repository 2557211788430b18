"""One queue as a consumer sees it once started: frozen, passed instead of ten arguments."""

from __future__ import annotations

from dataclasses import dataclass

from sqsbatch._core.ledger import LastFailure
from sqsbatch._core.queue_settings import QueueSettings
from sqsbatch._core.shapes import is_fifo, queue_name
from sqsbatch.config import ConsumerConfig
from sqsbatch.limits import SQS_LIMITS, SqsLimits

__all__ = ["QueueContext"]


@dataclass(frozen=True)
class QueueContext:
    """A queue, its URLs, and the settings its RedrivePolicy resolved (`queue_settings`)."""

    name: str
    url: str
    dlq_url: str | None
    config: ConsumerConfig
    last_failure: LastFailure
    fifo: bool
    limits: SqsLimits = SQS_LIMITS

    @classmethod
    def of(
        cls,
        url: str,
        settings: QueueSettings,
        dlq_url: str | None,
        limits: SqsLimits = SQS_LIMITS,
    ) -> QueueContext:
        return cls(
            queue_name(url),
            url,
            dlq_url,
            settings.config,
            settings.last_failure,
            is_fifo(url),
            limits,
        )
