"""Checks that a line is an Embedded Metric Format document CloudWatch would accept.

Two independent checks: the structure of the EMF specification (docs.aws.amazon.com,
CloudWatch_Embedded_Metric_Format_Specification), written out here, and aws-embedded-metrics'
own validators (AWS's library) for namespace, metric names, units, values and dimension sets.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from aws_embedded_metrics import validator
from aws_embedded_metrics.storage_resolution import StorageResolution

MAX_DOCUMENT_BYTES = 256 * 1024
MAX_METRICS = 100
MAX_VALUES = 100
MAX_DIMENSIONS = 30
UNITS = {
    "Seconds", "Microseconds", "Milliseconds", "Bytes", "Kilobytes", "Megabytes", "Gigabytes",
    "Terabytes", "Bits", "Kilobits", "Megabits", "Gigabits", "Terabits", "Percent", "Count",
    "Bytes/Second", "Kilobytes/Second", "Megabytes/Second", "Gigabytes/Second",
    "Terabytes/Second", "Bits/Second", "Kilobits/Second", "Megabits/Second", "Gigabits/Second",
    "Terabits/Second", "Count/Second", "None",
}  # fmt: skip


def check_line(line: str) -> dict[str, Any]:
    """The document on `line`, after every check; AssertionError (or the library's) if not."""
    assert len(line.encode()) <= MAX_DOCUMENT_BYTES, "over CloudWatch Logs' event size"
    document = json.loads(line)
    assert isinstance(document, dict), "an EMF document is a JSON object"
    meta = document["_aws"]
    assert set(meta) <= {"Timestamp", "CloudWatchMetrics"}, f"unknown members: {set(meta)}"
    timestamp = meta["Timestamp"]
    assert isinstance(timestamp, int) and not isinstance(timestamp, bool)
    validator.validate_timestamp(datetime.fromtimestamp(timestamp / 1000, UTC))
    directives = meta["CloudWatchMetrics"]
    assert isinstance(directives, list) and directives
    for directive in directives:
        _check_directive(document, directive)
    return document


def check_lines(text: str) -> list[dict[str, Any]]:
    """Every non-empty line of `text` as a checked EMF document."""
    return [check_line(line) for line in text.splitlines() if line.strip()]


def _check_directive(document: dict[str, Any], directive: dict[str, Any]) -> None:
    assert set(directive) == {"Namespace", "Dimensions", "Metrics"}, set(directive)
    validator.validate_namespace(directive["Namespace"])
    for dimension_set in directive["Dimensions"]:
        assert 1 <= len(dimension_set) <= MAX_DIMENSIONS
        values = {name: document[name] for name in dimension_set}  # each is a root member
        assert all(isinstance(value, str) for value in values.values())
        validator.validate_dimension_set(values)
    metrics = directive["Metrics"]
    assert 1 <= len(metrics) <= MAX_METRICS, f"{len(metrics)} metrics in one directive"
    for definition in metrics:
        assert set(definition) <= {"Name", "Unit", "StorageResolution"}, set(definition)
        name, unit = definition["Name"], definition.get("Unit", "None")
        assert unit in UNITS, unit
        value = document[name]  # the value is a root member
        for number in _numbers(value):
            validator.validate_metric(name, number, unit, StorageResolution.STANDARD, {})


def _numbers(value: Any) -> Iterable[float]:
    values = value if isinstance(value, list) else [value]
    assert 1 <= len(values) <= MAX_VALUES, f"{len(values)} values for one metric"
    for number in values:
        assert isinstance(number, int | float) and not isinstance(number, bool), number
        assert math.isfinite(number)
        yield number


def metric(documents: list[dict[str, Any]], name: str, **dimensions: str) -> list[float]:
    """Every value of `name` in `documents` whose dimension set is exactly `dimensions`."""
    found: list[float] = []
    for document in documents:
        for directive in document["_aws"]["CloudWatchMetrics"]:
            names = {m["Name"] for m in directive["Metrics"]}
            keys = [set(d) for d in directive["Dimensions"]]
            if name not in names or set(dimensions) not in keys:
                continue
            if all(document.get(k) == v for k, v in dimensions.items()):
                value = document[name]
                found += value if isinstance(value, list) else [value]
    return found


def now_ms() -> int:
    return int(time.time() * 1000)
