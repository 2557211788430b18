"""Consumers behind a slow network: messages/s and SQS requests per message, through a proxy that
adds a fixed delay to every request.

    .venv/bin/python bench/latency.py [--server moto|lean] [--delay-ms 20] [--messages 2000]
        [--concurrency 1 4 16 64] [--rounds 1]

Three processes: this one (the consumers), a local SQS and a TCP proxy on 127.0.0.1 in front of
it (asyncio). The local SQS (`--server`, printed in the header):
- moto (the default): moto's server, `sqsbatch.local.LocalSqs` with sqsbatch's moto speed-up, as
  `LocalSqs.start()` applies it. It spends 0.7-1.3 ms of CPU per message drained, so on a 2-CPU
  machine it, not the client, is the bottleneck: even the parallel hand loop tops out near
  1,000 msg/s. (Its werkzeug server also closes the connection after every answer.)
- lean: bench/_lean_sqs.py, a bench-only in-memory SQS (botocore's JSON protocol, one asyncio
  process, keep-alive, standard queues, no redrive; its docstring says what it does and does
  not) that spends 20-85 us of CPU per message drained, so that the client's own throughput
  shows where moto would cap it. It exists for this measurement only: no stand-in for moto (or
  SQS) anywhere else.

The proxy holds the first chunk of every HTTP request for `--delay-ms` before passing it on, and
passes everything else (the rest of a request, every response byte) at once: each
request/response round trip takes D longer, on a fresh or a kept-alive connection alike (a
request's first chunk is the first one the client sends after the server's last bytes: no HTTP
client here pipelines). Opening a connection is not delayed. It counts the requests it
delays: those are the requests per message printed. It takes at most `--max-connections`
connections at once, and stops when this process tells it, ends, or after `--proxy-lifetime` s.

Each run fills a fresh queue with `--messages` messages directly (not through the proxy, not
timed), then drains it through the proxy with a handler that does nothing:
- loop: a hand-written boto3 loop: ReceiveMessage of 10 (the attributes the pollers ask for,
  WaitTimeSeconds 1), then DeleteMessageBatch of what it got; sequential.
- boto3 threads at each `--concurrency` N: N threads, each that loop, on one boto3 client with
  N connections: a well-written parallel hand loop, the ceiling of this machine to read the
  pollers' figures against (the client, the local SQS and the proxy share its CPUs).
- Consumer / AsyncConsumer at each `--concurrency` N: `ConsumerConfig(max_concurrency=N,
  max_batch_size=10, max_batch_timeout=0)`, a client with `client_config(max_pool_connections=
  2N+2)`, `run_until_idle(1)`; the handler calls `stop()` once every message was handled.
msg/s: messages over the time from the start of the drain to the end of the last handler call
(vs threads: to the parallel hand loop with as many threads as the poller's max_concurrency)
(the last batch's delete is not in it; the poller's start, GetQueueUrl and GetQueueAttributes,
is). Requests: everything the proxy saw from the start of the drain until the consumer returned.
Client CPU: `time.process_time()` of this process (every thread) over the drain, per message
(client creation included; the local SQS and the proxy are other processes). Server CPU: the
local SQS process's over the drain (utime + stime, /proc), per message; the proxy's is in neither.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aioboto3
import boto3
from _lean_sqs import lean_sqs
from _local import Server, command, hand_round, local_sqs
from _proxy import delay_proxy

from sqsbatch import AsyncConsumer, Consumer, ConsumerConfig, MessageBatch
from sqsbatch._botocore import client_config
from sqsbatch._core.receiving import connections_for
from sqsbatch.local import LOCAL_CREDENTIALS

REGION = LOCAL_CREDENTIALS["AWS_DEFAULT_REGION"]
SERVER_LIFETIME_SECONDS = 1800

# -- the local SQS ------------------------------------------------------------------------


def credentials(endpoint: str) -> dict[str, Any]:
    return {
        "endpoint_url": endpoint,
        "region_name": REGION,
        "aws_access_key_id": LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    }


def fill(client: Any, queue: str, count: int) -> None:
    client.create_queue(QueueName=queue)
    url = client.get_queue_url(QueueName=queue)["QueueUrl"]
    for start in range(0, count, 10):
        entries = [
            {"Id": str(i), "MessageBody": json.dumps({"n": n})}
            for i, n in enumerate(range(start, min(count, start + 10)))
        ]
        client.send_message_batch(QueueUrl=url, Entries=entries)


# -- the contenders --------------------------------------------------------------------------


@dataclass
class Tally:
    """Messages handled in one drain (ids, so that a duplicate from moto counts once)."""

    expected: int
    started: float = field(default_factory=time.perf_counter)
    seen: set[int] = field(default_factory=set)
    last: float = 0.0

    def handle(self, body: str) -> bool:
        """True once every expected message was handled."""
        self.seen.add(json.loads(body)["n"])
        self.last = time.perf_counter()
        return len(self.seen) >= self.expected


Drain = Callable[[str, str, int, int], Tally]
"""(endpoint, queue, messages, concurrency) -> the tally of one drain."""


def drain_loop(endpoint: str, queue: str, count: int, concurrency: int) -> Tally:
    client = boto3.session.Session().client("sqs", **credentials(endpoint), config=client_config())
    tally = Tally(count)
    url = client.get_queue_url(QueueName=queue)["QueueUrl"]
    while len(tally.seen) < count and hand_round(client, url, tally.handle):
        pass
    return tally


def drain_parallel_loop(endpoint: str, queue: str, count: int, concurrency: int) -> Tally:
    """N threads, each the loop above (receive 10, handle, delete them), on one boto3 client
    (boto3 clients are thread-safe) with a connection per thread: what a well-written parallel
    hand loop reaches on this machine, the ceiling to read the pollers' figures against."""
    config = client_config(max_pool_connections=concurrency)
    client = boto3.session.Session().client("sqs", **credentials(endpoint), config=config)
    tally = Tally(count)
    url = client.get_queue_url(QueueName=queue)["QueueUrl"]

    def work() -> None:
        while len(tally.seen) < count and hand_round(client, url, tally.handle):
            pass

    threads = [threading.Thread(target=work) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return tally


def consumer_config(concurrency: int) -> ConsumerConfig:
    return ConsumerConfig(max_concurrency=concurrency, max_batch_size=10, max_batch_timeout=0)


def drain_threads(endpoint: str, queue: str, count: int, concurrency: int) -> Tally:
    config = consumer_config(concurrency)
    pool = client_config(max_pool_connections=connections_for(config))
    client = boto3.session.Session().client("sqs", **credentials(endpoint), config=pool)
    consumers: list[Consumer] = []
    tally = Tally(count)

    def handler(batch: MessageBatch) -> None:
        for message in batch.messages:
            if tally.handle(message.body):
                consumers[0].stop()

    consumers.append(Consumer(queue, handler, config, client=client))
    tally.started = time.perf_counter()
    consumers[0].run_until_idle(1.0)
    return tally


def drain_tasks(endpoint: str, queue: str, count: int, concurrency: int) -> Tally:
    config = consumer_config(concurrency)
    pool = client_config(max_pool_connections=connections_for(config))

    async def main() -> Tally:
        async with aioboto3.Session().client("sqs", **credentials(endpoint), config=pool) as aio:
            consumers: list[AsyncConsumer] = []
            tally = Tally(count)

            async def handler(batch: MessageBatch) -> None:
                for message in batch.messages:
                    if tally.handle(message.body):
                        consumers[0].stop()

            consumers.append(AsyncConsumer(queue, handler, config, client=aio))
            tally.started = time.perf_counter()
            await consumers[0].run_until_idle(1.0)
            return tally

    return asyncio.run(main())


@dataclass
class Run:
    name: str
    concurrency: int | None
    rates: list[float] = field(default_factory=list)
    requests: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    server_cpu: list[float] = field(default_factory=list)


def runs(concurrencies: list[int]) -> list[tuple[Run, Drain]]:
    found: list[tuple[Run, Drain]] = [(Run("boto3 loop", None), drain_loop)]
    for name, drain in (
        ("boto3 threads", drain_parallel_loop),
        ("Consumer", drain_threads),
        ("AsyncConsumer", drain_tasks),
    ):
        found += [(Run(name, n), drain) for n in concurrencies]
    return found


def measure(args: argparse.Namespace, server: Server, proxy: str, counter: Any) -> list[Run]:
    filler = boto3.session.Session().client("sqs", **credentials(server.endpoint))
    table = runs(args.concurrency)
    stamp = time.monotonic_ns()
    for round_ in range(args.rounds):
        for index, (run, drain) in enumerate(table):
            queue = f"bench-latency-{stamp}-{round_}-{index}"
            fill(filler, queue, args.messages)
            before, cpu, server_cpu = counter.value, time.process_time(), server.cpu_seconds()
            tally = drain(proxy, queue, args.messages, run.concurrency or 1)
            cpu = time.process_time() - cpu
            server_cpu = server.cpu_seconds() - server_cpu
            requests = counter.value - before
            handled = len(tally.seen)
            assert handled == args.messages, f"{run.name}: {handled} of {args.messages} handled"
            run.rates.append(handled / (tally.last - tally.started))
            run.requests.append(requests / handled)
            run.cpu.append(cpu / handled * 1e6)
            run.server_cpu.append(server_cpu / handled * 1e6)
            print(
                f"  round {round_ + 1}: {run.name} {run.concurrency or '-'}: "
                f"{run.rates[-1]:.0f} msg/s, {run.requests[-1]:.3f} requests/msg, "
                f"client CPU {run.cpu[-1]:.0f} us/msg, server CPU {run.server_cpu[-1]:.0f} us/msg",
                flush=True,
            )
    return [run for run, _ in table]


def report(table: list[Run], args: argparse.Namespace) -> None:
    loop = statistics.median(table[0].rates)
    print(
        f"\n{args.messages} messages a drain, {args.delay_ms:g} ms added to every request, "
        f"median of {args.rounds} round(s), local SQS: {args.server}"
    )
    parallel = [run for run in table if run.name == "boto3 threads"]
    threads = {run.concurrency: statistics.median(run.rates) for run in parallel}
    print(
        f"  {'':14} {'max_concurrency':>15} {'msg/s':>7} {'vs loop':>8} {'vs threads':>10} "
        f"{'requests/msg':>13} {'client CPU us/msg':>17} {'server CPU us/msg':>17}"
    )
    for run in table:
        rate = statistics.median(run.rates)
        ceiling = threads.get(run.concurrency)
        versus = f"{rate / ceiling:10.2f}" if ceiling else f"{'-':>10}"
        print(
            f"  {run.name:14} {run.concurrency or '-':>15} {rate:7.0f} {rate / loop:8.2f} "
            f"{versus} {statistics.median(run.requests):13.3f} {statistics.median(run.cpu):17.0f} "
            f"{statistics.median(run.server_cpu):17.0f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--server",
        choices=["moto", "lean"],
        default="moto",
        help="the local SQS: moto's, or bench/_lean_sqs.py's (in memory, far less CPU)",
    )
    parser.add_argument("--delay-ms", type=float, default=20.0, help="added to every request")
    parser.add_argument("--messages", type=int, default=2000, help="messages per drain")
    parser.add_argument(
        "--concurrency", type=int, nargs="+", default=[1, 4, 16, 64], help="pollers' values"
    )
    parser.add_argument("--rounds", type=int, default=1, help="drains per contender (median)")
    parser.add_argument("--max-connections", type=int, default=512, help="the proxy's bound")
    parser.add_argument(
        "--proxy-lifetime", type=float, default=1800.0, help="the proxy stops after this (s)"
    )
    args = parser.parse_args()
    start_server = lean_sqs if args.server == "lean" else local_sqs
    with (
        start_server(SERVER_LIFETIME_SECONDS) as info,
        delay_proxy(
            info.endpoint, args.delay_ms / 1000, args.max_connections, args.proxy_lifetime
        ) as (proxy, counter),
    ):
        print(info.versions("sqsbatch", "boto3", "aioboto3", "moto"))
        print(f"local SQS ({args.server}) at {info.endpoint}, delaying proxy at {proxy}")
        report(measure(args, info, proxy, counter), args)
    print(f"\ncommand: {command()}")


if __name__ == "__main__":
    main()
