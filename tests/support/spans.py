"""OpenTelemetry's SDK for the trace tests: one in-memory exporter per test process.

The global tracer provider can be set once per process (pytest-xdist runs each worker in its
own), so it is set on first use and kept: later tests of the same worker run with tracing on,
which is what an application with the SDK does. Tests tell their spans apart by queue name and
trace id (`Spans`), and clear the exporter before and after.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

_EXPORTER: InMemorySpanExporter | None = None


def installed() -> InMemorySpanExporter:
    """The exporter of this process's global SDK tracer provider (set up on first call)."""
    global _EXPORTER  # noqa: PLW0603 - one provider per process: OpenTelemetry allows no other
    if _EXPORTER is None:
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        assert trace.get_tracer_provider() is provider, "another provider was set first"
        _EXPORTER = exporter
    return _EXPORTER


class Spans:
    """The finished spans of a test, found by name and by relation."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self._exporter = exporter

    def clear(self) -> None:
        self._exporter.clear()

    def all(self) -> Sequence[ReadableSpan]:
        return self._exporter.get_finished_spans()

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.all() if span.name == name]

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        """Spans whose parent is `parent`, in the order they ended."""
        assert parent.context is not None
        return [
            span
            for span in self.all()
            if span.parent is not None and span.parent.span_id == parent.context.span_id
        ]
