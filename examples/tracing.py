"""Traces across the queue with OpenTelemetry (`pip install 'sqsbatch[otel]'` and the SDK).

The application sets up the SDK once, as for any library OpenTelemetry instruments; sqsbatch
then puts the sender's trace context in each message, and handles each batch under a span
`process <queue>` linked to the spans that sent its messages.

    AWS_ENDPOINT_URL_SQS=http://127.0.0.1:4566 python examples/tracing.py orders

prints the spans as JSON (the SDK's console exporter; in production, an OTLP exporter to a
collector, or the ADOT Lambda layer).
"""

from __future__ import annotations

import sys

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from sqsbatch import Consumer, ConsumerConfig, MessageBatch, Producer, create_queue

tracer = trace.get_tracer("shop")


def set_up_tracing() -> TracerProvider:
    """Once, at start: the SDK and an exporter (here: the console)."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider


def checkout(producer: Producer, order: int) -> None:
    with tracer.start_as_current_span("checkout"):
        producer.send({"order": order})  # carries this span's context to the consumer


def ship(batch: MessageBatch) -> None:
    # Runs under the batch's span, "process orders", linked to each checkout span:
    # this span, and what this handler sends with a Producer, are its children.
    for message in batch.messages:
        with tracer.start_as_current_span("ship") as span:
            span.set_attribute("order", message.body["order"])


def run(queue: str) -> None:
    """Send two orders, each in its own trace, and handle them in one batch."""
    create_queue(queue)
    producer = Producer(queue)
    checkout(producer, 1)
    checkout(producer, 2)
    config = ConsumerConfig.load(queue, max_batch_timeout=0.5)
    Consumer(queue, ship, config).run_until_idle(idle_seconds=1)


def main(queue: str) -> None:
    provider = set_up_tracing()
    run(queue)
    provider.shutdown()  # exports what is left before the process ends


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "orders")
