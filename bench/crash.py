"""kill -9 of `sqsbatch consume` at random moments: lost and duplicated messages, by body id.

    .venv/bin/python bench/crash.py [--messages 500] [--kills 10] [--pollers sync async]
        [--concurrency 4] [--handler-sleep 0.5] [--life 0.5 4] [--seed 1] [--keep DIR]

Full figures: `--messages 5000 --kills 50`. `--idempotency`: the pollers run the idempotency
guard (docs/idempotency.md) on a table (`SQSBATCH_IDEMPOTENCY_TABLE`, as the table's stack sets
it) of moto's DynamoDB in the local SQS's server (`--store moto`, whose transactions the local
server runs one at a time: `sqsbatch.dev.moto_dynamodb`) or of dynalite (`--store dynalite`,
tests/dynalite). A duplicate is then a message killed between its handler's side effect and its
completion; the handler also reads, as it starts, which of its messages the table already
records as completed, and when (bench/_ledger.py `note_completed`): the run prints how many were
completed before they were received (the guard's promise: 0) and how many since (a consumer
still running when its claim lapsed, under load: both run, the honest window).

For each poller (`sqsbatch consume`, with `--async` for the AsyncConsumer), a fresh queue with a
DLQ (RedrivePolicy maxReceiveCount 21) on a local SQS (bench/_local.py, its own process). Then
`--kills` times: send the next wave of `messages / kills` messages (the queue stays shallow: moto's
receive slows with depth), start `sqsbatch consume bench/_ledger.py:record` (visibility timeout
2 s, long polls of 1 s, batches of 10 with no wait, `--max-concurrency`; the handler sleeps
`--handler-sleep` per batch and records the ids it is given), wait a random time drawn uniformly
from `--life` (seconds since the start, start-up included), SIGKILL it, and read the queue's
ApproximateNumberOfMessagesNotVisible at once: the messages in flight at that kill (received,
not deleted). The next process starts once they are visible again, so each kill's count is its
own. After the last kill, one `sqsbatch consume --once` drains the queue. At the end the queue
and the DLQ are read whole (bench/_ledger.py): lost = ids neither handled nor in either queue;
duplicated = handler calls beyond the first per id. A duplicate needs a kill between a handler's
return and its batch's delete, so duplicates <= the messages in flight at the kills.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _ledger import Tally, count_queue, fill, read_ledger, sqs_client, work_directory
from _local import command, local_sqs
from idempotency_cost import client_for, new_table

import sqsbatch
from sqsbatch import create_queue

HERE = Path(__file__).resolve().parent
SERVER_LIFETIME_SECONDS = 7200
VISIBILITY_SECONDS = 2


@dataclass
class Kills:
    done: int = 0
    with_in_flight: int = 0
    in_flight: int = 0
    before_first_receive: int = 0
    lives: list[float] = field(default_factory=list)


def consume_args(endpoint: str, queue: str, poller: str, concurrency: int) -> list[str]:
    handler = f"{HERE / '_ledger.py'}:{'record_async' if poller == 'async' else 'record'}"
    args = [str(Path(sys.executable).parent / "sqsbatch"), "--endpoint-url", endpoint]
    args += ["consume", handler, "-q", queue, "--max-concurrency", str(concurrency)]
    args += ["--max-batch-timeout", "0", "--visibility-timeout", str(VISIBILITY_SECONDS)]
    args += ["--poll-seconds", "1", "--log-format", "plain"]
    return [*args, "--async"] if poller == "async" else args


def environment(ledger: str, handler_sleep: float) -> dict[str, str]:
    return {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_DEFAULT_REGION": "us-east-1",
        "BENCH_LEDGER": ledger,
        "BENCH_HANDLER_SLEEP": str(handler_sleep),
    }


def not_visible(client: Any, url: str) -> tuple[int, int]:
    names = ["ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessages"]
    found = client.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return int(found[names[0]]), int(found[names[1]])


def wait_visible(client: Any, url: str) -> None:
    ends = time.monotonic() + 60
    while not_visible(client, url)[0] and time.monotonic() < ends:
        time.sleep(0.2)


def kill_loop(
    args: argparse.Namespace, endpoint: str, poller: str, work: Path, table_at: str | None
) -> Tally:
    client = sqs_client(endpoint)
    queue = f"crash-{poller}-{time.monotonic_ns()}"
    url = create_queue(
        queue,
        dead_letter_queue=f"{queue}-dlq",
        max_retries=20,
        client=client,
        visibility_timeout=VISIBILITY_SECONDS,
    )
    dlq_url = client.get_queue_url(QueueName=f"{queue}-dlq")["QueueUrl"]
    ledger = str(work / f"{queue}.ledger")
    env = environment(ledger, args.handler_sleep)
    if table_at is not None:  # the guard, as the settings turn it on
        env["SQSBATCH_IDEMPOTENCY_TABLE"] = new_table(client_for(table_at))
        env["SQSBATCH_IDEMPOTENCY_TTL"] = "86400"  # read by the handler's check (_ledger.py)
        env["AWS_ENDPOINT_URL_DYNAMODB"] = table_at
    chooser = random.Random(args.seed)
    wave = -(-args.messages // args.kills)
    kills = Kills()
    log = open(work / f"{queue}.log", "w")  # noqa: SIM115 - closed below, after every child
    started = time.monotonic()
    for k in range(args.kills):
        fill(client, url, range(k * wave, min(args.messages, (k + 1) * wave)))
        before = len(read_ledger(ledger)[0])
        child = subprocess.Popen(
            consume_args(endpoint, queue, poller, args.concurrency),
            env=env,
            stderr=log,
            stdout=subprocess.DEVNULL,
        )
        life = chooser.uniform(*args.life)
        time.sleep(life)
        child.send_signal(signal.SIGKILL)
        child.wait()
        hidden, _visible = not_visible(client, url)
        kills.done += 1
        kills.lives.append(life)
        kills.in_flight += hidden
        kills.with_in_flight += hidden > 0
        kills.before_first_receive += len(read_ledger(ledger)[0]) == before and hidden == 0
        wait_visible(client, url)
    fill(client, url, range(args.kills * wave, args.messages))
    final = subprocess.run(
        [*consume_args(endpoint, queue, poller, args.concurrency), "--once", "--idle-seconds", "3"],
        env=env,
        stderr=log,
        stdout=subprocess.DEVNULL,
        timeout=1800,
        check=False,
    )
    log.close()
    elapsed = time.monotonic() - started
    handled, _ = read_ledger(ledger)
    tally = Tally(set(range(args.messages)), handled)
    tally.queued = count_queue(client, url)
    tally.dead = count_queue(client, dlq_url)
    print(
        f"{poller}: {kills.done} kills ({kills.with_in_flight} with messages in flight, "
        f"{kills.before_first_receive} before the process handled anything), "
        f"{kills.in_flight} messages in flight at the kills in all; final --once exit "
        f"{final.returncode}; {elapsed:.0f} s",
        flush=True,
    )
    verdict = "ok" if tally.duplicated <= kills.in_flight else "MORE THAN IN FLIGHT"
    print(f"  {tally.line()}; duplicates vs in flight: {verdict}", flush=True)
    if table_at is not None:
        spared, late = read_ledger(ledger + ".completed")[0], read_ledger(ledger + ".late")[0]
        print(
            f"  guard: {sum(spared.values())} handler calls for messages completed before they "
            f"were received; {sum(late.values())} whose completion by a consumer still running "
            "landed after this one's claim (its claim had lapsed: both ran)",
            flush=True,
        )
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=500)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument(
        "--pollers", nargs="+", choices=["sync", "async"], default=["sync", "async"]
    )
    parser.add_argument("--concurrency", type=int, default=4, help="--max-concurrency")
    parser.add_argument("--handler-sleep", type=float, default=0.5, help="seconds per batch")
    parser.add_argument(
        "--life", type=float, nargs=2, default=[0.5, 4.0], help="kill after U(a, b) s"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--idempotency", action="store_true", help="with the guard (DynamoDB)")
    parser.add_argument(
        "--store",
        choices=["moto", "dynalite"],
        default="moto",
        help="--idempotency's DynamoDB: moto's, in the local SQS's server, or dynalite",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep each run's ledger and consumer log in a new directory under this one",
    )
    args = parser.parse_args()
    with (
        local_sqs(SERVER_LIFETIME_SECONDS) as server,
        work_directory(args.keep, "crash-") as work,
        _dynalite(args.idempotency and args.store == "dynalite") as dynalite_at,
    ):
        table_at = dynalite_at or (server.endpoint if args.idempotency else None)
        print(server.versions("sqsbatch", "boto3", "aioboto3", "moto"))
        print(f"sqsbatch from {Path(sqsbatch.__file__).parent}; local SQS at {server.endpoint}")
        tallies = [
            kill_loop(args, server.endpoint, poller, Path(work), table_at)
            for poller in args.pollers
        ]
    print(f"\nlost in all: {sum(len(t.lost) for t in tallies)}")
    print(f"command: {command()}")


@contextmanager
def _dynalite(wanted: bool) -> Iterator[str | None]:
    """dynalite's endpoint while the block runs (None: no guard wanted)."""
    if not wanted:
        yield None
        return
    sys.path.insert(0, str(HERE.parent))
    from tests.support import dynalite  # noqa: PLC0415

    reason = dynalite.missing()
    if reason is not None:
        raise SystemExit(reason)
    with dynalite.Dynalite() as node:
        yield node.endpoint_url


if __name__ == "__main__":
    main()
