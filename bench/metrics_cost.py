"""What `metrics = "emf"` costs: CPU and log bytes per batch, measured side by side.

    .venv/bin/python bench/metrics_cost.py [--invocations 2000] [--records 10] [--rounds 5]

Lambda: the same adapter code twice, metrics off and `emf`, invoked alternately on the same
`--records`-record event (all acked, so neither makes an SQS call after its warm-up), CPU of
each invocation by `time.process_time()`; the difference is what the metric line costs per
batch. The lines go to a counting sink instead of stdout, so the bytes are counted too.

Pollers: they write once per `metrics_interval`, not per batch. Measured on `EmfMetrics` itself
(what the poller calls): the CPU of adding one batch's counts and sample, and of one flush
after N batches in an interval, for N = 1, 60, 600 and 6,000 batches a minute, with the bytes
that flush writes.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _local import command, local_sqs
from lambda_cpu import QUEUE, SERVER_LIFETIME_SECONDS, Context, client, make_record

from sqsbatch import ConsumerConfig, MessageBatch, lambda_handler
from sqsbatch._core.metrics import BatchSample
from sqsbatch._shell.emf_writer import EmfMetrics
from sqsbatch.lambda_adapter import LambdaAdapter


class Sink:
    """Where the metric lines go: counted, not kept."""

    def __init__(self) -> None:
        self.bytes = 0
        self.lines = 0

    def write(self, text: str) -> int:
        self.bytes += len(text.encode())
        self.lines += text.count("\n")
        return len(text)

    def flush(self) -> None:
        pass


def adapter(sqs: Any, metrics: str) -> LambdaAdapter:
    @lambda_handler(config=ConsumerConfig(metrics=metrics), client=sqs)  # type: ignore[arg-type]
    def handler(batch: MessageBatch) -> None:
        for message in batch.messages:
            json.loads(message.body) if isinstance(message.body, str) else message.body

    return handler


def lambda_cost(sqs: Any, args: argparse.Namespace) -> None:
    sent_ms = int(time.time() * 1000) - 2000
    records = [make_record(n, bodies="foreign", sent_ms=sent_ms) for n in range(args.records)]
    text = json.dumps({"Records": records})
    functions = {"off": adapter(sqs, "off"), "emf": adapter(sqs, "emf")}
    sink = Sink()
    real_stdout = sys.stdout
    cpu: dict[str, list[float]] = {name: [] for name in functions}
    sys.stdout = sink
    try:
        for function in functions.values():
            function(json.loads(text), Context())  # warm-up: the RedrivePolicy lookup
        sink.bytes = sink.lines = 0
        gc.collect()
        for _ in range(args.invocations):
            for name, function in functions.items():
                event = json.loads(text)
                started = time.process_time()
                function(event, Context())
                cpu[name].append(time.process_time() - started)
    finally:
        sys.stdout = real_stdout
    off, emf = (statistics.median(cpu[name]) * 1e6 for name in ("off", "emf"))
    print(f"\nLambda, {args.records} records per event, {args.invocations} invocations each:")
    print(f"  CPU per invocation, median: off {off:.1f} us, emf {emf:.1f} us")
    print(f"  metrics cost per batch: {emf - off:+.1f} us CPU ({(emf - off) / off:+.1%})")
    print(f"  log bytes per batch: {sink.bytes / args.invocations:.0f} ({sink.lines} lines)")


def poller_cost(args: argparse.Namespace) -> None:
    print("\nPollers (EmfMetrics as the poller calls it), one interval:")
    counts = {"received": 10}
    settled = {"batches": 1, "acked": 10, "retried": 0, "dead_lettered": 0}
    for batches in (1, 60, 600, 6000):
        adds: list[float] = []
        flushes: list[float] = []
        sink = Sink()
        for _ in range(args.rounds):
            metrics = EmfMetrics("orders", interval=60.0, out=sink)  # type: ignore[arg-type]
            sink.bytes = sink.lines = 0
            started = time.process_time()
            for n in range(batches):
                metrics.add(counts)
                metrics.add(settled)
                metrics.sample(BatchSample(10, 12.345 + n % 7, 1500.0 + n))
            adds.append((time.process_time() - started) / batches)
            started = time.process_time()
            metrics.flush()
            flushes.append(time.process_time() - started)
        print(
            f"  {batches:>5} batches/interval: {statistics.median(adds) * 1e6:.1f} us per batch"
            f" to count, {statistics.median(flushes) * 1e3:.2f} ms per flush,"
            f" {sink.bytes} bytes in {sink.lines} lines"
            f" ({sink.bytes / batches:.0f} bytes per batch)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--invocations", type=int, default=2000)
    parser.add_argument("--records", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with local_sqs(SERVER_LIFETIME_SECONDS) as info:
        sqs = client(info.endpoint)
        sqs.create_queue(QueueName=QUEUE)
        print(info.versions("sqsbatch", "boto3", "moto"))
        lambda_cost(sqs, args)
    poller_cost(args)
    print(f"\ncommand: {command()}")


if __name__ == "__main__":
    main()
