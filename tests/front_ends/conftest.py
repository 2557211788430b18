"""Fixtures the front-end tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.spans import Spans, installed


@pytest.fixture
def spans() -> Iterator[Spans]:
    """The spans recorded while the test runs (OpenTelemetry's SDK, in memory)."""
    exporter = installed()
    exporter.clear()
    yield Spans(exporter)
    exporter.clear()
