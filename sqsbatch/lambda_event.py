"""Lambda's SQS events and partial batch responses, without I/O.

An SQS event source mapping hands Lambda records that are received messages in another shape
(camelCase, base64 binary attributes, the queue as an ARN). `parse_event` turns them back into
what `ReceiveMessage` returns, so that the same decoding and settlement run on every front end.
`report` decides which records go into `batchItemFailures`: Lambda deletes every record left out.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any, TypedDict

from sqsbatch.errors import EventError
from sqsbatch.settlement import ActionKind

__all__ = [
    "BatchItemFailure",
    "BatchResponse",
    "ParsedEvent",
    "Report",
    "handler_budget",
    "parse_event",
    "queue_url_from_arn",
    "report",
]

MAX_MARGIN_SECONDS = 5.0
"""At most this much of the Lambda's remaining time is kept back to settle after the handler."""
MARGIN_SHARE = 0.2
_DNS_SUFFIX = {"aws-cn": "amazonaws.com.cn", "aws-iso": "c2s.ic.gov", "aws-iso-b": "sc2s.sgov.gov"}


class BatchItemFailure(TypedDict):
    itemIdentifier: str


class BatchResponse(TypedDict):
    """What a handler for an event source mapping with `ReportBatchItemFailures` returns."""

    batchItemFailures: list[BatchItemFailure]


@dataclass(frozen=True)
class ParsedEvent:
    queue_arn: str
    queue_url: str
    messages: list[dict[str, Any]]
    """The records as boto3's `ReceiveMessage` returns messages."""
    first_receive: float
    """Epoch seconds no later than any of these receives (for the 12-hour ceiling)."""

    @property
    def message_ids(self) -> dict[str, str]:
        """SQS's message id (the `itemIdentifier`) per receipt handle."""
        return {m["ReceiptHandle"]: m["MessageId"] for m in self.messages}


def parse_event(event: object, *, endpoint_url: str | None = None) -> ParsedEvent:
    """The messages of an SQS event from one queue; `EventError` naming what is wrong."""
    if not isinstance(event, Mapping):
        raise EventError(f"not an SQS event: a {type(event).__name__}, not a mapping")
    records = event.get("Records")
    if not isinstance(records, list) or not records:
        raise EventError("not an SQS event: no Records list (or an empty one)")
    arns = []
    messages = []
    for index, record in enumerate(records):
        arn, message = _parse_record(index, record)
        arns.append(arn)
        messages.append(message)
    queues = sorted(set(arns))
    if len(queues) > 1:
        raise EventError(
            f"records from {len(queues)} queues in one event ({', '.join(queues)}): "
            "sqsbatch settles one queue per batch; give each queue its own function"
        )
    return ParsedEvent(
        queue_arn=queues[0],
        queue_url=queue_url_from_arn(queues[0], endpoint_url),
        messages=messages,
        first_receive=min(_receive_evidence(m["Attributes"]) for m in messages),
    )


def queue_url_from_arn(arn: str, endpoint_url: str | None = None) -> str:
    """`arn:aws:sqs:REGION:ACCOUNT:NAME` as a queue URL, at `endpoint_url` when one is set."""
    parts = arn.split(":")
    if len(parts) != 6 or parts[0] != "arn" or parts[2] != "sqs" or not all(parts[3:]):
        raise EventError(f"eventSourceARN {arn!r} is not an SQS queue ARN")
    _, partition, _, region, account, name = parts
    if endpoint_url is None:
        endpoint_url = f"https://sqs.{region}.{_DNS_SUFFIX.get(partition, 'amazonaws.com')}"
    return f"{endpoint_url.rstrip('/')}/{account}/{name}"


def handler_budget(handler_timeout: float, remaining_seconds: float | None) -> float:
    """Seconds the handler may run: `handler_timeout`, and never so long that Lambda kills the
    function before it settles (a share of the remaining time, at most 5 s, is kept back)."""
    if remaining_seconds is None:
        return handler_timeout
    margin = min(MAX_MARGIN_SECONDS, MARGIN_SHARE * remaining_seconds)
    return max(0.0, min(handler_timeout, remaining_seconds - margin))


@dataclass(frozen=True)
class Report:
    listed: list[int]
    """Indexes to report in `batchItemFailures`: Lambda leaves them to reappear."""
    delete: list[int]
    """Indexes sqsbatch deletes itself and reports anyway (FIFO: behind a failure of the group)."""


def report(
    kinds: Sequence[ActionKind],
    sent: Set[int],
    groups: Sequence[str | None],
    *,
    fifo: bool,
) -> Report:
    """Which messages of a settled batch to report as failed.

    Acks and drops are left out (Lambda deletes them), hidden retries and messages left to the
    RedrivePolicy are reported, and a re-sent or dead-lettered message is left out only once its
    copy was accepted (`sent`). On a FIFO queue no message is reported as done after an earlier
    failure of its group: one that is settled all the same (an explicit ack, an accepted copy) is
    deleted here and reported.
    """
    listed: list[int] = []
    delete: list[int] = []
    failed_groups: set[str] = set()
    for index, kind in enumerate(kinds):
        group = groups[index]
        copied = kind in (ActionKind.RESEND, ActionKind.DEAD_LETTER)
        if kind in (ActionKind.HIDE, ActionKind.LEAVE) or (copied and index not in sent):
            listed.append(index)
            if fifo and group is not None:
                failed_groups.add(group)
        elif fifo and group in failed_groups:
            listed.append(index)
            delete.append(index)
    return Report(listed, delete)


def _parse_record(index: int, record: object) -> tuple[str, dict[str, Any]]:
    where = f"record {index}"
    if not isinstance(record, Mapping):
        raise EventError(f"{where} is a {type(record).__name__}, not a mapping")
    source = record.get("eventSource")
    if source != "aws:sqs":
        raise EventError(f"{where} comes from {source!r}, not 'aws:sqs'")
    for key in ("messageId", "receiptHandle", "eventSourceARN"):
        value = record.get(key)
        if not isinstance(value, str) or not value:
            raise EventError(f"{where} has no {key} (a non-empty string)")
    if not isinstance(record.get("body"), str):
        raise EventError(f"{where} has no body (a string)")
    attributes = record.get("attributes")
    if not isinstance(attributes, Mapping) or not all(
        isinstance(attributes.get(key), str) and attributes[key].isdigit()
        for key in ("ApproximateReceiveCount", "SentTimestamp")
    ):
        raise EventError(f"{where} needs attributes.ApproximateReceiveCount and SentTimestamp")
    message = {
        "MessageId": record["messageId"],
        "ReceiptHandle": record["receiptHandle"],
        "Body": record["body"],
        "Attributes": {str(k): str(v) for k, v in attributes.items()},
        "MessageAttributes": _attributes(where, record.get("messageAttributes") or {}),
    }
    return str(record["eventSourceARN"]), message


def _attributes(where: str, raw: object) -> dict[str, dict[str, Any]]:
    """Lambda's `messageAttributes` (camelCase, base64 binaries) in boto3's shape."""
    if not isinstance(raw, Mapping):
        raise EventError(f"{where}: messageAttributes is not a mapping")
    converted: dict[str, dict[str, Any]] = {}
    for name, value in raw.items():
        if not isinstance(value, Mapping) or not isinstance(value.get("dataType"), str):
            raise EventError(f"{where}: message attribute {name!r} has no dataType")
        shaped: dict[str, Any] = {"DataType": value["dataType"]}
        if value.get("stringValue") is not None:
            shaped["StringValue"] = str(value["stringValue"])
        if value.get("binaryValue") is not None:
            try:
                shaped["BinaryValue"] = base64.b64decode(value["binaryValue"], validate=True)
            except (binascii.Error, TypeError, ValueError):
                raise EventError(f"{where}: message attribute {name!r} is not base64") from None
        converted[str(name)] = shaped
    return converted


def _receive_evidence(attributes: Mapping[str, str]) -> float:
    """Epoch seconds no later than this receive: the first receive, else the send."""
    first = attributes.get("ApproximateFirstReceiveTimestamp", "")
    return int(first if first.isdigit() else attributes["SentTimestamp"]) / 1000
