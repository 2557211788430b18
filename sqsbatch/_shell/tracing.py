"""OpenTelemetry traces (the `sqsbatch[otel]` extra): the one module that touches OpenTelemetry.

The producers put the current trace context (W3C `traceparent`, `tracestate`) in a message's
`sqsbatch` attribute (`outgoing`). Each front end asks `start(batch)` for a batch's trace: one
span `process <queue>` (kind CONSUMER, OpenTelemetry's messaging conventions), linked to each
message's producer (from the `sqsbatch` attribute, else from SQS's `AWSTraceHeader`, X-Ray's
format) and current while the handler runs; the batch calls that settle it are its children
(`BatchTrace.calls`), and a handler that raised or timed out marks it as an error (`ended`).

Nothing here imports OpenTelemetry unless the application already did: without the extra, or
with it installed but never imported, `opentelemetry.trace` is not in `sys.modules`, and every
call is a look at that dict (an application that sets up the SDK has imported it). With the API
imported but no tracer provider set, a batch costs a look at the API's global (its private
`_TRACER_PROVIDER`, read with a fallback to `get_tracer_provider()`, which also reads the
environment, and costs more): the decision is made once per batch (`start`), and an untraced batch's
`OFF` does nothing at all.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from sqsbatch._core.flows import Flow, Request
from sqsbatch._core.ledger import Outcome
from sqsbatch._core.shapes import queue_name
from sqsbatch._core.trace_headers import xray_ids
from sqsbatch._version import __version__

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Link, Span, SpanContext, Tracer, TracerProvider

    from sqsbatch._core.message import Message, MessageBatch

__all__ = ["MAX_LINKS", "OFF", "BatchTrace", "outgoing", "start", "xray_ids"]

T = TypeVar("T")
log = logging.getLogger("sqsbatch")

MAX_LINKS = 128
"""Links per batch span at most (distinct producer spans; the SDK keeps 128 by default)."""
SYSTEM = "aws_sqs"
_API = "opentelemetry.trace"


def outgoing() -> tuple[str | None, str | None]:
    """(traceparent, tracestate) of the current span, for a message sent now; (None, None)
    when there is none (or OpenTelemetry was never imported)."""
    if _API not in sys.modules:
        return None, None
    from opentelemetry.trace.propagation.tracecontext import (  # noqa: PLC0415
        TraceContextTextMapPropagator,
    )

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier.get("traceparent"), carrier.get("tracestate") or None


class BatchTrace:
    """A batch's trace while it is handled and settled; this base class (`OFF`) does nothing."""

    __slots__ = ()

    def ended(self, outcome: Outcome, error: BaseException | None) -> None:
        """The handler is done: `RAISED` or `TIMED_OUT` marks the span as an error."""

    def calls(self, flow: Flow[T]) -> Flow[T]:
        """`flow` with a child span around each request it makes (settling the batch)."""
        return flow

    def end(self) -> None:
        """The batch is settled: the span ends and is no longer current."""
        try:
            self.leave()
        finally:
            self.finish()

    def finish(self) -> None:
        """The batch is settled: the span ends (from any thread; `leave` still to come)."""

    def leave(self) -> None:
        """The span is no longer current, on the thread (and context) that started it."""


OFF = BatchTrace()


def start(batch: MessageBatch) -> BatchTrace:
    """The trace of `batch`, its span current from now until `end()`; `OFF` unless an SDK's
    tracer provider is set (decided here, once per batch)."""
    api = sys.modules.get(_API)
    if api is None:
        return OFF
    try:
        tracer = _tracer(api)
        return OFF if tracer is None else _Traced(tracer, batch)
    except Exception:  # a bug of ours, or of the SDK: the batch goes on untraced
        log.exception("tracing a batch of %s failed; it goes on untraced", batch.queue)
        return OFF


_cached: tuple[TracerProvider, Tracer] | None = None
_by_environment: bool | None = None
"""Whether `OTEL_PYTHON_TRACER_PROVIDER` names a provider to load (read once)."""


def _tracer(api: Any) -> Tracer | None:
    """sqsbatch's tracer from the global provider; None while that is no real one."""
    global _cached, _by_environment  # noqa: PLW0603 - one tracer per provider, read once
    if _by_environment is None:
        _by_environment = api.OTEL_PYTHON_TRACER_PROVIDER in os.environ
    if getattr(api, "_TRACER_PROVIDER", api) is None and not _by_environment:
        return None  # none set: one lookup, where get_tracer_provider() reads the environment
    provider = api.get_tracer_provider()
    if isinstance(provider, api.ProxyTracerProvider | api.NoOpTracerProvider):
        return None
    cached = _cached
    if cached is None or cached[0] is not provider:
        cached = _cached = (provider, provider.get_tracer("sqsbatch", __version__))
    return cached[1]


class _Traced(BatchTrace):
    __slots__ = ("_queue", "_span", "_token", "_tracer")

    def __init__(self, tracer: Tracer, batch: MessageBatch) -> None:
        from opentelemetry import context, trace  # noqa: PLC0415

        self._tracer = tracer
        self._queue = batch.queue
        self._span: Span = tracer.start_span(
            f"process {batch.queue}",
            kind=trace.SpanKind.CONSUMER,
            links=_links(batch.messages),
            attributes={
                "messaging.system": SYSTEM,
                "messaging.destination.name": batch.queue,
                "messaging.operation.type": "process",
                "messaging.operation.name": "process",
                "messaging.batch.message_count": len(batch.messages),
            },
        )
        self._token = context.attach(trace.set_span_in_context(self._span))

    def ended(self, outcome: Outcome, error: BaseException | None) -> None:
        if outcome is Outcome.RETURNED:
            return
        from opentelemetry.trace import Status, StatusCode  # noqa: PLC0415

        if error is not None:
            kind, text = type(error).__qualname__, f"the handler raised {error!r}"
            self._span.record_exception(error)
        else:
            kind, text = "HandlerTimeout", "the handler ran past its handler_timeout"
            self._span.add_event("exception", {"exception.type": kind, "exception.message": text})
        self._span.set_attribute("error.type", kind)
        self._span.set_status(Status(StatusCode.ERROR, text))

    def calls(self, flow: Flow[T]) -> Flow[T]:
        if not self._span.is_recording():
            return flow
        return _traced_calls(flow, self._tracer, self._span)

    def finish(self) -> None:
        self._span.end()

    def leave(self) -> None:
        from opentelemetry import context  # noqa: PLC0415

        context.detach(self._token)


def _traced_calls(flow: Flow[T], tracer: Tracer, parent: Span) -> Flow[T]:
    """Drive `flow` for the door, each `Request` inside a child span of `parent`."""
    from opentelemetry import trace  # noqa: PLC0415

    within = trace.set_span_in_context(parent)
    try:
        step = next(flow)
        while True:
            if not isinstance(step, Request):  # a pause between rounds: no span
                step = flow.send((yield step))
                continue
            span = _call_span(tracer, step, within)
            try:
                answer = yield step
            except Exception as exc:  # the door's translated error, thrown in
                _failed(span, exc)
                span.end()
                step = flow.throw(exc)
                continue
            except BaseException:  # closed (the driver gave up): the span still ends
                span.end()
                raise
            span.end()
            step = flow.send(answer)
    except StopIteration as stop:
        result: T = stop.value
        return result


def _call_span(tracer: Tracer, request: Request, within: Context) -> Span:
    from opentelemetry import trace  # noqa: PLC0415

    action = "".join(word.capitalize() for word in request.op.split("_"))
    url = request.params.get("QueueUrl")
    queue = queue_name(url) if isinstance(url, str) else (request.queue or "")
    return tracer.start_span(
        f"{action} {queue}",
        context=within,
        kind=trace.SpanKind.CLIENT,
        attributes={
            "messaging.system": SYSTEM,
            "messaging.destination.name": queue,
            "messaging.operation.type": "settle",
            "messaging.operation.name": action,
            "messaging.batch.message_count": len(request.params.get("Entries", ())),
            "rpc.system": "aws-api",
            "rpc.service": "SQS",
            "rpc.method": action,
        },
    )


def _failed(span: Span, error: Exception) -> None:
    from opentelemetry.trace import Status, StatusCode  # noqa: PLC0415

    span.record_exception(error)
    span.set_attribute("error.type", type(error).__qualname__)
    span.set_status(Status(StatusCode.ERROR, str(error)))


def _links(messages: Sequence[Message]) -> list[Link]:
    """A link to each distinct producer span of `messages`, `MAX_LINKS` at most."""
    from opentelemetry.trace import Link  # noqa: PLC0415

    links: list[Link] = []
    linked: set[tuple[int, int]] = set()
    seen: set[tuple[str | None, str | None, str | None]] = {(None, None, None)}
    for message in messages:
        envelope, header = message._trace_headers()
        key = (envelope.traceparent, envelope.tracestate, header)
        if key in seen:  # no context, or one already looked at (a batch sent in one span)
            continue
        seen.add(key)
        producer = _producer(*key)
        if producer is None or (producer.trace_id, producer.span_id) in linked:
            continue
        linked.add((producer.trace_id, producer.span_id))
        links.append(Link(producer))
        if len(links) == MAX_LINKS:
            break
    return links


def _producer(
    traceparent: str | None, tracestate: str | None, trace_header: str | None
) -> SpanContext | None:
    """A message's producer span: from sqsbatch's attribute, else from `AWSTraceHeader`."""
    from opentelemetry import trace  # noqa: PLC0415
    from opentelemetry.trace.propagation.tracecontext import (  # noqa: PLC0415
        TraceContextTextMapPropagator,
    )

    if traceparent is not None:
        carrier = {"traceparent": traceparent}
        if tracestate is not None:
            carrier["tracestate"] = tracestate
        context = TraceContextTextMapPropagator().extract(carrier)
        found = trace.get_current_span(context).get_span_context()
        if found.is_valid:
            return found
    ids = xray_ids(trace_header) if trace_header is not None else None
    if ids is None:
        return None
    trace_id, span_id, sampled = ids
    flags = trace.TraceFlags(trace.TraceFlags.SAMPLED if sampled else trace.TraceFlags.DEFAULT)
    return trace.SpanContext(trace_id, span_id, is_remote=True, trace_flags=flags)
