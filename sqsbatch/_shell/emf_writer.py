"""CloudWatch metrics as Embedded Metric Format lines on stdout: no API call, on Lambda and ECS.

Off by default; on with the setting `metrics = "emf"` (`SQSBATCH_METRICS=emf`, or in
`sqsbatch.toml`). What is counted and how it becomes a document is the core's
(`sqsbatch._core.metrics`); this shell holds the window behind a lock, reads the clocks and
writes the lines. The metric names and what to alert on: docs/operations.md.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import TextIO

from sqsbatch._core.metrics import (
    CONSUMER_METRICS,
    BatchSample,
    EmfFormat,
    MetricsWindow,
)
from sqsbatch.config import METRICS_NAMESPACE_PATTERN, ConsumerConfig
from sqsbatch.errors import ConfigError

__all__ = ["EmfMetrics", "check_metrics", "consumer_metrics"]

MAX_INTERVAL_SECONDS = 3600.0


def check_metrics(mode: object, namespace: object, interval: object) -> None:
    """The three metrics settings as `ConsumerConfig` checks them, for callers that take them
    as plain arguments (`Redriver`): a one-line `ConfigError` naming the first bad one."""
    if mode not in ("off", "emf"):
        raise ConfigError(f"metrics={mode!r} is invalid: must be 'off' or 'emf'")
    if not isinstance(namespace, str) or not re.fullmatch(METRICS_NAMESPACE_PATTERN, namespace):
        raise ConfigError(
            f"metrics_namespace={namespace!r} is invalid: must be 1 to 255 of the characters "
            "A-Z a-z 0-9 . _ # : / -"
        )
    if (
        isinstance(interval, bool)
        or not isinstance(interval, int | float)
        or not 0 < interval <= MAX_INTERVAL_SECONDS
    ):
        raise ConfigError(
            f"metrics_interval={interval!r} is invalid: must be seconds > 0 and <= 3600"
        )


class EmfMetrics:
    """The metrics of one queue (a consumer's, or a DLQ the redrive daemon drains).

    `interval` None: `tick()` writes after every batch (Lambda); else at most once per interval.
    `flush()` writes what is left (a stopping poller). Safe to use from any thread.
    """

    def __init__(
        self,
        queue: str,
        *,
        namespace: str = "sqsbatch",
        interval: float | None = 60.0,
        names: Mapping[str, str] = CONSUMER_METRICS,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        out: TextIO | None = None,
    ) -> None:
        self.queue = queue
        self.namespace = namespace
        self._clock = clock
        self._wall_clock = wall_clock
        self._out = out
        self._lock = threading.Lock()
        self._window = MetricsWindow(names, interval, opened_at=clock())
        self._format = EmfFormat(namespace, {"QueueName": queue})

    def add(self, counts: Mapping[str, int]) -> None:
        """Counts a flow or a handler's end concluded (the same dicts `stats` adds up)."""
        with self._lock:
            self._window.add(counts)

    def sample(self, sample: BatchSample) -> None:
        with self._lock:
            self._window.sample(sample)

    def tick(self) -> None:
        """Write the window when it is due."""
        now = self._clock()
        with self._lock:
            if not self._window.due(now):
                return
        self.flush()

    def flush(self) -> None:
        """Write the window now, whatever it holds (zeros too)."""
        with self._lock:  # held while writing: two threads' lines never interleave
            snapshot = self._window.take(self._clock())
            lines = self._format.lines(snapshot, timestamp_ms=int(self._wall_clock() * 1000))
            out = self._out if self._out is not None else sys.stdout
            out.write("".join(line + "\n" for line in lines))
            out.flush()


def consumer_metrics(
    queue: str,
    config: ConsumerConfig,
    *,
    per_invocation: bool = False,
    clock: Callable[[], float] = time.monotonic,
    wall_clock: Callable[[], float] = time.time,
) -> EmfMetrics | None:
    """A consumer's metrics as its config asks (None: `metrics` is off): written every
    `metrics_interval` by a poller, once per invocation under Lambda (`per_invocation`)."""
    if config.metrics != "emf":
        return None
    return EmfMetrics(
        queue,
        namespace=config.metrics_namespace,
        interval=None if per_invocation else config.metrics_interval,
        clock=clock,
        wall_clock=wall_clock,
    )
