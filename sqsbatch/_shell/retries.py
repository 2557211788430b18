"""botocore's standard retries, with the wait before each retry taken from the core.

botocore 1.40's standard retry mode waits `U(0, 1) * 2**(attempt-1)` seconds before retrying any
failed request, a throttle and a dropped connection alike. A poller's slot waits through it with
its batch in hand: at 10 % failed requests that wait was a third of a slot's time
(docs/robustness.md). `retries_soon` keeps everything else of botocore's standard mode (which
errors are retried, `max_attempts`, the retry quota that stops retrying while failures persist)
and takes the wait from `sqsbatch._core.delays.call_retry_seconds`: AWS's 2026 standard mode,
a 50 ms base after a transient failure and 1 s after a throttle.
"""

from __future__ import annotations

import random
from typing import Any

from botocore.retries import quota, standard
from botocore.retries.base import BaseRetryBackoff

from sqsbatch._core.delays import call_retry_seconds

__all__ = ["CallBackoff", "retries_soon"]


class CallBackoff(BaseRetryBackoff):  # type: ignore[misc]
    """botocore's backoff interface over `call_retry_seconds`."""

    def __init__(self, draw: Any = random.random) -> None:
        self._draw = draw
        self._throttled = standard.ThrottledRetryableChecker()

    def delay_amount(self, context: Any) -> float:
        throttled = bool(self._throttled.is_retryable(context))
        return call_retry_seconds(context.attempt_number, throttled=throttled, draw=self._draw())


def retries_soon(client: Any) -> Any:
    """`client` (boto3 or aiobotocore), its standard-mode retry handler replaced by one that
    waits `CallBackoff`; a client in another retry mode is left as it is."""
    retries = client.meta.config.retries or {}
    if retries.get("mode") != "standard":
        return client
    handler_class, policy_class, conditions_class = _classes(client)
    checker = standard.RetryQuotaChecker(quota.RetryQuota())
    service = client.meta.service_model.service_id.hyphenize()
    events = client.meta.events
    events.register(f"after-call.{service}", checker.release_retry_quota)
    attempts = retries.get("total_max_attempts", standard.DEFAULT_MAX_ATTEMPTS)
    handler = handler_class(
        retry_policy=policy_class(
            retry_checker=conditions_class(max_attempts=attempts), retry_backoff=CallBackoff()
        ),
        retry_event_adapter=standard.RetryEventAdapter(),
        retry_quota=checker,
    )
    unique_id = f"retry-config-{service}"  # botocore's own handler's: this one takes its place
    events.unregister(f"needs-retry.{service}", unique_id=unique_id)
    events.register(f"needs-retry.{service}", handler.needs_retry, unique_id=unique_id)
    return client


def _classes(client: Any) -> tuple[Any, Any, Any]:
    """The standard mode's handler, policy and conditions: aiobotocore's for its clients."""
    if any(kind.__module__.startswith("aiobotocore") for kind in type(client).__mro__):
        from aiobotocore.retries import standard as aio  # noqa: PLC0415 - only with aioboto3

        return aio.AioRetryHandler, aio.AioRetryPolicy, aio.AioStandardRetryConditions
    return standard.RetryHandler, standard.RetryPolicy, standard.StandardRetryConditions
