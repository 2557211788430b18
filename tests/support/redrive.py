"""Helpers for the redrive tests (no tests here): dead-lettered messages, and client proxies.

The proxies wrap a REAL boto3 client on moto's server: every call reaches moto, except the one
a test arms to fail (`Faulty`), and receives can be serialised (`SerialReceives`) because moto
is not thread-safe under concurrent receives (it can hand one message to two receivers).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from botocore.exceptions import ClientError

from sqsbatch import create_queue
from sqsbatch._core.envelope import Death, Envelope, ErrorInfo
from tests.support.faults import ClientProxy
from tests.support.sqs_helpers import drain


def make_queues(
    sqs: Any, name: str, *, fifo: bool = False, max_retries: int = 1
) -> tuple[str, str]:
    """A source queue and its DLQ; returns (source, dlq) names."""
    suffix = ".fifo" if fifo else ""
    source, dlq = f"{name}{suffix}", f"{name}-dlq{suffix}"
    create_queue(source, dead_letter_queue=dlq, max_retries=max_retries, client=sqs)
    return source, dlq


def dead_letter(
    sqs: Any,
    dlq: str,
    source: str | None,
    bodies: Sequence[Any],
    *,
    at: float | None = None,
    redrives: int = 0,
    group: str | None = None,
    reason: str | None = None,
) -> None:
    """Put `bodies` in `dlq` as the sqsbatch consumer dead-letters them (metadata included;
    with `reason`, a dead-letter history whose last entry has it)."""
    url = sqs.get_queue_url(QueueName=dlq)["QueueUrl"]
    failed_at = time.time() if at is None else at
    for i, body in enumerate(bodies):
        envelope = Envelope(
            id=f"orig-{body}",
            timestamp=failed_at - 60,
            redrives=redrives,
            source_queue=source,
            error=ErrorInfo("RuntimeError", "handler failed", failed_at),
        )
        if reason is not None:
            envelope = replace(envelope, dead_count=redrives).died(
                Death(reason, source or "?", 1, failed_at)
            )
        params: dict[str, Any] = {
            "QueueUrl": url,
            "MessageBody": json.dumps(body),
            "MessageAttributes": {
                "sqsbatch": envelope.to_attribute(),
                "tenant": {"DataType": "String", "StringValue": "acme"},
            },
        }
        if group is not None:
            params |= {"MessageGroupId": group, "MessageDeduplicationId": f"dlq-{i}-{body}"}
        sqs.send_message(**params)


def contents(sqs: Any, queue: str) -> list[dict[str, Any]]:
    """Every visible message of `queue` (left to reappear), with `meta` and parsed `body`."""
    found = drain(sqs, queue)
    for message in found:
        is_json = (message["meta"] or {}).get("ct") == "json"
        message["body"] = json.loads(message["Body"]) if is_json else message["Body"]
    return found


def peek(sqs: Any, queue: str) -> list[dict[str, Any]]:
    """Like `contents`, but every message is made visible again at once."""
    found = contents(sqs, queue)
    url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
    for message in found:
        sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )
    return found


def bodies(sqs: Any, queue: str) -> list[Any]:
    return sorted(message["body"] for message in contents(sqs, queue))


def throttled(op: str) -> Exception:
    error: Exception = ClientError(
        {"Error": {"Code": "ThrottlingException", "Message": "slow"}}, op
    )
    return error


def server_error(op: str) -> Exception:
    error: Exception = ClientError({"Error": {"Code": "InternalError", "Message": "injected"}}, op)
    return error


class Crash(Exception):
    """Stands for the process dying between two calls."""


class Faulty:
    """Proxies `client`; calls of the armed operation raise `error(op)` (the first `times`)."""

    def __init__(
        self, client: Any, op: str, error: Callable[[str], Exception], times: int | None = None
    ) -> None:
        self._client = client
        self._op = op
        self._error = error
        self._left = times
        self.calls: list[str] = []

    def __getattr__(self, op: str) -> Any:
        target = getattr(self._client, op)
        if not callable(target):
            return target

        def call(**params: Any) -> Any:
            self.calls.append(op)
            if op == self._op and self._left != 0:
                self._left = None if self._left is None else self._left - 1
                raise self._error(op)
            return target(**params)

        return call


class SerialReceives(ClientProxy):
    """Proxies `client` with `ReceiveMessage` serialised on a lock shared by several proxies."""

    def __init__(self, client: Any, lock: threading.Lock) -> None:
        super().__init__(client)
        self._lock = lock

    def _call(self, op: str, target: Callable[..., Any], params: dict[str, Any]) -> Any:
        if op != "receive_message":
            return target(**params)
        with self._lock:
            return target(**params)
