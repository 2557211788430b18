"""The SQS endpoint unreachable in the middle of a run: does the poller recover by itself, and
is anything lost?

    .venv/bin/python bench/partition.py [--before 5] [--outage 10] [--after 5] [--rate 20]
        [--pollers sync async] [--styles refuse blackhole]

Full figures: `--before 20 --outage 60 --after 20`.

A local SQS (bench/_local.py) and bench/_proxy.py's FaultProxy in front of it (no faults). For
each poller and style, a fresh queue with a DLQ, and `sqsbatch --endpoint-url <proxy> consume
bench/_ledger.py:record` (`--async` for the AsyncConsumer; `--max-concurrency 4`, batches of 10
with no wait, visibility timeout 5 s, long polls of 1 s), which records each id it handles.
Messages `{"id": N}` are sent straight to the SQS (not through the proxy) at `--rate` per second
for `--before + --outage + --after` seconds; from `--before` s on, the proxy is down for
`--outage` s:
- refuse: nothing listens on the proxy's port (connection refused) and the open connections are
  cut: an endpoint that is gone.
- blackhole: connections are accepted, and nothing is answered: the requests in flight and those
  sent during the outage wait for botocore's read timeout (sqsbatch's client: 70 s). A network
  that drops packets.
Then the bench waits (at most `--drain` s) for the queue to empty, SIGTERMs the poller and reads
the queue and the DLQ whole. Printed: lost and duplicated (bench/_ledger.py), whether the poller
was still running, and recovery: the time from the outage's end to the first message handled
after it.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _ledger import Tally, count_queue, fill, read_ledger, sqs_client
from _local import command, local_sqs
from _proxy import FaultControl, fault_proxy

import sqsbatch
from sqsbatch import create_queue

HERE = Path(__file__).resolve().parent
SERVER_LIFETIME_SECONDS = 7200
ENV = {
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def consume_args(proxy: str, queue: str, poller: str) -> list[str]:
    handler = f"{HERE / '_ledger.py'}:{'record_async' if poller == 'async' else 'record'}"
    args = [str(Path(sys.executable).parent / "sqsbatch"), "--endpoint-url", proxy, "consume"]
    args += [handler, "-q", queue, "--max-concurrency", "4", "--max-batch-timeout", "0"]
    args += ["--visibility-timeout", "5", "--poll-seconds", "1", "--log-format", "plain"]
    return [*args, "--async"] if poller == "async" else args


def queue_empty(client: Any, url: str) -> bool:
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    found = client.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return all(int(found[name]) == 0 for name in names)


def feed_and_cut(
    args: argparse.Namespace, client: Any, url: str, control: FaultControl
) -> tuple[int, float, float]:
    """Send at `--rate` msg/s; the proxy is down from `--before` s for `--outage` s.

    Returns (messages sent, wall time the outage began, wall time it ended)."""
    started = time.monotonic()
    total = args.before + args.outage + args.after
    sent = 0
    down_at = up_at = 0.0
    while (elapsed := time.monotonic() - started) < total:
        if not down_at and elapsed >= args.before:
            control.down.value = 1
            down_at = time.time()
        if down_at and not up_at and elapsed >= args.before + args.outage:
            control.down.value = 0
            up_at = time.time()
        due = int(elapsed * args.rate) + 1
        if due > sent:
            fill(client, url, range(sent, due))
            sent = due
        time.sleep(0.05)
    if not up_at:
        control.down.value = 0
        up_at = time.time()
    return sent, down_at, up_at


def one_run(
    args: argparse.Namespace, poller: str, style: str, server: str, work: Path
) -> tuple[str, int]:
    client = sqs_client(server)
    queue = f"partition-{poller}-{style}-{time.monotonic_ns()}"
    url = create_queue(queue, dead_letter_queue=f"{queue}-dlq", client=client)
    dlq_url = client.get_queue_url(QueueName=f"{queue}-dlq")["QueueUrl"]
    ledger = str(work / f"{queue}.ledger")
    log_path = work / f"{queue}.log"
    with fault_proxy(server, [], style=style) as (proxy, control), open(log_path, "w") as log:
        child = subprocess.Popen(
            consume_args(proxy, queue, poller),
            env={**os.environ, **ENV, "BENCH_LEDGER": ledger},
            stderr=log,
            stdout=subprocess.DEVNULL,
        )
        sent, down_at, up_at = feed_and_cut(args, client, url, control)
        ends = time.monotonic() + args.drain
        while child.poll() is None and time.monotonic() < ends and not queue_empty(client, url):
            time.sleep(0.5)
        drained_at = time.time()
        alive = child.poll() is None
        if alive:
            child.send_signal(signal.SIGTERM)
        code = child.wait(timeout=90)
    handled, times = read_ledger(ledger)
    tally = Tally(set(range(sent)), handled)
    tally.queued = count_queue(client, url)
    tally.dead = count_queue(client, dlq_url)
    during = sum(down_at < t < up_at for t in times)
    recovered = min((t for t in times if t >= up_at), default=None)
    recovery = f"{recovered - up_at:.1f} s" if recovered is not None else "NEVER"
    warnings = sum(
        "WARNING" in line or "ERROR" in line for line in log_path.read_text().splitlines()
    )
    line = (
        f"{poller:5} {style:9}: outage {up_at - down_at:.0f} s; first message handled "
        f"{recovery} after it ended; {during} handled during it; queue empty "
        f"{drained_at - up_at:.0f} s after it; poller {'alive' if alive else 'DEAD'} "
        f"(exit {code}{' on SIGTERM' if alive else ' during the run'}); "
        f"{warnings} WARNING/ERROR log lines\n  {tally.line()}"
    )
    return line, len(tally.lost)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=float, default=5.0, help="seconds before the outage")
    parser.add_argument("--outage", type=float, default=10.0, help="seconds unreachable")
    parser.add_argument("--after", type=float, default=5.0, help="seconds of sending after it")
    parser.add_argument("--rate", type=float, default=20.0, help="messages sent per second")
    parser.add_argument("--drain", type=float, default=300.0, help="longest wait for the rest")
    parser.add_argument(
        "--pollers", nargs="+", choices=["sync", "async"], default=["sync", "async"]
    )
    parser.add_argument(
        "--styles", nargs="+", choices=["refuse", "blackhole"], default=["refuse", "blackhole"]
    )
    args = parser.parse_args()
    lost = 0
    with local_sqs(SERVER_LIFETIME_SECONDS) as server, tempfile.TemporaryDirectory() as work:
        print(server.versions("sqsbatch", "boto3", "aioboto3", "moto"))
        print(f"sqsbatch from {Path(sqsbatch.__file__).parent}; local SQS at {server.endpoint}")
        for poller in args.pollers:
            for style in args.styles:
                line, run_lost = one_run(args, poller, style, server.endpoint, Path(work))
                lost += run_lost
                print(line, flush=True)
    print(f"\nlost in all: {lost}")
    print(f"command: {command()}")


if __name__ == "__main__":
    main()
