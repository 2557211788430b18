"""What the metrics say, gathered in one place, and their CloudWatch Embedded Metric Format.

No I/O, no clock. Every front end hands over the core's own conclusions: the `counts` its flows
and `handler_end` return (the same dicts `consumer.stats` adds up), and one `BatchSample` per
handled batch. A `MetricsWindow` adds them up until `due(now)` (the pollers and the redrive
daemon: every `metrics_interval`; Lambda: every batch), and `EmfFormat` turns what it took into
EMF lines, the JSON that CloudWatch Logs turns into metrics with no API call.

The format is the EMF specification written out here (about forty lines) rather than
aws-embedded-metrics: importing that library imports aiohttp (about 0.17 s on a cold start) and
its logger flushes through asyncio; the tests check these documents with its validators.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sqsbatch._core.envelope import EXPIRED, INVALID_BODY, PAYLOAD_MISSING, RETRIES_EXHAUSTED
from sqsbatch._core.message import Message

__all__ = [
    "CONSUMER_METRICS",
    "DEAD_LETTER_REASONS",
    "DISTRIBUTIONS",
    "MAX_METRICS_PER_DOCUMENT",
    "MAX_VALUES_PER_METRIC",
    "REASON_COUNT",
    "REDRIVE_METRICS",
    "BatchSample",
    "EmfFormat",
    "MetricsWindow",
    "Snapshot",
    "batch_sample",
    "reason_key",
]

CONSUMER_METRICS = {
    "received": "Received",
    "batches": "Batches",
    "acked": "Acked",
    "retried": "Retried",
    "dead_lettered": "DeadLettered",
    "dropped": "Dropped",
    "left_to_redrive_policy": "LeftToRedrivePolicy",
    "postponed": "Postponed",
    "expired_receipts": "ExpiredReceipts",
    "settle_failures": "SettleFailures",
    "receive_errors": "ReceiveErrors",
    "handler_errors": "HandlerErrors",
    "handler_timeouts": "HandlerTimeouts",
    "circuit_open": "CircuitOpen",
    "paused_seconds": "PausedSeconds",
}
"""A consumer's counters (the names `consumer.stats` uses) and their metric names."""

REDRIVE_METRICS = {
    "moved": "Moved",
    "delayed": "Hidden",
    "parked": "Parked",
    "exhausted": "Skipped",
    "unroutable": "Skipped",
    "kept": "Skipped",
    "failed": "Failed",
}
"""The redrive daemon's counters and their metric names (three kinds of skipped add up)."""

DISTRIBUTIONS = {
    "BatchSize": "Count",
    "HandlerDuration": "Milliseconds",
    "MessageAge": "Milliseconds",
}
"""One value per batch each: its size, its handler's run time, its oldest message's age."""

REQUESTED = "requested"
DEAD_LETTER_REASONS = (RETRIES_EXHAUSTED, EXPIRED, INVALID_BODY, PAYLOAD_MISSING, REQUESTED)
"""The `Reason` dimension of `DeadLettered`: a handler's own `dead_letter(reason)` text is
`requested`, so that a free-form reason cannot make a new CloudWatch metric per message."""
REASON_COUNT = "dead_lettered:"
"""Counts keyed `dead_lettered:<reason>` break `dead_lettered` down by reason."""

MAX_METRICS_PER_DOCUMENT = 100
MAX_VALUES_PER_METRIC = 100
"""CloudWatch's limits per EMF document."""


def reason_key(reason: str) -> str:
    """The counter of a message dead-lettered for `reason`."""
    known = reason if reason in DEAD_LETTER_REASONS else REQUESTED
    return REASON_COUNT + known


@dataclass(frozen=True)
class BatchSample:
    """One handled batch: how many messages, how long its handler ran, how old its oldest
    message was when it was delivered (now minus the message's `timestamp`)."""

    size: int
    handler_ms: float
    oldest_age_ms: float


def batch_sample(
    messages: Sequence[Message], *, handler_seconds: float, wall_now: float
) -> BatchSample:
    """The sample of a batch whose handler ran `handler_seconds`, delivered at `wall_now`."""
    oldest = min(message.timestamp for message in messages).timestamp()
    return BatchSample(
        len(messages), round(handler_seconds * 1000, 3), round(max(0.0, wall_now - oldest) * 1000)
    )


@dataclass
class Snapshot:
    """What one window gathered: counts by metric name, dead letters by reason, and the
    per-batch values."""

    counts: dict[str, int]
    reasons: dict[str, int]
    values: dict[str, list[float]]


@dataclass
class MetricsWindow:
    """Counts and samples since the last `take`. `interval` None: due after every batch."""

    names: Mapping[str, str]
    interval: float | None
    opened_at: float
    _counts: dict[str, int] = field(default_factory=dict)
    _reasons: dict[str, int] = field(default_factory=dict)
    _samples: list[BatchSample] = field(default_factory=list)

    def add(self, counts: Mapping[str, int]) -> None:
        for key, value in counts.items():
            if key.startswith(REASON_COUNT):
                reason = key[len(REASON_COUNT) :]
                self._reasons[reason] = self._reasons.get(reason, 0) + value
            elif key in self.names:
                name = self.names[key]
                self._counts[name] = self._counts.get(name, 0) + value

    def sample(self, sample: BatchSample) -> None:
        self._samples.append(sample)

    def due(self, now: float) -> bool:
        return self.interval is None or now - self.opened_at >= self.interval

    def take(self, now: float) -> Snapshot:
        """Empty the window; every counter is in the snapshot, 0 when nothing happened, so a
        quiet consumer's graphs show zeros rather than gaps."""
        counts = dict.fromkeys(dict.fromkeys(self.names.values()), 0) | self._counts
        samples = self._samples
        values = {
            "BatchSize": [float(s.size) for s in samples],
            "HandlerDuration": [s.handler_ms for s in samples],
            "MessageAge": [s.oldest_age_ms for s in samples],
        }
        snapshot = Snapshot(counts, dict(self._reasons), values if samples else {})
        self._counts, self._reasons, self._samples = {}, {}, []
        self.opened_at = now
        return snapshot


class EmfFormat:
    """EMF lines for one namespace and dimension set (`QueueName`).

    `lines(snapshot)`: one document for the counts and the first 100 values of each
    distribution, one more per further 100 values, one per dead-letter reason (the dimensions
    plus `Reason`); each within CloudWatch's limits (100 metrics, 100 values per metric). What
    does not change from one line to the next (the directive, the dimensions) is serialized once.
    """

    def __init__(self, namespace: str, dimensions: Mapping[str, str]) -> None:
        self.namespace = namespace
        self.dimensions = dict(dimensions)
        self._heads: dict[tuple[object, ...], str] = {}

    def lines(self, snapshot: Snapshot, *, timestamp_ms: int) -> list[str]:
        counts: list[Metric] = [(name, "Count", value) for name, value in snapshot.counts.items()]
        chunks = list(_chunks(snapshot.values))
        first = chunks[0] if chunks else []
        where = self.dimensions
        found = [self._line(part, where, timestamp_ms) for part in _split([*counts, *first])]
        found += [self._line(chunk, where, timestamp_ms) for chunk in chunks[1:]]
        for reason, value in sorted(snapshot.reasons.items()):
            metric: Metric = ("DeadLettered", "Count", value)
            found.append(self._line([metric], {**where, "Reason": reason}, timestamp_ms))
        return found

    def _line(self, metrics: Sequence[Metric], where: Mapping[str, str], timestamp_ms: int) -> str:
        key = (*where.items(), *((name, unit) for name, unit, _ in metrics))
        head = self._heads.get(key)
        if head is None:
            directive = {
                "Namespace": self.namespace,
                "Dimensions": [list(where)],
                "Metrics": [{"Name": name, "Unit": unit} for name, unit, _ in metrics],
            }
            head = _compact({"CloudWatchMetrics": [directive]})[1:-1] + "}," + _compact(where)[1:-1]
            if len(self._heads) < MAX_HEADS:
                self._heads[key] = head
        values = _compact({name: value for name, _, value in metrics})
        return '{"_aws":{"Timestamp":' + str(int(timestamp_ms)) + "," + head + "," + values[1:]


MAX_HEADS = 64
"""Serialized heads kept per `EmfFormat` (a few: counts, spilled values, four reasons)."""


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


Metric = tuple[str, str, float | list[float]]


def _chunks(values: Mapping[str, list[float]]) -> Iterable[list[Metric]]:
    """The distributions, at most `MAX_VALUES_PER_METRIC` values of each per document."""
    longest = max((len(v) for v in values.values()), default=0)
    for start in range(0, longest, MAX_VALUES_PER_METRIC):
        yield [
            (name, DISTRIBUTIONS[name], found[start : start + MAX_VALUES_PER_METRIC])
            for name, found in values.items()
            if found[start:]
        ]


def _split(metrics: list[Metric]) -> Iterable[list[Metric]]:
    for start in range(0, max(len(metrics), 1), MAX_METRICS_PER_DOCUMENT):
        yield metrics[start : start + MAX_METRICS_PER_DOCUMENT]
