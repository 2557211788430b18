"""SQS requests per message, counted at botocore's HTTP layer: consuming, and redriving.

    .venv/bin/python bench/api_cost.py [--messages 1000] [--backoff-messages 200]
        [--base-delay 15]

On an embedded local SQS (moto, `LocalSqs`, with sqsbatch's moto speed-up: it changes wall time,
not requests), every HTTP request botocore sends is counted, retries included: that is the bill.
1. Consume: `--messages` messages to a fresh queue, consumed by the sync `Consumer` (every
   handler returns: all acked) at `max_batch_size` 10 and 100. Production and start-up calls
   (GetQueueUrl, GetQueueAttributes) are reported apart from the consume loop's.
2. Redrive, a drain: `--messages` dead-lettered messages, all due, moved by one `run_once()`.
3. Redrive with a backoff: `--backoff-messages` messages dead-lettered just now; a first pass
   hides them until due (base delay `--base-delay` s), a second pass after that moves them.
The redrive's requests are the daemon's own count (`Redriver.requests_by_operation`); filling
the DLQ is not counted. `--messages 0` or `--backoff-messages 0` leaves that part out.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from typing import Any

from redrive import BackoffPolicy, Redriver
from sqsbatch import Consumer, ConsumerConfig, MessageBatch, Producer, create_queue
from sqsbatch._core.envelope import Envelope, ErrorInfo
from sqsbatch.dev.server import LocalSqs


def counted(server: LocalSqs) -> tuple[Any, Counter[str]]:
    client = server.client()
    requests: Counter[str] = Counter()

    def count(**kwargs: Any) -> None:
        requests[kwargs["event_name"].rsplit(".", 1)[-1]] += 1

    client.meta.events.register("before-send.sqs", count)
    return client, requests


def consume(server: LocalSqs, messages: int, batch_size: int) -> None:
    name = f"bench-{batch_size}-{time.monotonic_ns()}"
    producer_client, _ = counted(server)
    create_queue(name, client=producer_client)
    producer = Producer(name, client=producer_client)
    for start in range(0, messages, 100):
        producer.send_batch([{"body": i} for i in range(start, min(messages, start + 100))])
    client, requests = counted(server)
    seen = 0

    def handler(batch: MessageBatch) -> None:
        nonlocal seen
        seen += len(batch)

    config = ConsumerConfig(max_batch_size=batch_size, max_batch_timeout=1)
    started = time.monotonic()
    Consumer(name, handler, config, client=client).run_until_idle(1)
    elapsed = time.monotonic() - started
    setup = requests["GetQueueUrl"] + requests["GetQueueAttributes"]
    loop = sum(requests.values()) - setup
    print(
        f"consume, max_batch_size={batch_size:>3}: {seen} consumed, {loop} requests in the "
        f"loop = {loop / seen:.3f}/message ({(loop + setup) / seen:.3f} with start-up); "
        f"{dict(requests)}; {elapsed:.1f} s"
    )


def dead_letter(client: Any, source: str, dlq: str, count: int, *, failed_at: float) -> None:
    """Put `count` messages in `dlq` as the sqsbatch consumer dead-letters them."""
    url = client.get_queue_url(QueueName=dlq)["QueueUrl"]
    for start in range(0, count, 10):
        entries = []
        for n in range(start, min(start + 10, count)):
            envelope = Envelope(
                id=f"m-{n}",
                timestamp=failed_at - 60,
                source_queue=source,
                error=ErrorInfo("RuntimeError", "downstream failed", failed_at),
            )
            attributes = {"sqsbatch": envelope.to_attribute()}
            body = json.dumps({"n": n})
            entries.append(
                {"Id": str(n - start), "MessageBody": body, "MessageAttributes": attributes}
            )
        client.send_message_batch(QueueUrl=url, Entries=entries)


def report(title: str, redriver: Redriver, moved: int, seconds: float) -> None:
    calls = redriver.requests_by_operation
    total = sum(calls.values())
    print(f"\nredrive, {title}: {moved} moved in {seconds:.1f} s (moto; not a latency figure)")
    for op, count in sorted(calls.items()):
        print(f"  {op:36} {count:6}   {count / max(moved, 1):.3f} per message")
    print(f"  {'total':36} {total:6}   {total / max(moved, 1):.3f} per message")


def redrive_drain(server: LocalSqs, count: int) -> None:
    client = server.client()
    create_queue("bench-src", dead_letter_queue="bench-dlq", client=client)
    dead_letter(client, "bench-src", "bench-dlq", count, failed_at=time.time() - 7200)
    redriver = Redriver("bench-dlq", client=server.client())  # default policy: all due
    started = time.perf_counter()
    stats = redriver.run_once()
    report(f"a drain of {count} due messages", redriver, stats.moved, time.perf_counter() - started)


def redrive_backoff(server: LocalSqs, count: int, base_delay: float) -> None:
    client = server.client()
    create_queue("bench-b-src", dead_letter_queue="bench-b-dlq", client=client)
    failed_at = time.time()
    dead_letter(client, "bench-b-src", "bench-b-dlq", count, failed_at=failed_at)
    policy = BackoffPolicy(base_delay=base_delay, jitter=0)
    redriver = Redriver("bench-b-dlq", policy=policy, client=server.client())
    started = time.perf_counter()
    first = redriver.run_once()
    time.sleep(max(0.0, failed_at + base_delay + 1 - time.time()))  # until they are due
    second = redriver.run_once()
    print(f"\n(first pass: {first.delayed} hidden, {first.moved} moved)")
    moved = first.moved + second.moved
    title = f"{count} messages hidden once, then moved"
    report(title, redriver, moved, time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000, help="consumed; redriven")
    parser.add_argument("--backoff-messages", type=int, default=200, help="redriven late")
    parser.add_argument("--base-delay", type=float, default=15.0, help="the backoff's (s)")
    args = parser.parse_args()
    if min(args.messages, args.backoff_messages) < 0 or args.base_delay < 0:
        parser.error("--messages, --backoff-messages and --base-delay take 0 or more")
    with LocalSqs() as server:
        if args.messages:
            for size in (10, 100):
                consume(server, args.messages, size)
            redrive_drain(server, args.messages)
        if args.backoff_messages:
            redrive_backoff(server, args.backoff_messages, args.base_delay)


if __name__ == "__main__":
    main()
