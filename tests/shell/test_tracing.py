"""OpenTelemetry traces (`sqsbatch[otel]`) on every front end, with the SDK's in-memory exporter.

A message sent inside a span is handled under one `process <queue>` span linked to it; the
handler's own spans and sends are its children, the batch calls that settle it too, and a
handler that raises or times out marks it as an error.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from redrive import BackoffPolicy, Redriver
from sqsbatch import (
    AsyncProducer,
    ConsumerConfig,
    Message,
    MessageBatch,
    Producer,
    create_queue,
    lambda_handler,
)
from sqsbatch._core.envelope import Envelope, decode
from sqsbatch._core.flows import Flow, Pause, Request
from sqsbatch._core.ledger import Ledger
from sqsbatch._shell.tracing import MAX_LINKS, start
from sqsbatch.errors import SqsError
from tests.support.front_ends import (
    FRONT_ENDS,
    EventSourceMapping,
    FrontEnd,
    aio_client,
    run_async,
)
from tests.support.spans import Spans
from tests.support.sqs_helpers import drain

TRACER = trace.get_tracer("tests")
QUICK = ConsumerConfig(max_batch_timeout=0.2)
XRAY = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
each_front_end = pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)


def the_batch_span(spans: Spans, queue: str) -> ReadableSpan:
    [span] = spans.named(f"process {queue}")
    return span


def sent_inside_a_span(sqs: Any, queue: str, body: object) -> trace.SpanContext:
    with TRACER.start_as_current_span("checkout") as sender:
        Producer(queue, client=sqs).send(body)
    return sender.get_span_context()


def envelope_of(raw: dict[str, Any]) -> Envelope:
    return decode(raw).envelope


def ids(context: trace.SpanContext) -> tuple[int, int]:
    """A span's identity, wherever it is read (a link's context is remote, the span's not)."""
    return context.trace_id, context.span_id


def traceparent(context: trace.SpanContext) -> str:
    """W3C's `traceparent` header of a span."""
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


@each_front_end
def test_a_message_sent_in_a_span_is_handled_under_a_batch_span_linked_to_it(
    front_end: FrontEnd, sqs: Any, name: str, spans: Spans
) -> None:
    # Given a message sent inside a span
    create_queue(name, client=sqs)
    sender = sent_inside_a_span(sqs, name, {"order": 1})
    current: list[trace.SpanContext] = []

    def handler(batch: MessageBatch) -> None:
        current.append(trace.get_current_span().get_span_context())
        with TRACER.start_as_current_span("handle"):
            pass

    # When a front end handles it
    front_end.consume(name, handler, QUICK, sqs)

    # Then one batch span, by the messaging conventions, linked to the sender's span
    batch = the_batch_span(spans, name)
    assert batch.kind is SpanKind.CONSUMER
    assert dict(batch.attributes or {}) == {
        "messaging.system": "aws_sqs",
        "messaging.destination.name": name,
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.batch.message_count": 1,
    }
    assert [ids(link.context) for link in batch.links] == [ids(sender)]
    assert batch.status.status_code is StatusCode.UNSET
    # and current while the handler ran: the handler's own span is its child
    assert batch.context is not None
    assert current == [batch.context]
    [handle] = spans.named("handle")
    assert handle.parent is not None and handle.parent.span_id == batch.context.span_id
    assert handle.context is not None and handle.context.trace_id == batch.context.trace_id


@each_front_end
def test_a_failed_batch_is_an_error_and_its_settle_calls_are_child_spans(
    front_end: FrontEnd, sqs: Any, name: str, spans: Spans
) -> None:
    # Given a message whose only delivery fails, on a queue with a dead-letter queue
    dlq = f"{name}-dlq"
    create_queue(name, dead_letter_queue=dlq, max_retries=0, client=sqs)
    sender = sent_inside_a_span(sqs, name, "poison")

    def handler(batch: MessageBatch) -> None:
        raise ValueError("cannot parse")

    # When a front end handles it
    config = ConsumerConfig(max_batch_timeout=0.2, max_retries=0, dead_letter_queue=dlq)
    front_end.consume(name, handler, config, sqs)

    # Then the batch span says it failed, and why
    batch = the_batch_span(spans, name)
    assert batch.status.status_code is StatusCode.ERROR
    assert (batch.attributes or {})["error.type"] == "ValueError"
    [event] = [e for e in batch.events if e.name == "exception"]
    assert (event.attributes or {})["exception.type"] == "ValueError"
    assert (event.attributes or {})["exception.message"] == "cannot parse"
    # and the dead-letter copy is a settle call under it (the pollers delete too; Lambda
    # deletes what it is not told about itself)
    calls = {span.name: span for span in spans.children(batch)}
    expected = {f"SendMessageBatch {dlq}"}
    if not front_end.name.startswith("lambda"):
        expected.add(f"DeleteMessageBatch {name}")
    assert set(calls) == expected
    send = calls[f"SendMessageBatch {dlq}"]
    assert send.kind is SpanKind.CLIENT
    assert dict(send.attributes or {}) == {
        "messaging.system": "aws_sqs",
        "messaging.destination.name": dlq,
        "messaging.operation.type": "settle",
        "messaging.operation.name": "SendMessageBatch",
        "messaging.batch.message_count": 1,
        "rpc.system": "aws-api",
        "rpc.service": "SQS",
        "rpc.method": "SendMessageBatch",
    }
    # and the copy keeps its producer's trace context
    [copy] = drain(sqs, dlq)
    assert envelope_of(copy).traceparent == traceparent(sender)


@each_front_end
def test_a_producer_that_x_ray_traced_is_linked_from_aws_trace_header(
    front_end: FrontEnd, sqs: Any, name: str, spans: Spans
) -> None:
    # Given a message from a foreign producer that X-Ray traced (SQS's AWSTraceHeader)
    url = create_queue(name, client=sqs)
    sqs.send_message(
        QueueUrl=url,
        MessageBody="from elsewhere",
        MessageSystemAttributes={"AWSTraceHeader": {"DataType": "String", "StringValue": XRAY}},
    )

    # When a front end handles it
    front_end.consume(name, lambda batch: None, QUICK, sqs)

    # Then the batch span links to the X-Ray trace and segment, as W3C ids
    [link] = the_batch_span(spans, name).links
    assert link.context.trace_id == 0x5759E988BD862E3FE1BE46A994272793
    assert link.context.span_id == 0x53995C3F42CD8AD8
    assert link.context.trace_flags.sampled


@each_front_end
def test_what_the_handler_sends_is_a_child_of_the_batch_span(
    front_end: FrontEnd, sqs: Any, name: str, spans: Spans
) -> None:
    # Given a handler that sends on to another queue with sqsbatch's Producer
    create_queue(name, client=sqs)
    create_queue(f"{name}-out", client=sqs)
    Producer(name, client=sqs).send("in")
    onward = Producer(f"{name}-out", client=sqs)

    def handler(batch: MessageBatch) -> None:
        onward.send("out")

    # When a front end handles the message
    front_end.consume(name, handler, QUICK, sqs)

    # Then the message sent carries the batch span's context
    batch = the_batch_span(spans, name)
    assert batch.context is not None
    [sent] = drain(sqs, f"{name}-out")
    assert envelope_of(sent).traceparent == traceparent(batch.context)


def run_slow_handler(front_end: str, queue: str, sqs: Any, config: ConsumerConfig) -> None:
    """A handler that sleeps 1 s, on `front_end`: a sync one on its thread (which runs on,
    unwaited), an `async def` one that the front end cancels."""
    if front_end in ("sync", "lambda"):
        [runner] = [f for f in FRONT_ENDS if f.name == front_end]
        runner.consume(queue, lambda batch: time.sleep(1.0), config, sqs, idle_seconds=0.5)
        return

    async def handler(batch: MessageBatch) -> None:
        await asyncio.sleep(1.0)

    if front_end == "async":
        run_async(queue, handler, config, sqs, idle_seconds=0.5)
        return
    function = lambda_handler(config=config, client=sqs)(handler)
    try:
        mapping = EventSourceMapping(sqs, queue, window=config.max_batch_timeout)
        mapping.run_until_idle(function, idle_seconds=0.5)
    finally:
        function.close()


@pytest.mark.parametrize("front_end", [f.name for f in FRONT_ENDS])
def test_a_handler_past_its_timeout_is_an_error(
    front_end: str, sqs: Any, name: str, spans: Spans
) -> None:
    # Given a handler slower than its handler_timeout
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send("slow")

    # When a front end handles the message
    config = ConsumerConfig(max_batch_timeout=0.2, handler_timeout=0.3, max_retries=0)
    run_slow_handler(front_end, name, sqs, config)

    # Then its batch span is an error that says so
    batch = the_batch_span(spans, name)
    assert batch.status.status_code is StatusCode.ERROR
    assert (batch.attributes or {})["error.type"] == "HandlerTimeout"
    assert [e.name for e in batch.events] == ["exception"]


def test_the_async_producer_sends_the_current_trace_context(
    sqs: Any, name: str, spans: Spans
) -> None:
    # Given an AsyncProducer used inside a span
    create_queue(name, client=sqs)

    async def send() -> trace.SpanContext:
        async with aio_client(sqs) as client:
            with TRACER.start_as_current_span("checkout") as sender:
                await AsyncProducer(name, client=client).send("hello")
        return sender.get_span_context()

    sender = asyncio.run(send())

    # Then the message carries that span's context
    [message] = drain(sqs, name)
    assert envelope_of(message).traceparent == traceparent(sender)


def test_a_trace_state_travels_with_the_message_and_into_the_link(
    sqs: Any, name: str, spans: Spans
) -> None:
    # Given a span whose trace carries vendor state (W3C tracestate)
    create_queue(name, client=sqs)
    upstream = trace.SpanContext(
        0x0AF7651916CD43DD8448EB211C80319C,
        0xB7AD6B7169203331,
        is_remote=True,
        trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
        trace_state=trace.TraceState([("vendor", "opaque")]),
    )
    with trace.use_span(trace.NonRecordingSpan(upstream)):
        sender = sent_inside_a_span(sqs, name, "hello")

    # When it is consumed
    FRONT_ENDS[0].consume(name, lambda batch: None, QUICK, sqs)

    # Then the state went in the envelope and came out in the link
    [link] = the_batch_span(spans, name).links
    assert ids(link.context) == ids(sender)
    assert link.context.trace_state == trace.TraceState([("vendor", "opaque")])


def test_the_redrive_daemon_keeps_the_trace_context_of_what_it_moves(
    sqs: Any, name: str, spans: Spans
) -> None:
    # Given a message sent in a span, dead-lettered by its consumer
    dlq = f"{name}-dlq"
    create_queue(name, dead_letter_queue=dlq, max_retries=0, client=sqs)
    sender = sent_inside_a_span(sqs, name, "again")
    config = ConsumerConfig(max_batch_timeout=0.2, max_retries=0, dead_letter_queue=dlq)

    def fail(batch: MessageBatch) -> None:
        raise RuntimeError("down")

    FRONT_ENDS[0].consume(name, fail, config, sqs)
    spans.clear()

    # When the redrive daemon moves it back and it is consumed again
    moved = Redriver(dlq, policy=BackoffPolicy(base_delay=0, jitter=0), client=sqs)
    assert moved.run_once(wait_seconds=0).moved == 1
    FRONT_ENDS[0].consume(name, lambda batch: None, config, sqs)

    # Then the new batch span still links to the original sender
    assert [ids(link.context) for link in the_batch_span(spans, name).links] == [ids(sender)]


def test_links_are_distinct_producers_and_capped(spans: Spans) -> None:
    # Given a batch of 300 messages from 200 producer spans (the first 100 sent two each)
    producers = [f"00-{i + 1:032x}-{i + 1:016x}-01" for i in range(200)]
    envelopes = [Envelope(traceparent=tp) for tp in producers[:100] * 2 + producers[100:]]
    deliveries: list[Any] = [FakeDelivery(envelope) for envelope in envelopes]
    batch = MessageBatch("q", deliveries)

    # When its trace starts
    trace_of = start(batch)
    trace_of.end()

    # Then it links to each producer once, the first MAX_LINKS of them
    [span] = spans.named("process q")
    assert [link.context.span_id for link in span.links] == list(range(1, MAX_LINKS + 1))


class FakeDelivery:
    """Just what a batch's trace reads of a delivery."""

    def __init__(self, envelope: Envelope) -> None:
        self.envelope = envelope

    def trace_headers(self) -> tuple[Envelope, str | None]:
        return self.envelope, None

    def message(self, ledger: Ledger, index: int) -> Message:
        return Message(self, ledger, index)  # type: ignore[arg-type]  # duck-typed delivery


def test_a_failed_settle_call_is_an_error_span_and_the_flow_sees_the_error(spans: Spans) -> None:
    # Given a batch's trace, and a flow that makes two calls (with a pause) and the first fails
    batch = MessageBatch("q", [])
    traced = start(batch)
    seen: list[object] = []

    def flow() -> Flow[str]:
        try:
            yield Request("delete_message_batch", {"QueueUrl": "http://h/1/q", "Entries": [{}]})
        except SqsError as exc:
            seen.append(exc)
        yield Pause(0.0)
        seen.append(
            (yield Request("change_message_visibility_batch", {"QueueUrl": "http://h/1/q"}))
        )
        return "done"

    # When the door drives it (here by hand) with the trace's calls
    wrapped = traced.calls(flow())
    assert isinstance(next(wrapped), Request)
    assert isinstance(wrapped.throw(SqsError("throttled")), Pause)
    assert isinstance(wrapped.send(None), Request)
    with pytest.raises(StopIteration) as stop:
        wrapped.send({"Successful": []})
    traced.end()

    # Then the flow got the error and the answer, and concluded as ever
    assert stop.value.value == "done"
    assert isinstance(seen[0], SqsError) and seen[1] == {"Successful": []}
    # and each call was a child span; the failed one an error
    batch_span = the_batch_span(spans, "q")
    failed, ok = spans.children(batch_span)
    assert (failed.name, failed.status.status_code) == ("DeleteMessageBatch q", StatusCode.ERROR)
    assert (ok.name, ok.status.status_code) == ("ChangeMessageVisibilityBatch q", StatusCode.UNSET)
