"""Counting messages by a unique body id: what the loss benches (crash, faults, partition) share.

Every message's body is `{"id": N}`. A handler records each id it is given, with its pid and
the time, one line per id, appended to `$BENCH_LEDGER` (`O_APPEND` writes of whole lines, so a
kill -9 loses no line already written, and several processes can share the file). At the end,
`count_queue` lists what is still in a queue (waiting out the messages in flight), and `Tally`
says:
- lost: ids sent that no handler acked, and that are in neither the queue nor the DLQ;
- duplicated: handler calls beyond the first, per id (an id handled 3 times counts 2).

`record` / `record_async` are handlers for `sqsbatch consume` (`bench/_ledger.py:record`):
returning normally acks the whole batch. `settle_mixed` / `settle_mixed_async` fail some ids
(`mixed`) and record only the ids they ack. `$BENCH_HANDLER_SLEEP` (seconds) makes each batch last
that long, so that a kill finds messages in flight.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqsbatch import MessageBatch

__all__ = [
    "Tally",
    "body_id",
    "count_queue",
    "fill",
    "first_times",
    "mixed",
    "read_ledger",
    "record",
    "record_async",
    "settle_mixed",
    "settle_mixed_async",
    "sqs_client",
    "steady_rate",
    "work_directory",
    "write_ledger",
]

CREDENTIALS = {
    "region_name": "us-east-1",
    "aws_access_key_id": "local",
    "aws_secret_access_key": "local",
}


def body_id(body: Any) -> int:
    value = json.loads(body) if isinstance(body, str | bytes) else body
    return int(value["id"])


def write_ledger(path: str, ids: Iterable[int]) -> None:
    now = time.time()
    lines = "".join(f"{n} {os.getpid()} {now:.3f}\n" for n in ids)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, lines.encode())
    finally:
        os.close(fd)


def record(batch: MessageBatch) -> None:
    note_completed(batch)
    pause = float(os.environ.get("BENCH_HANDLER_SLEEP", "0"))
    if pause:
        time.sleep(pause)
    write_ledger(os.environ["BENCH_LEDGER"], [body_id(m.body) for m in batch.messages])


async def record_async(batch: MessageBatch) -> None:
    note_completed(batch)
    pause = float(os.environ.get("BENCH_HANDLER_SLEEP", "0"))
    if pause:
        await asyncio.sleep(pause)
    write_ledger(os.environ["BENCH_LEDGER"], [body_id(m.body) for m in batch.messages])


RECEIVE_TO_HANDLER_SECONDS = 3.0
"""More than a receive, its claim and screening take before the handler starts, under load."""


def note_completed(batch: MessageBatch) -> None:
    """With the idempotency guard (`SQSBATCH_IDEMPOTENCY_TABLE`, `SQSBATCH_IDEMPOTENCY_TTL`):
    which of this batch's messages its table already records as completed as the handler
    starts (one consistent read). Completed more than `RECEIVE_TO_HANDLER_SECONDS` before, so
    before this delivery was received and claimed: a call the guard should have spared, into
    `$BENCH_LEDGER.completed`. Completed since: by a consumer still running when its claim
    lapsed and this one claimed (both run: the honest window), into `$BENCH_LEDGER.late`."""
    table = os.environ.get("SQSBATCH_IDEMPOTENCY_TABLE")
    if not table:
        return
    import boto3  # noqa: PLC0415 - only with the guard

    started, ttl = time.time(), float(os.environ["SQSBATCH_IDEMPOTENCY_TTL"])
    keys = {m.idempotency_key: body_id(m.body) for m in batch.messages}
    request = {table: {"Keys": [{"pk": {"S": key}} for key in keys], "ConsistentRead": True}}
    found = boto3.client("dynamodb").batch_get_item(RequestItems=request)["Responses"][table]
    done = {
        keys[item["pk"]["S"]]: float(item["expires"]["N"]) - ttl
        for item in found
        if item["state"]["S"] == "completed"
    }
    before = [n for n, at in done.items() if at < started - RECEIVE_TO_HANDLER_SECONDS]
    for suffix, ids in ((".completed", before), (".late", [n for n in done if n not in before])):
        if ids:
            write_ledger(os.environ["BENCH_LEDGER"] + suffix, ids)


def mixed(batch: MessageBatch) -> list[int]:
    """Ids ending in 0 always fail, ids ending in 1 are retried once 1 s later, the rest acked.

    Returns the acked ids."""
    acked = []
    for message in batch.messages:
        n = body_id(message.body)
        if n % 10 == 0:
            message.retry()
        elif n % 10 == 1 and message.attempts == 1:
            message.retry(delay_seconds=1)
        else:
            message.ack()
            acked.append(n)
    return acked


def settle_mixed(batch: MessageBatch) -> None:
    write_ledger(os.environ["BENCH_LEDGER"], mixed(batch))


async def settle_mixed_async(batch: MessageBatch) -> None:
    write_ledger(os.environ["BENCH_LEDGER"], mixed(batch))


def read_ledger(path: str) -> tuple[Counter[int], list[float]]:
    """(times each id was handled, the times of the handler calls' lines)."""
    handled: Counter[int] = Counter()
    times: list[float] = []
    if not os.path.exists(path):
        return handled, times
    with open(path) as ledger:
        for line in ledger:
            parts = line.split()
            if len(parts) == 3:  # a line cut by a kill is not a handled message
                handled[int(parts[0])] += 1
                times.append(float(parts[2]))
    return handled, times


def first_times(path: str) -> list[float]:
    """The time each id was first handled, sorted."""
    first: dict[int, float] = {}
    if os.path.exists(path):
        with open(path) as ledger:
            for line in ledger:
                parts = line.split()
                if len(parts) == 3:
                    first.setdefault(int(parts[0]), float(parts[2]))
    return sorted(first.values())


def steady_rate(times: list[float], share: float = 0.9) -> float | None:
    """Messages per second from the first handling to `share` of them (the tail left out)."""
    count = int(len(times) * share)
    if count < 2 or times[count - 1] <= times[0]:
        return None
    return (count - 1) / (times[count - 1] - times[0])


def sqs_client(endpoint: str, **config: Any) -> Any:
    import boto3  # noqa: PLC0415 - slow to import; the handlers never need it
    from botocore.config import Config  # noqa: PLC0415

    options = {"retries": {"mode": "standard", "max_attempts": 5}, "read_timeout": 70, **config}
    return boto3.session.Session().client(
        "sqs", endpoint_url=endpoint, config=Config(**options), **CREDENTIALS
    )


def fill(client: Any, url: str, ids: Iterable[int]) -> None:
    """Send one message per id, 10 a request (directly, not through any proxy)."""
    batch: list[int] = []
    for n in [*ids, None]:
        if n is not None:
            batch.append(n)
        if batch and (len(batch) == 10 or n is None):
            entries = [
                {"Id": str(i), "MessageBody": json.dumps({"id": m})} for i, m in enumerate(batch)
            ]
            answer = client.send_message_batch(QueueUrl=url, Entries=entries)
            if answer.get("Failed"):
                raise RuntimeError(f"fill: {answer['Failed']}")
            batch = []


def count_queue(
    client: Any,
    url: str,
    *,
    settle_seconds: float = 120.0,
    seen: list[dict[str, Any]] | None = None,
) -> Counter[int]:
    """Ids in the queue: waits until nothing is in flight or delayed (a re-sent copy), then
    receives everything once.

    `seen`, when given, gets each message as ReceiveMessage returned it (all attributes)."""
    ends = time.monotonic() + settle_seconds
    while time.monotonic() < ends:
        names = ["ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"]
        attributes = client.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
        if all(int(attributes[name]) == 0 for name in names):
            break
        time.sleep(0.5)
    found: Counter[int] = Counter()
    empty = 0
    while empty < 2:
        messages = client.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=3600,
            WaitTimeSeconds=1,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        empty = 0 if messages else empty + 1
        for message in messages:
            found[body_id(message["Body"])] += 1
            if seen is not None:
                seen.append(message)
    return found


@dataclass
class Tally:
    """Lost and duplicated ids of one run (module docstring)."""

    sent: set[int]
    handled: Counter[int]
    queued: Counter[int] = field(default_factory=Counter)
    dead: Counter[int] = field(default_factory=Counter)

    @property
    def lost(self) -> list[int]:
        return sorted(self.sent - set(self.handled) - set(self.queued) - set(self.dead))

    @property
    def duplicated(self) -> int:
        return sum(count - 1 for count in self.handled.values() if count > 1)

    def line(self) -> str:
        lost = self.lost
        shown = f" (ids {lost[:10]}{' ...' if len(lost) > 10 else ''})" if lost else ""
        return (
            f"sent {len(self.sent)}, handled {len(self.handled)} ids "
            f"({sum(self.handled.values())} calls), left in queue {sum(self.queued.values())}, "
            f"in DLQ {sum(self.dead.values())}: lost {len(lost)}{shown}, "
            f"duplicated {self.duplicated}"
        )


@contextmanager
def work_directory(keep_under: str | os.PathLike[str] | None, prefix: str) -> Iterator[str]:
    """Where a bench's ledgers and logs go: a temporary directory, or with `keep_under` a new
    one under it (made if missing) that stays, its path printed."""
    if keep_under is None:
        with tempfile.TemporaryDirectory() as work:
            yield work
        return
    os.makedirs(keep_under, exist_ok=True)
    work = tempfile.mkdtemp(prefix=prefix, dir=keep_under)
    print(f"logs and ledgers in {work}")
    yield work
