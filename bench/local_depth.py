"""The embedded local SQS by queue depth: a receive of 10 with moto as is and with the speed-up.

Wall time of one ReceiveMessage of 10 (and of one SendMessageBatch of 10) on `LocalSqs`, by
queue depth, with moto as it is and with sqsbatch's moto speed-up (sqsbatch/dev/moto_speedup.py).

    .venv/bin/python bench/local_depth.py [--depths 100 1000 10000] [--repeat 5]

One `LocalSqs` in this process. For each depth a fresh queue is filled with SendMessageBatch
(with the speed-up: moto alone fills a queue in quadratic time), then the same queue is measured
both ways: `moto_speedup.revert()` puts moto's own members back, `apply()` the speed-up again.
Each receive takes 10 messages in flight (visibility 1 h): they stay in moto's queue, so the depth
it scans is unchanged. Times are medians of `--repeat` calls (moto alone: fewer at large depths,
at least 2), HTTP round trip on 127.0.0.1 included. A benchmark, not a test: nothing is asserted
but that each receive returns 10 messages.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from sqsbatch.dev import moto_speedup
from sqsbatch.dev.server import LocalSqs

WITHOUT, WITH = "moto as is", "with speed-up"


def fill(client: Any, url: str, depth: int) -> None:
    for start in range(0, depth, 10):
        entries = [{"Id": str(n), "MessageBody": f"m-{start + n}"} for n in range(10)]
        client.send_message_batch(QueueUrl=url, Entries=entries[: depth - start])


def median_ms(call: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def measure(client: Any, url: str, repeat: int) -> dict[str, float]:
    def receive() -> None:
        got = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=3600)
        if len(got.get("Messages", [])) != 10:
            raise SystemExit(f"a receive returned {len(got.get('Messages', []))} messages, not 10")

    def send() -> None:
        entries = [{"Id": str(n), "MessageBody": "extra"} for n in range(10)]
        client.send_message_batch(QueueUrl=url, Entries=entries)

    return {"receive": median_ms(receive, repeat), "send": median_ms(send, repeat)}


def run(server: LocalSqs, depth: int, repeat: int) -> dict[str, dict[str, float]]:
    client = server.client()
    url = client.create_queue(QueueName=f"depth-{depth}-{time.monotonic_ns()}")["QueueUrl"]
    fill(client, url, depth)
    moto_speedup.revert()
    try:
        without = measure(client, url, min(repeat, max(2, 20_000 // depth)))
    finally:
        if not moto_speedup.apply():
            raise SystemExit("the speed-up does not fit this moto: nothing to compare")
    return {WITHOUT: without, WITH: measure(client, url, repeat)}


def table(results: dict[int, dict[str, dict[str, float]]]) -> list[str]:
    lines = [
        f"| depth | receive 10: {WITHOUT} | {WITH} | send 10: {WITHOUT} | {WITH} |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for depth, by_mode in results.items():
        cells = [
            f"{by_mode[mode][call]:,.0f} ms" for call in ("receive", "send") for mode in by_mode
        ]
        lines.append(f"| {depth:,} | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", type=int, nargs="+", default=[100, 1000, 10_000])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    started = time.monotonic()
    with LocalSqs() as server:
        results = {depth: run(server, depth, args.repeat) for depth in args.depths}
    print(f"$ .venv/bin/python bench/local_depth.py {' '.join(sys.argv[1:])}".rstrip())
    print(
        f"moto {importlib.metadata.version('moto')}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs; whole run {time.monotonic() - started:.0f} s"
    )
    print("\n".join(table(results)))


if __name__ == "__main__":
    main()
