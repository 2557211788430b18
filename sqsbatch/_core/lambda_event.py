"""Lambda's SQS events and partial batch responses, without I/O.

An SQS event source mapping hands Lambda records that are received messages in another shape
(camelCase, base64 binary attributes, the queue as an ARN). `parse_event` turns them back into
what `ReceiveMessage` returns, so that the same decoding and settlement run on every front end.
`report` (`sqsbatch._core.lambda_report`, re-exported here) decides which records go into
`batchItemFailures`: Lambda deletes every record left out.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from operator import itemgetter
from typing import Any, TypedDict, cast

from sqsbatch._core.attributes import ATTRIBUTE
from sqsbatch._core.envelope import FOREIGN, Envelope, read_envelope
from sqsbatch._core.lambda_report import Report, report
from sqsbatch.errors import EventError

__all__ = [
    "BatchItemFailure",
    "BatchResponse",
    "ParsedEvent",
    "Report",
    "SetAside",
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
class SetAside:
    """A record malformed in itself: it is reported in `batchItemFailures` and never handled."""

    index: int
    message_id: str
    reason: str


@dataclass(frozen=True)
class ParsedEvent:
    queue_arn: str
    queue_url: str
    records: list[Mapping[str, Any]]
    """The event's well-formed records, checked, as Lambda gives them."""
    plain: bool = False
    """No record has message attributes: none carries sqsbatch's (none is a delay hop)."""
    set_aside: tuple[SetAside, ...] = ()
    """Records malformed in themselves (bad attributes, no receipt handle, a body that is not
    text...), each with its reason: they are not handled, only reported."""
    bodies: list[str] | None = None
    """Each record's body, in order, as the bulk check read it (None when records were checked
    one by one): a plain batch's messages hold them, so that reading one does not go back to
    its record (`sqsbatch._core.lambda_records.record_batch`)."""

    @cached_property
    def first_receive(self) -> float:
        """Epoch seconds no later than any of these receives (for the 12-hour ceiling); 0 when
        every record was set aside. Read only when a delivery is made (`Arrival`)."""
        return _first_receive(self.records)

    @cached_property
    def envelopes(self) -> list[Envelope] | None:
        """Each record's envelope, as `decode` reads it (`FOREIGN` without sqsbatch's
        attribute); None on a plain event, where every record's is `FOREIGN`."""
        if self.plain:
            return None
        return [_envelope_of(record.get("messageAttributes") or {}) for record in self.records]

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The records as boto3's `ReceiveMessage` returns messages."""
        return [_received(f"record {i}", record) for i, record in enumerate(self.records)]

    @property
    def message_ids(self) -> dict[str, str]:
        """SQS's message id (the `itemIdentifier`) per receipt handle."""
        return {r["receiptHandle"]: r["messageId"] for r in self.records}


def parse_event(
    event: object,
    *,
    endpoint_url: str | None = None,
    well_formed: tuple[str, bool, list[str]] | None = None,
) -> ParsedEvent:
    """The messages of an SQS event from one queue, less the records set aside.

    A well-formed event is checked in bulk (one look at each record); only when that finds
    something does each record get its own check, which sets aside, with a one-line reason,
    each record malformed in itself. `EventError` for an event that is not one SQS batch of
    one queue, and for a record that cannot be reported on its own (not a mapping, not from
    SQS, no messageId): Lambda then retries the whole batch, none of it lost.
    `well_formed`: what `_well_formed` found of these records, when the caller asked it.
    """
    if not isinstance(event, Mapping):
        raise EventError(f"not an SQS event: a {type(event).__name__}, not a mapping")
    records = event.get("Records")
    if not isinstance(records, list) or not records:
        raise EventError("not an SQS event: no Records list (or an empty one)")
    checked = _checked_in_bulk(records, well_formed)
    if checked is not None:
        arn, plain, bodies = checked
        url = queue_url_from_arn(arn, endpoint_url)
        return ParsedEvent(arn, url, records, plain, bodies=bodies)
    arn, good, set_aside = _checked_one_by_one(records)
    url = queue_url_from_arn(arn, endpoint_url)
    if url.endswith(".fifo"):
        good, set_aside = _behind_set_aside(records, good, set_aside)
    kept = [records[index] for index in good]
    return ParsedEvent(arn, url, kept, False, tuple(set_aside))


def _checked_in_bulk(
    records: list[Any], found: tuple[str, bool, list[str]] | None = None
) -> tuple[str, bool, list[str]] | None:
    """(queue ARN, no record has message attributes, the bodies) when every record is well
    formed and from one queue; None when a record needs a closer look. Records with message
    attributes have them checked one by one (an error there is the event's first)."""
    if found is None:
        try:
            found = _well_formed(records)
        except (KeyError, TypeError, AttributeError):  # a field missing, or of the wrong type
            return None
    if found is None:
        return None
    arn, plain, bodies = found
    if not plain:
        try:
            for index, record in enumerate(records):
                if user := record["messageAttributes"]:
                    _checked_attributes(f"record {index}", user)
        except EventError:
            return None
    return arn, plain, bodies


def _well_formed(records: list[Any]) -> tuple[str, bool, list[str]] | None:
    """(queue ARN, no record has message attributes, the bodies) of records that pass every
    check of `_checked_record` and `_reportable_id`, in one look at each record (a record's
    fields lie near one another in memory, records do not); None, or an exception, otherwise."""
    arn = records[0]["eventSourceARN"]
    if type(arn) is not str or not arn:
        return None
    plain = True
    bodies: list[str] = []
    keep = bodies.append
    for record in records:
        attributes = record["attributes"]
        count, sent = attributes["ApproximateReceiveCount"], attributes["SentTimestamp"]
        message_id, handle, body = record["messageId"], record["receiptHandle"], record["body"]
        if not (
            record["eventSource"] == "aws:sqs"
            and record["eventSourceARN"] == arn
            # non-empty strings (a type test and a truth test: cheaper than a call)
            and type(message_id) is str
            and message_id
            and type(handle) is str
            and handle
            and type(body) is str
            # as numbers: a count int() reads, an epoch in ms that a datetime holds (a method
            # call on anything but a string raises the AttributeError caught above)
            and count.isdecimal()
            and len(count) < _MAX_DIGITS
            and sent.isdecimal()
            and len(sent) < _MAX_DIGITS
        ):
            return None
        keep(body)
        if record["messageAttributes"]:  # Lambda's records always have it, if {}
            plain = False
    return arn, plain, bodies


_GET_ATTRIBUTES = itemgetter("attributes")
_GET_FIRST = itemgetter("ApproximateFirstReceiveTimestamp")


def _first_receive(records: list[Mapping[str, Any]]) -> float:
    """Epoch seconds no later than any of these receives, 0 for none: the least first receive
    (in bulk when every record has one, digits of one length: least string, least number),
    else the send where a record has none."""
    try:
        firsts = list(map(_GET_FIRST, map(_GET_ATTRIBUTES, records)))
        digits = "".join(firsts)
        if (
            len(set(map(len, firsts))) == 1
            and 0 < len(firsts[0]) < _MAX_DIGITS
            and digits.isascii()
            and digits.isdecimal()
        ):
            return int(min(firsts)) / 1000
    except (KeyError, TypeError):
        pass
    return min((_receive_evidence(r["attributes"]) for r in records), default=0.0)


def _checked_one_by_one(records: list[Any]) -> tuple[str, list[int], list[SetAside]]:
    """(queue ARN, indexes of well-formed records, records set aside); `EventError` for what
    cannot be reported record by record."""
    arns: set[str] = set()
    good: list[int] = []
    set_aside: list[SetAside] = []
    for index, record in enumerate(records):
        message_id = _reportable_id(index, record)
        arn = record.get("eventSourceARN")
        if isinstance(arn, str) and arn:
            arns.add(arn)
        try:
            _checked_record(index, cast(Mapping[str, Any], record))
        except EventError as exc:
            set_aside.append(SetAside(index, message_id, str(exc)))
        else:
            good.append(index)
    queues = sorted(arns)
    if len(queues) > 1:
        raise EventError(
            f"records from {len(queues)} queues in one event ({', '.join(queues)}): "
            "sqsbatch settles one queue per batch; give each queue its own function"
        )
    if not queues:
        raise EventError("not an SQS event: no record has an eventSourceARN")
    return queues[0], good, set_aside


def _reportable_id(index: int, record: object) -> str:
    """The record's messageId, or an `EventError`: without one it cannot be reported alone."""
    where = f"record {index}"
    if not isinstance(record, Mapping):
        raise EventError(f"{where} is a {type(record).__name__}, not a mapping")
    source = record.get("eventSource")
    if source != "aws:sqs":
        raise EventError(f"{where} comes from {source!r}, not 'aws:sqs'")
    message_id = record.get("messageId")
    if not isinstance(message_id, str) or not message_id:
        raise EventError(
            f"{where} has no messageId (a non-empty string): it cannot be reported alone, "
            "so the whole batch is refused (Lambda retries it)"
        )
    return message_id


def _behind_set_aside(
    records: list[Any], good: list[int], set_aside: list[SetAside]
) -> tuple[list[int], list[SetAside]]:
    """On a FIFO queue, a record is not handled after a record of its group was set aside (a
    record set aside whose group cannot be read holds back every later record)."""
    if not set_aside:
        return good, set_aside
    first = {entry.index: _group_of(records[entry.index]) for entry in set_aside}
    kept: list[int] = []
    held = list(set_aside)
    for index in good:
        earlier = [i for i, group in first.items() if i < index]
        group = _group_of(records[index])
        blocking = [i for i in earlier if first[i] is None or first[i] == group]
        if blocking:
            reason = f"record {index} is behind record {blocking[0]}, set aside, of its group"
            held.append(SetAside(index, str(records[index]["messageId"]), reason))
        else:
            kept.append(index)
    return kept, sorted(held, key=lambda entry: entry.index)


def _group_of(record: Mapping[str, Any]) -> str | None:
    attributes = record.get("attributes")
    group = attributes.get("MessageGroupId") if isinstance(attributes, Mapping) else None
    return group if isinstance(group, str) else None


_MAX_DIGITS = 15
"""Fewer digits: an epoch in milliseconds before the year 5138, which a datetime holds."""


def _is_epoch_ms(text: str) -> bool:
    return text.isdecimal() and len(text) < _MAX_DIGITS


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


def _envelope_of(user: Mapping[str, Any]) -> Envelope:
    """The envelope in a record's `messageAttributes` (checked), as `decode` reads it."""
    ours = user.get(ATTRIBUTE)
    if ours is None or ours.get("stringValue") is None:
        return FOREIGN
    return read_envelope(str(ours["stringValue"])) or FOREIGN


def _checked_record(index: int, record: Mapping[str, Any]) -> None:
    """Nothing, or an `EventError` naming what is wrong with a record that has a messageId."""
    where = f"record {index}"
    for key in ("receiptHandle", "eventSourceARN"):
        value = record.get(key)
        if not isinstance(value, str) or not value:
            raise EventError(f"{where} has no {key} (a non-empty string)")
    if not isinstance(record.get("body"), str):
        raise EventError(f"{where} has no body (a string)")
    attributes = record.get("attributes")
    if not (
        isinstance(attributes, Mapping)
        and isinstance(attributes.get("ApproximateReceiveCount"), str)
        and _is_epoch_ms(attributes["ApproximateReceiveCount"])
        and isinstance(attributes.get("SentTimestamp"), str)
        and _is_epoch_ms(attributes["SentTimestamp"])
    ):
        raise EventError(f"{where} needs attributes.ApproximateReceiveCount and SentTimestamp")
    _checked_attributes(where, record.get("messageAttributes") or {})


def _received(where: str, record: Mapping[str, Any]) -> dict[str, Any]:
    """A checked record as boto3's `ReceiveMessage` returns the message."""
    return {
        "MessageId": record["messageId"],
        "ReceiptHandle": record["receiptHandle"],
        "Body": record["body"],
        "Attributes": {str(k): str(v) for k, v in record["attributes"].items()},
        "MessageAttributes": _attributes(where, record.get("messageAttributes") or {}),
    }


def _attributes(where: str, raw: object) -> dict[str, dict[str, Any]]:
    """Lambda's `messageAttributes` (camelCase, base64 binaries) in boto3's shape."""
    converted: dict[str, dict[str, Any]] = {}
    for name, value in _checked_attributes(where, raw).items():
        shaped: dict[str, Any] = {"DataType": value["dataType"]}
        if value.get("stringValue") is not None:
            shaped["StringValue"] = str(value["stringValue"])
        if value.get("binaryValue") is not None:
            shaped["BinaryValue"] = _binary(where, name, value["binaryValue"])
        converted[str(name)] = shaped
    return converted


def _checked_attributes(where: str, raw: object) -> Mapping[Any, Mapping[str, Any]]:
    """`messageAttributes` as given, or an `EventError` naming what is wrong with them."""
    if not isinstance(raw, Mapping):
        raise EventError(f"{where}: messageAttributes is not a mapping")
    for name, value in raw.items():
        if not isinstance(value, Mapping) or not isinstance(value.get("dataType"), str):
            raise EventError(f"{where}: message attribute {name!r} has no dataType")
        if value.get("binaryValue") is not None:
            _binary(where, name, value["binaryValue"])
    return raw


def _binary(where: str, name: object, text: object) -> bytes:
    try:
        return base64.b64decode(text, validate=True)  # type: ignore[arg-type]
    except (binascii.Error, TypeError, ValueError):
        raise EventError(f"{where}: message attribute {name!r} is not base64") from None


def _receive_evidence(attributes: Mapping[str, Any]) -> float:
    """Epoch seconds no later than this receive: the first receive, else the send."""
    first = str(attributes.get("ApproximateFirstReceiveTimestamp", ""))
    return int(first if _is_epoch_ms(first) else attributes["SentTimestamp"]) / 1000
