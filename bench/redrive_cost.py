"""What redriving costs in SQS API calls per message moved, measured on a local moto server.

    .venv/bin/python bench/redrive_cost.py [--messages 1000] [--backoff-messages 200]

1. Drain: `--messages` dead-lettered messages, all due, drained by one `run_once()`.
2. Backoff: `--backoff-messages` messages dead-lettered just now; a first pass hides them until
   due (base delay `--base-delay` s), a second pass after that moves them.

Requests are counted by the daemon itself (`Redriver.requests_by_operation`); filling the DLQ
is not counted. The wall time says little about real SQS (LocalSqs patches moto so that its
receive no longer rescans the queue per message: sqsbatch/moto_speedup.py). The request counts
do not depend on moto's speed.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from redrive import BackoffPolicy, Redriver
from sqsbatch import create_queue
from sqsbatch.envelope import Envelope, ErrorInfo
from sqsbatch.local import LocalSqs


def fill(client: Any, source: str, dlq: str, count: int, *, failed_at: float) -> None:
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
            entries.append(
                {
                    "Id": str(n - start),
                    "MessageBody": json.dumps({"n": n}),
                    "MessageAttributes": attributes,
                }
            )
        client.send_message_batch(QueueUrl=url, Entries=entries)


def report(title: str, redriver: Redriver, moved: int, seconds: float) -> None:
    calls = redriver.requests_by_operation
    total = sum(calls.values())
    print(f"\n{title}: {moved} moved in {seconds:.1f} s (moto; not a latency figure)")
    for op, count in sorted(calls.items()):
        print(f"  {op:36} {count:6}   {count / max(moved, 1):.3f} per message")
    print(f"  {'total':36} {total:6}   {total / max(moved, 1):.3f} per message")


def drain(server: LocalSqs, count: int) -> None:
    client = server.client()
    create_queue("bench-src", dead_letter_queue="bench-dlq", client=client)
    fill(client, "bench-src", "bench-dlq", count, failed_at=time.time() - 7200)
    redriver = Redriver("bench-dlq", client=server.client())  # default policy: all due
    started = time.perf_counter()
    stats = redriver.run_once()
    report(f"drain of {count} due messages", redriver, stats.moved, time.perf_counter() - started)


def with_backoff(server: LocalSqs, count: int, base_delay: float) -> None:
    client = server.client()
    create_queue("bench-b-src", dead_letter_queue="bench-b-dlq", client=client)
    failed_at = time.time()
    fill(client, "bench-b-src", "bench-b-dlq", count, failed_at=failed_at)
    policy = BackoffPolicy(base_delay=base_delay, jitter=0)
    redriver = Redriver("bench-b-dlq", policy=policy, client=server.client())
    started = time.perf_counter()
    first = redriver.run_once()
    time.sleep(max(0.0, failed_at + base_delay + 1 - time.time()))
    second = redriver.run_once()
    print(f"\n(first pass: {first.delayed} hidden, {first.moved} moved)")
    moved = first.moved + second.moved
    report(
        f"{count} messages hidden once, then moved", redriver, moved, time.perf_counter() - started
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--backoff-messages", type=int, default=200)
    parser.add_argument("--base-delay", type=float, default=15.0)
    args = parser.parse_args()
    with LocalSqs() as server:
        drain(server, args.messages)
        if args.backoff_messages:
            with_backoff(server, args.backoff_messages, args.base_delay)


if __name__ == "__main__":
    main()
