"""SQS requests per consumed message on the happy path, counted at botocore's HTTP layer.

    .venv/bin/python bench/api_cost.py [--messages 1000]

Sends N messages to a fresh queue on an embedded moto server, consumes them with the sync
Consumer (every handler returns: all acked) at max_batch_size 10 and 100, and counts every HTTP
request botocore sends (retries included: that is the bill). Production and startup calls
(GetQueueUrl, GetQueueAttributes) are reported apart from the consume loop's. LocalSqs applies
sqsbatch's moto speed-up patch (sqsbatch/moto_speedup.py): it changes wall time, not requests.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from typing import Any

from sqsbatch import Consumer, ConsumerConfig, MessageBatch, Producer, create_queue
from sqsbatch.local import LocalSqs


def counted(server: LocalSqs) -> tuple[Any, Counter[str]]:
    client = server.client()
    requests: Counter[str] = Counter()

    def count(**kwargs: Any) -> None:
        requests[kwargs["event_name"].rsplit(".", 1)[-1]] += 1

    client.meta.events.register("before-send.sqs", count)
    return client, requests


def run(server: LocalSqs, messages: int, batch_size: int) -> dict[str, Any]:
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
    return {
        "max_batch_size": batch_size,
        "consumed": seen,
        "requests": dict(requests),
        "loop_requests": loop,
        "per_message": loop / seen,
        "per_message_with_startup": (loop + setup) / seen,
        "seconds": round(elapsed, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000)
    args = parser.parse_args()
    with LocalSqs() as server:
        for size in (10, 100):
            result = run(server, args.messages, size)
            print(
                f"max_batch_size={size:>3}: {result['consumed']} consumed, "
                f"{result['loop_requests']} requests in the loop = "
                f"{result['per_message']:.3f}/message "
                f"({result['per_message_with_startup']:.3f} with startup); "
                f"{result['requests']}; {result['seconds']} s"
            )


if __name__ == "__main__":
    main()
