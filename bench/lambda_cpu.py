"""CPU per record of `sqsbatch.lambda_handler` and of Powertools' batch processor, one SQS event.

    .venv/bin/python bench/lambda_cpu.py [--records 10000] [--repeat 7] [--retry-every 10]
        [--bodies foreign|sqsbatch] [--no-gc-off] [--profile] [--unreachable]

Both front ends get the same event: `--records` records in the shape Lambda's SQS event source
mapping delivers (messageId, receiptHandle, body, attributes, messageAttributes, md5OfBody,
eventSource, eventSourceARN, awsRegion), decoded afresh from JSON text for every invocation (as
the Lambda runtime does; the decoding is not timed). Both run the same trivial work per record:
json-decode the body (sqsbatch decodes a body its Producer sent as JSON itself: then the handler
takes `message.body` as it is) and succeed, or retry every `--retry-every`-th record
(sqsbatch: `message.retry()` without a delay; Powertools: raise in the record handler).

Measured: `time.process_time()` (CPU of the whole process, every thread) around one
invocation, after one warm-up invocation of each (a warm Lambda: sqsbatch looks up the queue's
RedrivePolicy once per execution environment, with one GetQueueAttributes). Contenders
alternate, `--repeat` invocations each; min and median, and the paired ratio (the median of
each round's own ratio, ours to theirs invoked beside it: a machine that slows for seconds at a
time slows both sides of a pair).
Not measured: decoding the event, building the processor or adapter, the local SQS, a full
`gc.collect()` before each invocation (so that no invocation pays for the previous one's garbage).
The cyclic GC stays on as in Lambda; the CPU it takes during the invocation is printed ("of it
GC", from `gc.callbacks`), and both contenders run again with it off (`--no-gc-off` skips that).

The adapter's client points at a local SQS (moto, `sqsbatch.dev.server.LocalSqs`) in a separate
process, whose queue is the one named in the event's ARN, so its CPU is not counted here.
Every request the adapter makes is counted (botocore's `before-send`) and printed: with all
records acked it makes none after the warm-up. A retried record is reported in
`batchItemFailures` by both; sqsbatch also makes it visible again at once (its retry semantics:
redelivery after `retry_delay`, 0 by default) with ChangeMessageVisibilityBatch calls, whose
client-side CPU (botocore, HTTP on loopback) is part of its figure; Powertools leaves a failed
record hidden until the queue's visibility timeout ends. The request counts are printed beside.

`--unreachable` adds two invocations (all acked) of an adapter whose client points at a closed
port on 127.0.0.1: what the RedrivePolicy lookup costs when it fails (a failed lookup is not kept,
so every invocation asks again).

Both run their handler on the calling thread, the main one, as Lambda's runtime calls it
(sqsbatch: with SIGALRM armed for its deadline, `sqsbatch/_shell/handler_alarm.py`).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import hashlib
import json
import pstats
import socket
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3
from _local import command, local_sqs

from sqsbatch import ConsumerConfig, MessageBatch, lambda_handler
from sqsbatch._core.envelope import Envelope
from sqsbatch._shell.botocore import client_config
from sqsbatch.dev.server import LOCAL_CREDENTIALS
from sqsbatch.lambda_adapter import LambdaAdapter

QUEUE = "bench-lambda"
ACCOUNT = "123456789012"  # moto's default account: the ARN's queue URL is the local one
REGION = LOCAL_CREDENTIALS["AWS_DEFAULT_REGION"]
ARN = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{QUEUE}"
SERVER_LIFETIME_SECONDS = 900

RecordHandler = Callable[[Any], None]


class Retry(Exception):
    """Raised by the Powertools record handler for a record to retry."""


class Context:
    """Lambda's context object, as far as either library reads it."""

    function_name = "bench"
    memory_limit_in_mb = 1024
    aws_request_id = "bench"

    def get_remaining_time_in_millis(self) -> int:
        return 900_000


def client(endpoint: str) -> Any:
    return boto3.session.Session().client(
        "sqs",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        config=client_config(validate=False),  # as the adapter's own client
    )


def count_requests(sqs: Any) -> Counter[str]:
    requests: Counter[str] = Counter()

    def count(**kwargs: Any) -> None:
        requests[kwargs["event_name"].rsplit(".", 1)[-1]] += 1

    sqs.meta.events.register("before-send.sqs", count)
    return requests


def make_record(n: int, *, bodies: str, sent_ms: int) -> dict[str, Any]:
    """Record `n` as the event source mapping delivers it; its body is `{"n": n, ...}`."""
    body = json.dumps({"n": n, "order": f"o-{n:06d}", "amount": n % 997, "currency": "EUR"})
    attributes: dict[str, Any] = {}
    if bodies == "sqsbatch":  # what sqsbatch's Producer sends: its envelope attribute
        value = Envelope(content_type="json").to_attribute()["StringValue"]
        attributes["sqsbatch"] = {
            "stringValue": value,
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": "String",
        }
    return {
        "messageId": str(uuid.UUID(int=n)),
        "receiptHandle": f"AQEB{hashlib.sha256(str(n).encode()).hexdigest() * 4}",
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": str(sent_ms),
            "SenderId": "AIDAIENQZJOLO23YVJ4VO",
            "ApproximateFirstReceiveTimestamp": str(sent_ms + 15),
        },
        "messageAttributes": attributes,
        "md5OfBody": hashlib.md5(body.encode()).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": ARN,
        "awsRegion": REGION,
    }


def event_text(records: int, bodies: str) -> str:
    sent_ms = int(time.time() * 1000) - 2000
    return json.dumps(
        {"Records": [make_record(n, bodies=bodies, sent_ms=sent_ms) for n in range(records)]}
    )


def sqsbatch_function(sqs: Any, retry_every: int) -> LambdaAdapter:
    @lambda_handler(config=ConsumerConfig(), client=sqs)  # retry_delay 0, max_retries 3
    def handler(batch: MessageBatch) -> None:
        for message in batch.messages:
            value = message.body
            if isinstance(value, str):  # a foreign message reads as text
                value = json.loads(value)
            if retry_every and value["n"] % retry_every == 0:
                message.retry()

    return handler


def powertools_function(retry_every: int) -> Callable[[dict[str, Any], Any], Any]:
    try:
        from aws_lambda_powertools.utilities.batch import (  # type: ignore[import-not-found, unused-ignore]  # noqa: PLC0415 - a bench-only extra
            BatchProcessor,
            EventType,
            process_partial_response,
        )
    except ImportError:
        sys.exit("needs the bench extra: .venv/bin/pip install -c constraints.txt -e '.[bench]'")
    processor = BatchProcessor(event_type=EventType.SQS)

    def record_handler(record: Any) -> None:  # Powertools passes `record=`
        value = json.loads(record.body)
        if retry_every and value["n"] % retry_every == 0:
            raise Retry(record.message_id)

    def function(event: dict[str, Any], context: Any) -> Any:
        return process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )

    return function


def failed_ids(response: Any) -> set[str]:
    return {item["itemIdentifier"] for item in response["batchItemFailures"]}


@dataclass
class Contender:
    name: str
    function: Callable[[Any, Any], Any]
    gc_on: bool = True
    cpu: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)
    gc_cpu: list[float] = field(default_factory=list)
    requests: Counter[str] = field(default_factory=Counter)
    warmup: str = ""

    def invoke(self, text: str, expected: set[str]) -> float:
        """CPU seconds of one invocation on a fresh event (wall and GC time kept)."""
        event = json.loads(text)
        gc.collect()
        if not self.gc_on:
            gc.disable()
        try:
            with gc_watch() as collections:
                cpu, wall = time.process_time(), time.perf_counter()
                response = self.function(event, Context())
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        finally:
            gc.enable()
        failed = failed_ids(response)
        assert failed == expected, f"{self.name}: {len(failed)} reported, {len(expected)} expected"
        self.wall.append(wall)
        self.gc_cpu.append(sum(collections.values()))
        return cpu


def contenders(sqs: Any, retry_every: int, args: argparse.Namespace) -> list[Contender]:
    ours = sqsbatch_function(sqs, retry_every)
    theirs = powertools_function(retry_every)
    found = [Contender("sqsbatch", ours), Contender("powertools", theirs)]
    if args.gc_off:
        found += [
            Contender("sqsbatch, gc off", ours, gc_on=False),
            Contender("powertools, gc off", theirs, gc_on=False),
        ]
    return found


def scenario(title: str, sqs: Any, args: argparse.Namespace, retry_every: int) -> None:
    text = event_text(args.records, args.bodies)
    every = range(0, args.records, retry_every) if retry_every else range(0)
    expected = {str(uuid.UUID(int=n)) for n in every}
    requests = count_requests(sqs)
    runners = contenders(sqs, retry_every, args)
    for runner in runners:
        requests.clear()
        cpu = runner.invoke(text, expected)  # warm: RedrivePolicy lookup, first-use costs
        runner.wall.clear()
        runner.gc_cpu.clear()
        runner.warmup = f"{cpu * 1000:.1f} ms CPU, requests {dict(requests) or 'none'}"
    for rep in range(args.repeat):
        for runner in runners if rep % 2 == 0 else reversed(runners):
            requests.clear()
            runner.cpu.append(runner.invoke(text, expected))
            runner.requests.update(requests)
    report(title, args, runners, len(expected))
    if args.profile:
        profile(title, runners[0].function, text)


def report(title: str, args: argparse.Namespace, runners: list[Contender], retried: int) -> None:
    per = 1e6 / args.records
    print(f"\n{title}: {args.records} records, {retried} retried, {args.repeat} invocations each")
    print(f"  {'':18} {'CPU us/record':>20} {'of it GC':>9} {'wall ms':>8}   requests/invocation")
    print(f"  {'':18} {'min':>9} {'median':>10} {'median':>9} {'median':>8}")
    for runner in runners:
        calls = {op: n / args.repeat for op, n in sorted(runner.requests.items())}
        print(
            f"  {runner.name:18} {min(runner.cpu) * per:9.2f} "
            f"{statistics.median(runner.cpu) * per:10.2f} "
            f"{statistics.median(runner.gc_cpu) * per:9.2f} "
            f"{statistics.median(runner.wall) * 1000:8.1f}   {calls or 'none'}"
        )
    for ours, theirs in zip(runners[::2], runners[1::2], strict=True):
        paired = statistics.median(a / b for a, b in zip(ours.cpu, theirs.cpu, strict=True))
        print(
            f"  ratio {ours.name} / {theirs.name}: "
            f"{min(ours.cpu) / min(theirs.cpu):.2f} (min), "
            f"{statistics.median(ours.cpu) / statistics.median(theirs.cpu):.2f} (median), "
            f"{paired:.2f} (paired)"
        )
    for runner in runners[:2]:
        print(f"  warm-up invocation of {runner.name}: {runner.warmup}")


def profile(title: str, function: Callable[[Any, Any], Any], text: str) -> None:
    """cProfile of one warm invocation, in CPU time (`time.thread_time`: the handler runs on
    the calling thread), and the cyclic GC's share of it."""
    event = json.loads(text)
    main = cProfile.Profile(time.thread_time)
    gc.collect()
    with gc_watch() as collections:
        main.enable()
        function(event, Context())
        main.disable()
    print(f"\ncProfile of one sqsbatch invocation ({title}), top 15 by own CPU time:")
    stats = pstats.Stats(main)
    stats.sort_stats("tottime").print_stats(15)
    print("the same, sqsbatch's own functions by cumulative CPU time:")
    stats.sort_stats("cumulative").print_stats(r"/sqsbatch/", 15)
    spent = ", ".join(f"{gen} {s * 1000:.0f} ms" for gen, s in sorted(collections.items()))
    print(f"cyclic GC during that invocation (CPU by generation collected): {spent or 'none'}")


@contextmanager
def gc_watch() -> Iterator[dict[str, float]]:
    """CPU seconds spent in the cyclic GC, per generation collected, while the block runs."""
    spent: dict[str, float] = {}
    started: list[float] = []

    def callback(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(time.thread_time())
        elif started:
            key = f"gen{info['generation']}"
            spent[key] = spent.get(key, 0.0) + time.thread_time() - started.pop()

    gc.callbacks.append(callback)
    try:
        yield spent
    finally:
        gc.callbacks.remove(callback)


def unreachable(args: argparse.Namespace) -> None:
    """Invocations whose RedrivePolicy lookup fails: a client at a port nobody listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sqs = client(f"http://127.0.0.1:{port}")
    requests = count_requests(sqs)
    runner = Contender("sqsbatch, SQS unreachable", sqsbatch_function(sqs, 0))
    text = event_text(args.records, args.bodies)
    print(f"\nall acked, SQS unreachable (a closed port): {args.records} records")
    for invocation in (1, 2):
        requests.clear()
        cpu = runner.invoke(text, set())
        print(
            f"  invocation {invocation}: {cpu / args.records * 1e6:.2f} CPU us/record, "
            f"wall {runner.wall[-1]:.1f} s, requests {dict(requests)}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000, help="records per event")
    parser.add_argument("--repeat", type=int, default=7, help="invocations per contender")
    parser.add_argument(
        "--retry-every", type=int, default=10, help="the retry case retries every N-th record"
    )
    parser.add_argument(
        "--bodies",
        choices=("foreign", "sqsbatch"),
        default="foreign",
        help="JSON text from any producer, or as sqsbatch's Producer sends (its attribute)",
    )
    parser.add_argument(
        "--gc-off",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also measure both with the cyclic GC disabled during the invocation",
    )
    parser.add_argument("--profile", action="store_true", help="cProfile one sqsbatch invocation")
    parser.add_argument(
        "--unreachable", action="store_true", help="also invoke with SQS unreachable (slow)"
    )
    args = parser.parse_args()
    with local_sqs(SERVER_LIFETIME_SECONDS) as info:
        sqs = client(info.endpoint)
        sqs.create_queue(QueueName=QUEUE)
        print(info.versions("sqsbatch", "aws-lambda-powertools", "boto3", "moto"))
        print(f"bodies: {args.bodies}; local SQS in a child process at {info.endpoint}")
        scenario("all acked", sqs, args, retry_every=0)
        if args.retry_every:
            scenario(f"1 in {args.retry_every} retried", sqs, args, retry_every=args.retry_every)
    if args.unreachable:
        unreachable(args)
    print(f"\ncommand: {command()}")


if __name__ == "__main__":
    main()
