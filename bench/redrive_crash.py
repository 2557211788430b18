"""The redrive daemon killed between its send and its delete: lost and duplicated messages.

    .venv/bin/python bench/redrive_crash.py [--messages 200] [--kills 10]

Full figures: `--messages 1000 --kills 100`.

A local SQS (bench/_local.py) with a source queue and its DLQ (the source's RedrivePolicy names
it, maxReceiveCount 21), `--messages` messages with bodies `{"id": N}` sent straight to the DLQ
(no sqsbatch metadata: the source comes from ListDeadLetterSourceQueues, the due time from the
first receive, due at once with `--base-delay 0 --jitter 0`). In front of the SQS, bench/_proxy.py's
FaultProxy with no faults. `--kills` times: start `redrive --endpoint-url <proxy> run --dlq ...`
(visibility timeout 2 s, long polls of 1 s), register its pid with the proxy, and wait: the proxy
SIGKILLs it when it sees the first DeleteMessage(Batch) after a SendMessage(Batch) from it, before
passing the delete on. So every kill leaves a batch that is in the source and still in the DLQ.
Then `redrive run --once` (through the proxy, nobody registered) until the DLQ is empty, and both
queues are read whole: lost = ids in neither; duplicated = copies in the source beyond the first.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _ledger import count_queue, fill, sqs_client
from _local import command, local_sqs
from _proxy import fault_proxy

import sqsbatch
from sqsbatch import create_queue

SERVER_LIFETIME_SECONDS = 7200
VISIBILITY_SECONDS = 2


def redrive_args(endpoint: str, dlq: str, *extra: str) -> list[str]:
    args = [str(Path(sys.executable).parent / "redrive"), "--endpoint-url", endpoint, "run"]
    return [
        *args,
        "--dlq",
        dlq,
        "--base-delay",
        "0",
        "--jitter",
        "0",
        "--log-format",
        "plain",
        *extra,
    ]


def environment() -> dict[str, str]:
    return {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_DEFAULT_REGION": "us-east-1",
        "REDRIVE_VISIBILITY_TIMEOUT": str(VISIBILITY_SECONDS),
        "REDRIVE_WAIT_SECONDS": "1",
    }


def depth(client: Any, url: str) -> int:
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    found = client.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return sum(int(found[name]) for name in names)


def kill_loop(args: argparse.Namespace, proxy: str, control: Any, client: Any, work: Path) -> None:
    queue = f"rdcrash-{time.monotonic_ns()}"
    url = create_queue(queue, dead_letter_queue=f"{queue}-dlq", max_retries=20, client=client)
    dlq_url = client.get_queue_url(QueueName=f"{queue}-dlq")["QueueUrl"]
    fill(client, dlq_url, range(args.messages))
    env = environment()
    log = open(work / "redrive.log", "w")  # noqa: SIM115 - closed below, after every child
    started = time.monotonic()
    survived = 0
    for _ in range(args.kills):
        before = control.kills.value
        child = subprocess.Popen(
            redrive_args(proxy, f"{queue}-dlq"), env=env, stdout=subprocess.DEVNULL, stderr=log
        )
        control.kill_pid.value = child.pid
        try:
            child.wait(timeout=args.life)
        except subprocess.TimeoutExpired:
            survived += 1  # no send/delete pair in `--life` s (an empty DLQ?): end it ourselves
            control.kill_pid.value = 0
            child.kill()
            child.wait()
        assert control.kills.value in (before, before + 1)
    control.kill_pid.value = 0
    passes = 0
    while depth(client, dlq_url) and passes < 20:
        time.sleep(VISIBILITY_SECONDS + 0.5)  # what the last kill left in hand comes back
        subprocess.run(
            redrive_args(proxy, f"{queue}-dlq", "--once"),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
            timeout=600,
            check=False,
        )
        passes += 1
    log.close()
    elapsed = time.monotonic() - started
    source = count_queue(client, url)
    dead = count_queue(client, dlq_url)
    lost = sorted(set(range(args.messages)) - set(source) - set(dead))
    duplicated = sum(n - 1 for n in source.values() if n > 1)
    print(
        f"{control.kills.value} kills between send and delete ({survived} lives ended by the "
        f"bench instead), {passes} `--once` passes after; {elapsed:.0f} s"
    )
    print(
        f"  sent {args.messages} to the DLQ; at the end: {len(source)} ids in the source "
        f"({sum(source.values())} copies), {sum(dead.values())} in the DLQ: lost {len(lost)}"
        f"{f' (ids {lost[:10]})' if lost else ''}, duplicated {duplicated}"
    )
    print(f"  copies per id in the source: {dict(sorted(Counter(source.values()).items()))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--life", type=float, default=60.0, help="longest wait for a kill (s)")
    args = parser.parse_args()
    with (
        local_sqs(SERVER_LIFETIME_SECONDS) as server,
        fault_proxy(server.endpoint, []) as (proxy, control),
        tempfile.TemporaryDirectory() as work,
    ):
        print(server.versions("sqsbatch", "boto3", "moto"))
        print(f"sqsbatch from {Path(sqsbatch.__file__).parent}; proxy at {proxy}")
        kill_loop(args, proxy, control, sqs_client(server.endpoint), Path(work))
    print(f"command: {command()}")


if __name__ == "__main__":
    main()
