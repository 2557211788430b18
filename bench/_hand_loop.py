"""The hand-written loop that bench/faults.py runs beside the pollers, as a user would write it.

    python bench/_hand_loop.py ENDPOINT QUEUE_URL DLQ_URL --concurrency 4

`--concurrency` threads share one boto3 client with botocore's default configuration (legacy
retry mode, its default attempts and timeouts; only the pool is raised to fit the threads). Each
thread: ReceiveMessage (10, long poll of 1 s, visibility 5 s), the same handler's choices as
bench/_ledger.py's `mixed` (ids ending in 0 always fail, ids ending in 1 are retried once with a
1 s delay, the rest acked), then one `ChangeMessageVisibilityBatch` for the retried ones (delay 0
for a failure), one `SendMessageBatch` to the DLQ for a failure at its 3rd receive (as the
pollers' `--max-retries 2 --dead-letter-queue` do; moto's own RedrivePolicy move is not
thread-safe and lost messages under concurrent receives) and one `DeleteMessageBatch` for the
acked and dead-lettered ones; the acked ids go to `$BENCH_LEDGER` before the delete, as the
pollers' handler records them before its batch settles. A failed call is logged to stderr
and the loop goes on (what it left comes back after the visibility timeout). Runs until SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from typing import Any

import boto3
from botocore.config import Config

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _ledger import CREDENTIALS, write_ledger

VISIBILITY_SECONDS = 5


def handle(client: Any, url: str, dlq_url: str, ledger: str) -> None:
    messages = client.receive_message(
        QueueUrl=url,
        MaxNumberOfMessages=10,
        WaitTimeSeconds=1,
        VisibilityTimeout=VISIBILITY_SECONDS,
        MessageSystemAttributeNames=["ApproximateReceiveCount"],
    ).get("Messages", [])
    acked, changes, dead, done = [], [], [], []
    for i, message in enumerate(messages):
        n = int(json.loads(message["Body"])["id"])
        receives = int(message["Attributes"]["ApproximateReceiveCount"])
        entry = {"Id": str(i), "ReceiptHandle": message["ReceiptHandle"]}
        if n % 10 == 0 and receives >= 3:
            mark = {"hand_loop": {"DataType": "String", "StringValue": "dead-lettered"}}
            dead.append({"Id": str(i), "MessageBody": message["Body"], "MessageAttributes": mark})
            done.append(entry)
        elif n % 10 == 0:
            changes.append({**entry, "VisibilityTimeout": 0})
        elif n % 10 == 1 and receives == 1:
            changes.append({**entry, "VisibilityTimeout": 1})
        else:
            acked.append(n)
            done.append(entry)
    if acked:
        write_ledger(ledger, acked)
    if changes:
        client.change_message_visibility_batch(QueueUrl=url, Entries=changes)
    if dead:
        sent = client.send_message_batch(QueueUrl=dlq_url, Entries=dead).get("Successful", [])
        refused = {d["Id"] for d in dead} - {item["Id"] for item in sent}
        done = [entry for entry in done if entry["Id"] not in refused]  # send, then delete
    if done:
        client.delete_message_batch(QueueUrl=url, Entries=done)


def worker(client: Any, urls: tuple[str, str], ledger: str, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            handle(client, *urls, ledger)
        except Exception as exc:  # a user's loop logs and goes on
            print(f"hand loop: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("endpoint")
    parser.add_argument("url")
    parser.add_argument("dlq_url")
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    config = Config(max_pool_connections=max(10, args.concurrency))
    client = boto3.session.Session().client(
        "sqs", endpoint_url=args.endpoint, config=config, **CREDENTIALS
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threads = [
        threading.Thread(
            target=worker, args=(client, (args.url, args.dlq_url), os.environ["BENCH_LEDGER"], stop)
        )
        for _ in range(args.concurrency)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


if __name__ == "__main__":
    main()
