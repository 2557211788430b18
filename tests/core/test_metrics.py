"""The metrics window and its EMF documents, on a fake clock (`sqsbatch._core.metrics`).

Every document is checked twice by tests/support/emf.py: the EMF specification's structure,
and AWS's own validators (aws-embedded-metrics).
"""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pytest

from sqsbatch._core.metrics import (
    CONSUMER_METRICS,
    REDRIVE_METRICS,
    BatchSample,
    EmfFormat,
    MetricsWindow,
    Snapshot,
    batch_sample,
    reason_key,
)
from sqsbatch._shell.emf_writer import EmfMetrics
from tests.support.emf import check_line, metric, now_ms


def documents_of(snapshot: Snapshot, **dimensions: str) -> list[dict[str, object]]:
    emf = EmfFormat("sqsbatch", dimensions or {"QueueName": "orders"})
    return [check_line(line) for line in emf.lines(snapshot, timestamp_ms=now_ms())]


def test_the_window_adds_up_counts_by_metric_name_and_reasons_apart() -> None:
    window = MetricsWindow(CONSUMER_METRICS, interval=60, opened_at=0)
    window.add({"received": 10})
    window.add({"batches": 1, "acked": 7, "dead_lettered": 3, reason_key("expired"): 1})
    window.add({"dead_lettered": 0, reason_key("tenant gone"): 2, "handler_errors": 1})
    snapshot = window.take(61)
    assert snapshot.counts["Received"] == 10
    assert snapshot.counts["Acked"] == 7
    assert snapshot.counts["DeadLettered"] == 3
    assert snapshot.counts["HandlerErrors"] == 1
    assert snapshot.reasons == {"expired": 1, "requested": 2}


def test_every_counter_is_written_zero_too_so_graphs_have_no_gaps() -> None:
    window = MetricsWindow(CONSUMER_METRICS, interval=60, opened_at=0)
    snapshot = window.take(60)
    assert snapshot.counts == dict.fromkeys(CONSUMER_METRICS.values(), 0)
    assert snapshot.values == {}  # no batch: no BatchSize, HandlerDuration, MessageAge
    (document,) = documents_of(snapshot)
    assert document["Received"] == 0 and "BatchSize" not in document


def test_the_window_is_due_once_per_interval_and_empties_when_taken() -> None:
    window = MetricsWindow(CONSUMER_METRICS, interval=60, opened_at=100)
    assert not window.due(159.9)
    assert window.due(160)
    window.add({"received": 1})
    assert window.take(160).counts["Received"] == 1
    assert not window.due(219.9)  # the next interval counts from the take
    assert window.take(220).counts["Received"] == 0


def test_without_an_interval_every_batch_is_due() -> None:
    assert MetricsWindow(CONSUMER_METRICS, interval=None, opened_at=5).due(5)


@pytest.mark.parametrize(
    ("reason", "key"),
    [
        ("retries_exhausted", "dead_lettered:retries_exhausted"),
        ("expired", "dead_lettered:expired"),
        ("invalid_body", "dead_lettered:invalid_body"),
        ("customer 42 was deleted", "dead_lettered:requested"),  # free text never a dimension
    ],
)
def test_a_reason_is_one_of_four_dimension_values(reason: str, key: str) -> None:
    assert reason_key(reason) == key


def test_a_snapshot_is_one_document_plus_one_per_reason() -> None:
    window = MetricsWindow(CONSUMER_METRICS, interval=60, opened_at=0)
    window.add({"dead_lettered": 3, reason_key("expired"): 1, reason_key("x"): 2})
    window.sample(BatchSample(size=10, handler_ms=12.5, oldest_age_ms=3000))
    window.sample(BatchSample(size=4, handler_ms=2.0, oldest_age_ms=100))
    documents = documents_of(window.take(60))
    assert len(documents) == 3
    assert metric(documents, "DeadLettered", QueueName="orders") == [3]
    assert metric(documents, "DeadLettered", QueueName="orders", Reason="expired") == [1]
    assert metric(documents, "DeadLettered", QueueName="orders", Reason="requested") == [2]
    assert metric(documents, "BatchSize", QueueName="orders") == [10, 4]
    assert metric(documents, "HandlerDuration", QueueName="orders") == [12.5, 2.0]
    assert metric(documents, "MessageAge", QueueName="orders") == [3000, 100]
    units = {m["Name"]: m["Unit"] for m in documents[0]["_aws"]["CloudWatchMetrics"][0]["Metrics"]}  # type: ignore[index]
    assert units["HandlerDuration"] == units["MessageAge"] == "Milliseconds"
    assert units["BatchSize"] == units["Received"] == "Count"


def test_more_than_100_batches_in_an_interval_spill_into_more_documents_losing_none() -> None:
    window = MetricsWindow(CONSUMER_METRICS, interval=60, opened_at=0)
    for n in range(250):
        window.sample(BatchSample(size=1 + n % 10, handler_ms=float(n), oldest_age_ms=n))
    documents = documents_of(window.take(60))
    assert len(documents) == 3  # 100 + 100 + 50 values of each distribution
    assert metric(documents, "HandlerDuration", QueueName="orders") == [
        float(n) for n in range(250)
    ]
    assert len([d for d in documents if "Received" in d]) == 1  # counts are written once


def test_more_than_100_metrics_are_split_across_documents() -> None:
    names = {f"c{n}": f"Counter{n}" for n in range(150)}
    window = MetricsWindow(names, interval=60, opened_at=0)
    window.add({f"c{n}": n for n in range(150)})
    documents = documents_of(window.take(60))
    assert len(documents) == 2
    assert sorted(metric(documents, f"Counter{n}", QueueName="orders")[0] for n in range(150)) == [
        float(n) for n in range(150)
    ]


def test_the_redrive_daemon_s_skipped_adds_up_three_counters() -> None:
    window = MetricsWindow(REDRIVE_METRICS, interval=60, opened_at=0)
    window.add({"moved": 5, "delayed": 2, "exhausted": 1, "unroutable": 1, "kept": 3, "failed": 0})
    documents = documents_of(window.take(60), QueueName="orders-dlq")
    assert metric(documents, "Moved", QueueName="orders-dlq") == [5]
    assert metric(documents, "Hidden", QueueName="orders-dlq") == [2]
    assert metric(documents, "Skipped", QueueName="orders-dlq") == [5]
    assert metric(documents, "Parked", QueueName="orders-dlq") == [0]


class Stamped:
    def __init__(self, epoch: float) -> None:
        self.timestamp = datetime.fromtimestamp(epoch, UTC)


def test_a_batch_sample_is_its_size_run_time_and_oldest_message_s_age() -> None:
    messages = [Stamped(1000.0), Stamped(990.5), Stamped(999.0)]
    sample = batch_sample(messages, handler_seconds=0.0123, wall_now=1000.0)  # type: ignore[arg-type]
    assert sample == BatchSample(size=3, handler_ms=12.3, oldest_age_ms=9500)


def test_a_clock_behind_the_producer_s_gives_age_zero_not_negative() -> None:
    sample = batch_sample([Stamped(1005.0)], handler_seconds=0, wall_now=1000.0)  # type: ignore[list-item]
    assert sample.oldest_age_ms == 0


def test_emf_metrics_write_one_line_per_document_only_when_due() -> None:
    now = [0.0]
    out = io.StringIO()
    metrics = EmfMetrics(
        "orders", namespace="Shop/Orders", interval=60, clock=lambda: now[0], out=out
    )
    metrics.add({"received": 3})
    metrics.tick()
    assert out.getvalue() == ""  # not due yet
    now[0] = 60.0
    metrics.tick()
    (line,) = out.getvalue().splitlines()
    document = check_line(line)
    assert document["Received"] == 3 and document["QueueName"] == "orders"
    assert document["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "Shop/Orders"
    metrics.flush()  # a stopping poller writes what is left, zeros too
    assert len(out.getvalue().splitlines()) == 2


def test_a_line_from_a_kept_head_is_the_line_a_fresh_format_writes() -> None:
    kept = EmfFormat("sqsbatch", {"QueueName": "orders"})
    for round_ in range(3):
        window = MetricsWindow(CONSUMER_METRICS, interval=None, opened_at=0)
        window.add({"received": round_, reason_key("expired"): round_ + 1})
        if round_ != 1:  # a window without batches has other metrics: another head
            window.sample(BatchSample(size=round_ + 1, handler_ms=1.5, oldest_age_ms=7))
        snapshot = window.take(0)
        fresh = EmfFormat("sqsbatch", {"QueueName": "orders"})
        assert kept.lines(snapshot, timestamp_ms=5) == fresh.lines(snapshot, timestamp_ms=5)
        for line in kept.lines(snapshot, timestamp_ms=now_ms()):
            check_line(line)
