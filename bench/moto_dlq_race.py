"""Whether the local SQS (moto's server, with sqsbatch's speed-up) loses messages when its
RedrivePolicy moves messages to the DLQ on receive while deletes run: plain boto3, no sqsbatch
consumer in the loop.

    .venv/bin/python bench/moto_dlq_race.py [--messages 600] [--runs 3]

A queue with maxReceiveCount 1 and its DLQ; `--messages` messages `{"id": N}`; 4 threads each
receive 10 (visibility 1 s, no wait) and delete the even ids at once; the odd ids come back after
1 s and moto moves them to the DLQ on their second receive. At the end: deleted (even ids), left
in the queue, in the DLQ, and lost (in none of them). moto's move removes the message from the
queue's list; when it ran without the lock under which the speed-up's `delete_message` rebuilds
that list, a delete meanwhile could drop a message (the server logged `ValueError:
list.remove(x): x not in list` or `RuntimeError: Set changed size during iteration` from
`receive_message`). The speed-up now runs each receive pass under that lock
(`sqsbatch/dev/moto_speedup.py`); docs/robustness.md has what this found before and after.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from typing import Any

from sqsbatch import create_queue
from sqsbatch.dev.server import LocalSqs


def fill(client: Any, url: str, count: int) -> None:
    for start in range(0, count, 10):
        entries = [
            {"Id": str(i), "MessageBody": json.dumps({"id": start + i})}
            for i in range(min(10, count - start))
        ]
        client.send_message_batch(QueueUrl=url, Entries=entries)


def worker(server: LocalSqs, url: str, deleted: set[int], stop: threading.Event) -> None:
    client = server.client()
    while not stop.is_set():
        answer = client.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=1, WaitTimeSeconds=0
        )
        even = [m for m in answer.get("Messages", []) if json.loads(m["Body"])["id"] % 2 == 0]
        if even:
            entries = [
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(even)
            ]
            client.delete_message_batch(QueueUrl=url, Entries=entries)
            deleted.update(json.loads(m["Body"])["id"] for m in even)


def ids(client: Any, url: str) -> set[int]:
    found: set[int] = set()
    while messages := client.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600, WaitTimeSeconds=0
    ).get("Messages", []):
        found.update(json.loads(m["Body"])["id"] for m in messages)
    return found


def one_run(server: LocalSqs, count: int) -> str:
    client = server.client()
    name = f"race-{time.monotonic_ns()}"
    url = create_queue(name, dead_letter_queue=f"{name}-dlq", max_retries=0, client=client)
    dlq = client.get_queue_url(QueueName=f"{name}-dlq")["QueueUrl"]
    fill(client, url, count)
    deleted: set[int] = set()
    stop = threading.Event()
    threads = [threading.Thread(target=worker, args=(server, url, deleted, stop)) for _ in range(4)]
    for thread in threads:
        thread.start()
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    ends = time.monotonic() + 120
    while time.monotonic() < ends:
        found = client.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
        if sum(int(found[n]) for n in names) == 0:
            break
        time.sleep(0.5)
    stop.set()
    for thread in threads:
        thread.join()
    time.sleep(1.5)  # what is still hidden comes back
    left, dead = ids(client, url), ids(client, dlq)
    lost = sorted(set(range(count)) - deleted - left - dead)
    return (
        f"sent {count}, deleted {len(deleted)}, left in the queue {len(left)}, in the DLQ "
        f"{len(dead)}: lost {len(lost)} {lost[:20] if lost else ''}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=600)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with LocalSqs() as server:
        for run in range(1, args.runs + 1):
            print(f"run {run}: {one_run(server, args.messages)}", flush=True)


if __name__ == "__main__":
    main()
