"""A lean local SQS for the benches: in memory, one asyncio process, botocore's JSON protocol.

    .venv/bin/python bench/_lean_sqs.py [lifetime_seconds]

prints `{"endpoint": "http://127.0.0.1:PORT", ...}` and serves until its stdin closes or SIGALRM
(after `lifetime_seconds`, default 3600); `lean_sqs()` runs it as a child process, as
bench/_local.py's `local_sqs()` runs moto's server.

Why it exists: bench/poller.py (`--server lean`) measures how fast the consumers drain a queue
beside a hand loop, and behind a delaying proxy, on a 2-CPU machine where the client, the local
SQS and the proxy share the CPUs. moto's server spends 0.7-1.5 ms of CPU per message drained
(a werkzeug request and connection per call, its response layers, its model), so moto, not the
client, caps the figures (every contender near 280-490 msg/s at `--delay-ms 0`; even a
parallel hand loop tops out near 1,000 msg/s behind a delay). This one spends 20-85 us per
message drained (its own work for a ReceiveMessage of 10 is ~50 us, for a DeleteMessageBatch of
10 ~20 us; the rest is the kernel's and waking up), so the client's own throughput shows. It is
bench-only: no test and nothing in sqsbatch uses it, and it is no stand-in for SQS (or moto)
elsewhere.

What it does, as SQS does (botocore 1.40 / aiobotocore 2.25: `POST /`, `X-Amz-Target:
AmazonSQS.<Operation>`, JSON in and out; errors are HTTP 400 with `{"__type":
"com.amazonaws.sqs#<Shape>", "message": ...}` and `x-amzn-query-error: <query code>;Sender`, which
botocore turns into the error codes SQS's query protocol had):
- CreateQueue (idempotent; another value for a given attribute -> QueueNameExists), GetQueueUrl,
  ListQueues (prefix, MaxResults/NextToken), DeleteQueue, PurgeQueue, SetQueueAttributes,
  GetQueueAttributes (`All` or named; the Approximate* counts; FIFO attributes absent),
  ListQueueTags (no tags: a poller's pause check).
  Settable: VisibilityTimeout, DelaySeconds, MessageRetentionPeriod, MaximumMessageSize,
  ReceiveMessageWaitTimeSeconds (ranges checked), Policy, RedriveAllowPolicy, KMS and SSE ones
  (stored, no effect); RedrivePolicy is checked (JSON, a DLQ that exists, maxReceiveCount >= 1),
  stored and returned.
- SendMessage(Batch): DelaySeconds, MessageAttributes and the AWSTraceHeader system attribute,
  with SQS's MD5s (of the body, and of the attributes by SQS's algorithm); MessageGroupId is kept
  and returned (standard queues take one); batch rules (1-10 entries, distinct valid Ids, 1 MiB).
- ReceiveMessage: 1-10 messages, VisibilityTimeout override, long polling that answers as soon
  as a message is visible, system attributes (All or named: SenderId, SentTimestamp,
  ApproximateReceiveCount, ApproximateFirstReceiveTimestamp, AWSTraceHeader and MessageGroupId
  when sent), MessageAttributeNames (All, `.*`, `prefix.*` or names; the MD5 of what is
  returned). Each receive gives a new receipt handle and counts; a message not deleted is
  visible again when its visibility timeout ends; past MessageRetentionPeriod it is dropped.
- DeleteMessage(Batch), ChangeMessageVisibility(Batch): only a message's latest receipt handle
  is valid. An unknown handle, or an earlier one of a message received again since, is
  ReceiptHandleIsInvalid (a Failed entry with SenderFault in a batch); deleting an already
  deleted message with its latest handle succeeds (as SQS); changing the visibility of a message
  whose visibility already ended is MessageNotInflight.

What it does not: FIFO queues (a `.fifo` name or FifoQueue=true is a 400 saying so), redrive (a
RedrivePolicy is stored, but no message is ever moved to the DLQ, however often it is received),
authentication (any credentials pass, no signature is checked), tags, permissions, encryption,
message move tasks, ListDeadLetterSourceQueues (any unknown operation is a 400
UnknownOperationException), chunked request bodies (411), the 12-hour visibility ceiling per
message and the 60 s between purges.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import heapq
import json
import os
import re
import signal
import struct
import sys
import time
import traceback
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from _local import Server

__all__ = ["LeanSqs", "lean_sqs", "main"]

ACCOUNT = "123456789012"
REGION = "us-east-1"
SENDER_ID = "AIDAIT2UOQQY3AUEKVGXU"  # what moto answers too
MAX_BATCH_BYTES = 1_048_576
LENGTH = struct.Struct("!I")
RECEIPT_PAD = base64.b64encode(os.urandom(72)).decode()  # SQS's handles are long; so are these
NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,80}")
ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,80}")
HEADERS = re.compile(
    rb"\r\n(content-length|x-amz-target|host|connection|transfer-encoding)[ \t]*:[ \t]*([^\r\n]*)",
    re.IGNORECASE,
)  # the request headers this server reads
MESSAGE_ID = f"{uuid.uuid4()}"[:24]  # + a counter: an id per message, cheaper than uuid4()

Payload = dict[str, Any]
Result = Payload | Awaitable[Payload]

# -- errors -----------------------------------------------------------------------------------


class SqsError(Exception):
    """An error answer: HTTP 400, the shape in `__type`, the query code in x-amzn-query-error."""

    def __init__(self, shape: str, message: str, query_code: str = "") -> None:
        super().__init__(message)
        self.shape = shape
        self.message = message
        self.query_code = query_code or shape

    def response(self) -> tuple[bytes, bytes]:
        """(extra header lines, body)."""
        body = {"__type": f"com.amazonaws.sqs#{self.shape}", "message": self.message}
        if self.shape == "UnknownOperationException":
            body["__type"] = "com.amazon.coral.service#UnknownOperationException"
        header = f"x-amzn-query-error: {self.query_code};Sender\r\n"
        return header.encode(), json.dumps(body).encode()


def no_queue() -> SqsError:
    return SqsError(
        "QueueDoesNotExist",
        "The specified queue does not exist.",
        "AWS.SimpleQueueService.NonExistentQueue",
    )


def invalid(message: str) -> SqsError:
    return SqsError("InvalidParameterValue", message)


def no_fifo(name: str) -> SqsError:
    return SqsError(
        "UnsupportedOperation",
        f"{name}: FIFO queues are not supported by this bench server (bench/_lean_sqs.py): "
        "use moto's (bench/_local.py local_sqs)",
        "AWS.SimpleQueueService.UnsupportedOperation",
    )


def bad_handle(handle: str) -> SqsError:
    return SqsError(
        "ReceiptHandleIsInvalid",
        f'The input receipt handle "{handle}" is not a valid receipt handle.',
    )


def not_inflight() -> SqsError:
    return SqsError(
        "MessageNotInflight",
        "The message referred to is not in flight.",
        "AWS.SimpleQueueService.MessageNotInflight",
    )


def batch_error(shape: str, message: str) -> SqsError:
    return SqsError(shape, message, f"AWS.SimpleQueueService.{shape}")


def in_range(name: str, value: Any, low: int, high: int) -> int:
    """`value` as an int within [low, high], or InvalidParameterValue."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = low - 1
    if not low <= number <= high:
        raise invalid(
            f"Value {value} for parameter {name} is invalid. "
            f"Reason: must be between {low} and {high}."
        )
    return number


# -- MD5s as SQS computes them ----------------------------------------------------------------


def _field(parts: list[bytes], value: bytes) -> None:
    parts.append(LENGTH.pack(len(value)))
    parts.append(value)


def attributes_md5(attributes: Payload) -> str:
    """SQS's MD5 of message attributes: by name, each length-prefixed name, data type, then a
    type byte (1 string, 2 binary) and the length-prefixed value."""
    parts: list[bytes] = []
    for name in sorted(attributes):
        value = attributes[name]
        _field(parts, name.encode())
        _field(parts, value["DataType"].encode())
        if "StringValue" in value:
            parts.append(b"\x01")
            _field(parts, value["StringValue"].encode())
        else:
            parts.append(b"\x02")
            _field(parts, base64.b64decode(value["BinaryValue"]))
    return hashlib.md5(b"".join(parts)).hexdigest()


def check_attributes(attributes: Any, system: bool = False) -> None:
    """Message attributes as sent, or InvalidParameterValue; the system ones: AWSTraceHeader."""
    if not isinstance(attributes, dict) or len(attributes) > 10:
        raise invalid("Number of message attributes must not exceed 10.")
    for name, value in attributes.items():
        kind = value.get("DataType", "") if isinstance(value, dict) else ""
        if system and (name != "AWSTraceHeader" or kind != "String"):
            raise invalid(f"Message system attribute {name} is not valid.")
        if not kind.startswith(("String", "Number", "Binary")):
            raise invalid(f"The message attribute '{name}' has an invalid message attribute type.")
        key = "BinaryValue" if kind.startswith("Binary") else "StringValue"
        if not value.get(key):
            raise invalid(f"The message attribute '{name}' must contain a non-empty {key}.")


# -- the model --------------------------------------------------------------------------------


class Message:
    """One message; `generation` counts the changes of its visibility (stale queue entries)."""

    __slots__ = (
        "attributes",
        "attributes_md5",
        "body",
        "body_md5",
        "deleted",
        "first_receive_ms",
        "generation",
        "group_id",
        "handle",
        "id",
        "receives",
        "sent_ms",
        "trace_header",
        "visible_at",
    )

    def __init__(
        self, body: str, attributes: Payload, system: Payload, group_id: str | None, serial: int
    ) -> None:
        self.id = f"{MESSAGE_ID}{serial:012x}"
        self.body = body
        self.body_md5 = hashlib.md5(body.encode()).hexdigest()
        self.attributes = attributes
        self.attributes_md5 = attributes_md5(attributes) if attributes else ""
        trace = system.get("AWSTraceHeader")
        self.trace_header: str | None = trace["StringValue"] if trace else None
        self.group_id = group_id
        self.sent_ms = int(time.time() * 1000)
        self.first_receive_ms = 0
        self.receives = 0
        self.handle = ""
        self.generation = 0
        self.deleted = False
        self.visible_at = 0.0  # time.monotonic()


DEFAULTS = {
    "DelaySeconds": "0",
    "MaximumMessageSize": "1048576",
    "MessageRetentionPeriod": "345600",
    "ReceiveMessageWaitTimeSeconds": "0",
    "VisibilityTimeout": "30",
    "SqsManagedSseEnabled": "true",
}
RANGES = {
    "DelaySeconds": (0, 900),
    "MaximumMessageSize": (1024, 1_048_576),
    "MessageRetentionPeriod": (60, 1_209_600),
    "ReceiveMessageWaitTimeSeconds": (0, 20),
    "VisibilityTimeout": (0, 43_200),
}
STORED = {"Policy", "RedriveAllowPolicy", "KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds"}
FIFO_ONLY = {"FifoQueue", "ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit"}
COUNTS = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
)
COMPUTED = {*COUNTS, "CreatedTimestamp", "LastModifiedTimestamp", "QueueArn"}
KNOWN = {*DEFAULTS, *STORED, *FIFO_ONLY, *COMPUTED, "RedrivePolicy", "All"}


class Queue:
    """A standard queue: visible messages in `ready` (in order), the delayed and in-flight ones
    in `pending` (a heap by the time they become visible); stale entries are skipped lazily."""

    def __init__(self, name: str, arn: str) -> None:
        self.name = name
        self.arn = arn
        self.settings = dict(DEFAULTS)
        self.created = self.modified = int(time.time())
        self.messages: dict[str, Message] = {}  # not deleted
        self.ready: deque[tuple[Message, int]] = deque()
        self.pending: list[tuple[float, int, Message, int]] = []
        self.handles: dict[str, Message] = {}  # latest handle -> message (deleted ones too)
        self.waiters: list[asyncio.Future[None]] = []
        self.visibility = self.delay = self.wait = 0
        self.retention_ms = 0
        self.max_size = 0
        self.configure({})

    def configure(self, changes: dict[str, str]) -> None:
        for name, value in changes.items():
            if value == "" and name not in DEFAULTS:
                self.settings.pop(name, None)
            else:
                self.settings[name] = value
        self.visibility = int(self.settings["VisibilityTimeout"])
        self.delay = int(self.settings["DelaySeconds"])
        self.wait = int(self.settings["ReceiveMessageWaitTimeSeconds"])
        self.retention_ms = int(self.settings["MessageRetentionPeriod"]) * 1000
        self.max_size = int(self.settings["MaximumMessageSize"])
        self.modified = int(time.time())

    def schedule(self, message: Message, at: float, sequence: int) -> None:
        message.generation += 1
        message.visible_at = at
        heapq.heappush(self.pending, (at, sequence, message, message.generation))

    def promote(self, now: float) -> None:
        """Move what became visible from `pending` to `ready`."""
        pending = self.pending
        while pending and pending[0][0] <= now:
            _, _, message, generation = heapq.heappop(pending)
            if message.generation == generation and not message.deleted:
                self.ready.append((message, generation))

    def take(self, now: float, count: int) -> list[Message]:
        """Up to `count` visible messages, off `ready` (their entries are spent)."""
        self.promote(now)
        found: list[Message] = []
        ready = self.ready
        expired_before = int(time.time() * 1000) - self.retention_ms
        while ready and len(found) < count:
            message, generation = ready.popleft()
            if message.generation != generation or message.deleted:
                continue
            if message.sent_ms < expired_before:
                self.drop(message)
                continue
            found.append(message)
        return found

    def drop(self, message: Message) -> None:
        message.deleted = True
        self.messages.pop(message.id, None)

    def wake(self) -> None:
        for waiter in self.waiters:
            _release(waiter)
        self.waiters.clear()

    def counts(self, now: float) -> dict[str, str]:
        visible = delayed = in_flight = 0
        for message in self.messages.values():
            if message.visible_at <= now:
                visible += 1
            elif message.receives:
                in_flight += 1
            else:
                delayed += 1
        return dict(zip(COUNTS, (str(visible), str(in_flight), str(delayed)), strict=True))

    def attributes(self, names: list[str]) -> dict[str, str]:
        everything = "All" in names
        found = dict(self.settings)
        found.update(
            CreatedTimestamp=str(self.created),
            LastModifiedTimestamp=str(self.modified),
            QueueArn=self.arn,
        )
        if everything or any(name in COUNTS for name in names):
            found.update(self.counts(time.monotonic()))
        return found if everything else {name: found[name] for name in names if name in found}


# -- the service ------------------------------------------------------------------------------


def _reply_attributes(names: set[str], message: Message) -> dict[str, str]:
    every = "All" in names
    found: dict[str, str] = {}
    if every or "SenderId" in names:
        found["SenderId"] = SENDER_ID
    if every or "SentTimestamp" in names:
        found["SentTimestamp"] = str(message.sent_ms)
    if every or "ApproximateReceiveCount" in names:
        found["ApproximateReceiveCount"] = str(message.receives)
    if every or "ApproximateFirstReceiveTimestamp" in names:
        found["ApproximateFirstReceiveTimestamp"] = str(message.first_receive_ms)
    if message.trace_header is not None and (every or "AWSTraceHeader" in names):
        found["AWSTraceHeader"] = message.trace_header
    if message.group_id is not None and (every or "MessageGroupId" in names):
        found["MessageGroupId"] = message.group_id
    return found


def _user_attributes(names: list[str], message: Message) -> tuple[Payload, str]:
    """The message attributes asked for, and their MD5."""
    if not message.attributes or not names:
        return {}, ""
    if "All" in names or ".*" in names:
        return message.attributes, message.attributes_md5
    prefixes = tuple(name[:-1] for name in names if name.endswith(".*"))
    chosen = {
        name: value
        for name, value in message.attributes.items()
        if name in names or (prefixes and name.startswith(prefixes))
    }
    return chosen, attributes_md5(chosen) if chosen else ""


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _check_ids(entries: Any, action: str) -> list[Payload]:
    if not isinstance(entries, list) or not entries:
        raise batch_error(
            "EmptyBatchRequest",
            f"There should be at least one {action}RequestEntry in the request.",
        )
    if len(entries) > 10:
        raise batch_error(
            "TooManyEntriesInBatchRequest",
            f"Maximum number of entries per request are 10. You have sent {len(entries)}.",
        )
    seen: set[str] = set()
    for entry in entries:
        entry_id = entry.get("Id", "")
        if not ID_PATTERN.fullmatch(entry_id):
            raise batch_error(
                "InvalidBatchEntryId",
                "A batch entry id can only contain alphanumeric characters, hyphens and "
                "underscores. It can be at most 80 letters long.",
            )
        if entry_id in seen:
            raise batch_error("BatchEntryIdsNotDistinct", f"Id {entry_id} repeated.")
        seen.add(entry_id)
    return entries


def _failed(entry_id: str, error: SqsError) -> Payload:
    return {"Id": entry_id, "SenderFault": True, "Code": error.query_code, "Message": error.message}


class LeanSqs:
    """The queues, and one method per operation: `call(operation, payload, host)`."""

    def __init__(self) -> None:
        self.queues: dict[str, Queue] = {}
        self.sequence = 0
        self.operations: dict[str, Callable[[Payload, str], Result]] = {
            "CreateQueue": self.create_queue,
            "GetQueueUrl": self.get_queue_url,
            "ListQueues": self.list_queues,
            "DeleteQueue": self.delete_queue,
            "PurgeQueue": self.purge_queue,
            "GetQueueAttributes": self.get_queue_attributes,
            "SetQueueAttributes": self.set_queue_attributes,
            "ListQueueTags": self.list_queue_tags,
            "SendMessage": self.send_message,
            "SendMessageBatch": self.send_message_batch,
            "ReceiveMessage": self.receive_message,
            "DeleteMessage": self.delete_message,
            "DeleteMessageBatch": self.delete_message_batch,
            "ChangeMessageVisibility": self.change_message_visibility,
            "ChangeMessageVisibilityBatch": self.change_message_visibility_batch,
        }

    def call(self, operation: str, payload: Payload, host: str) -> Result:
        method = self.operations.get(operation)
        if method is None:
            raise SqsError(
                "UnknownOperationException",
                f"{operation or '(no X-Amz-Target)'} is not an operation this bench server "
                "(bench/_lean_sqs.py) implements",
                "InvalidAction",
            )
        return method(payload, host)

    def queue(self, payload: Payload) -> Queue:
        url = payload.get("QueueUrl")
        if not isinstance(url, str):
            raise SqsError("MissingParameter", "The request must contain the parameter QueueUrl.")
        queue = self.queues.get(url.rsplit("/", 1)[-1])
        if queue is None:
            raise no_queue()
        return queue

    def next(self) -> int:
        self.sequence += 1
        return self.sequence

    # -- queues --

    def create_queue(self, payload: Payload, host: str) -> Payload:
        name = payload.get("QueueName", "")
        attributes = payload.get("Attributes") or {}
        if name.endswith(".fifo") or str(attributes.get("FifoQueue", "")).lower() == "true":
            raise no_fifo(name)
        if not NAME_PATTERN.fullmatch(name):
            raise invalid(
                "Can only include alphanumeric characters, hyphens, or underscores. "
                "1 to 80 in length"
            )
        changes = self.checked_settings(attributes)
        queue = self.queues.get(name)
        if queue is None:
            queue = Queue(name, f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}")
            queue.configure(changes)
            self.queues[name] = queue
        else:
            for key, value in changes.items():
                if queue.settings.get(key, "") != value:
                    raise SqsError(
                        "QueueNameExists",
                        f"A queue already exists with the same name and a different value for "
                        f"attribute {key}",
                        "QueueAlreadyExists",
                    )
        return {"QueueUrl": self.url(host, name)}

    def checked_settings(self, attributes: Payload) -> dict[str, str]:
        """The attributes to set, as SQS stores them; InvalidAttributeName/Value otherwise."""
        changes: dict[str, str] = {}
        for name, value in attributes.items():
            if name in FIFO_ONLY:
                if name == "FifoQueue" and str(value).lower() == "false":
                    continue
                raise no_fifo(name)
            if name in RANGES:
                low, high = RANGES[name]
                try:
                    changes[name] = str(in_range(name, value, low, high))
                except SqsError as error:
                    raise SqsError(
                        "InvalidAttributeValue", f"Invalid value for the parameter {name}."
                    ) from error
            elif name == "RedrivePolicy":
                changes[name] = self.redrive_policy(value)
            elif name in STORED or name == "SqsManagedSseEnabled":
                changes[name] = str(value)
            else:
                raise SqsError("InvalidAttributeName", f"Unknown Attribute {name}.")
        return changes

    def redrive_policy(self, raw: Any) -> str:
        """Stored as SQS returns it; the DLQ must exist. No message is ever moved (docstring)."""
        if raw == "":
            return ""
        try:
            policy = json.loads(raw)
            target = str(policy["deadLetterTargetArn"])
            count = int(policy["maxReceiveCount"])
        except (TypeError, ValueError, KeyError) as error:
            raise invalid(f"Value {raw} for parameter RedrivePolicy is invalid.") from error
        if count < 1 or target.rsplit(":", 1)[-1] not in self.queues:
            raise invalid(
                f"Value {raw} for parameter RedrivePolicy is invalid. Reason: "
                "Dead letter target does not exist or maxReceiveCount is below 1."
            )
        return json.dumps(
            {"deadLetterTargetArn": target, "maxReceiveCount": count}, separators=(",", ":")
        )

    @staticmethod
    def url(host: str, name: str) -> str:
        return f"http://{host}/{ACCOUNT}/{name}"

    def get_queue_url(self, payload: Payload, host: str) -> Payload:
        name = payload.get("QueueName", "")
        if name not in self.queues:
            raise no_queue()
        return {"QueueUrl": self.url(host, name)}

    def list_queues(self, payload: Payload, host: str) -> Payload:
        prefix = payload.get("QueueNamePrefix", "")
        names = [name for name in self.queues if name.startswith(prefix)]
        limit = payload.get("MaxResults")
        if limit is None:
            return {"QueueUrls": [self.url(host, n) for n in names[:1000]]} if names else {}
        start = int(payload.get("NextToken") or 0)
        end = start + in_range("MaxResults", limit, 1, 1000)
        found: Payload = {"QueueUrls": [self.url(host, n) for n in names[start:end]]}
        if end < len(names):
            found["NextToken"] = str(end)
        return found

    def delete_queue(self, payload: Payload, host: str) -> Payload:
        queue = self.queue(payload)
        del self.queues[queue.name]
        queue.wake()
        return {}

    def purge_queue(self, payload: Payload, host: str) -> Payload:
        queue = self.queue(payload)
        for message in queue.messages.values():
            message.deleted = True
        queue.messages.clear()
        queue.ready.clear()
        queue.pending.clear()
        return {}

    def get_queue_attributes(self, payload: Payload, host: str) -> Payload:
        queue = self.queue(payload)
        names = payload.get("AttributeNames") or []
        for name in names:
            if name not in KNOWN:
                raise SqsError("InvalidAttributeName", f"Unknown Attribute {name}.")
        found = queue.attributes(names)
        return {"Attributes": found} if found else {}

    def list_queue_tags(self, payload: Payload, host: str) -> Payload:
        self.queue(payload)  # a poller's pause check: a queue with no tags
        return {}

    def set_queue_attributes(self, payload: Payload, host: str) -> Payload:
        queue = self.queue(payload)
        queue.configure(self.checked_settings(payload.get("Attributes") or {}))
        return {}

    # -- sending --

    def new_message(self, queue: Queue, entry: Payload) -> tuple[Message, int]:
        body = entry.get("MessageBody")
        if not isinstance(body, str) or not body:
            raise invalid("The request must contain the parameter MessageBody.")
        if "MessageDeduplicationId" in entry:
            raise invalid("The request include parameter that is not valid for this queue type")
        attributes = entry.get("MessageAttributes") or {}
        if attributes:
            check_attributes(attributes)
        system = entry.get("MessageSystemAttributes") or {}
        if system:
            check_attributes(system, system=True)
        delay = entry.get("DelaySeconds")
        delay = queue.delay if delay is None else in_range("DelaySeconds", delay, 0, 900)
        message = Message(body, attributes, system, entry.get("MessageGroupId"), self.next())
        size = len(body) if len(body) * 4 <= queue.max_size else len(body.encode())
        if size > queue.max_size:
            raise invalid(
                f"One or more parameters are invalid. Reason: Message must be shorter than "
                f"{queue.max_size} bytes."
            )
        return message, delay

    def enqueue(self, queue: Queue, message: Message, delay: int) -> None:
        queue.messages[message.id] = message
        if delay:
            queue.schedule(message, time.monotonic() + delay, self.next())
        else:
            queue.ready.append((message, message.generation))

    @staticmethod
    def sent(message: Message, entry: Payload) -> Payload:
        answer: Payload = {"MessageId": message.id, "MD5OfMessageBody": message.body_md5}
        if message.attributes_md5:
            answer["MD5OfMessageAttributes"] = message.attributes_md5
        if entry.get("MessageSystemAttributes"):
            answer["MD5OfMessageSystemAttributes"] = attributes_md5(
                entry["MessageSystemAttributes"]
            )
        return answer

    def send_message(self, payload: Payload, host: str) -> Payload:
        queue = self.queue(payload)
        message, delay = self.new_message(queue, payload)
        self.enqueue(queue, message, delay)
        if not delay:
            queue.wake()
        return self.sent(message, payload)

    def send_message_batch(self, payload: Payload, host: str) -> Payload:
        queue = self.queue(payload)
        entries = _check_ids(payload.get("Entries"), "SendMessageBatch")
        total = sum(len(entry.get("MessageBody", "")) for entry in entries)
        if total > MAX_BATCH_BYTES:
            raise batch_error(
                "BatchRequestTooLong",
                f"Batch requests cannot be longer than {MAX_BATCH_BYTES} bytes. "
                f"You have sent {total} bytes.",
            )
        successful: list[Payload] = []
        failed: list[Payload] = []
        for entry in entries:
            try:
                message, delay = self.new_message(queue, entry)
            except SqsError as error:
                failed.append(_failed(entry["Id"], error))
                continue
            self.enqueue(queue, message, delay)
            successful.append({"Id": entry["Id"], **self.sent(message, entry)})
        queue.wake()
        return {"Successful": successful, "Failed": failed}

    # -- receiving --

    def receive_message(self, payload: Payload, host: str) -> Result:
        queue = self.queue(payload)
        count = in_range("MaxNumberOfMessages", payload.get("MaxNumberOfMessages", 1), 1, 10)
        wait = payload.get("WaitTimeSeconds")
        wait = queue.wait if wait is None else in_range("WaitTimeSeconds", wait, 0, 20)
        visibility = payload.get("VisibilityTimeout")
        if visibility is None:
            visibility = queue.visibility
        else:
            visibility = in_range("VisibilityTimeout", visibility, 0, 43_200)
        answer = self.receive_now(queue, payload, count, visibility)
        if answer or not wait:
            return answer
        return self.receive_later(queue, payload, (count, visibility), time.monotonic() + wait)

    def receive_now(self, queue: Queue, payload: Payload, count: int, visibility: int) -> Payload:
        now = time.monotonic()
        taken = queue.take(now, count)
        if not taken:
            return {}
        system = {
            *payload.get("AttributeNames", ()),
            *payload.get("MessageSystemAttributeNames", ()),
        }
        user = payload.get("MessageAttributeNames") or []
        now_ms = int(time.time() * 1000)
        replies = []
        for message in taken:
            message.receives += 1
            if not message.first_receive_ms:
                message.first_receive_ms = now_ms
            queue.handles.pop(message.handle, None)
            sequence = self.next()
            message.handle = f"AQEB{sequence:012x}{RECEIPT_PAD}"
            queue.handles[message.handle] = message
            queue.schedule(message, now + visibility, sequence)
            reply: Payload = {
                "MessageId": message.id,
                "ReceiptHandle": message.handle,
                "MD5OfBody": message.body_md5,
                "Body": message.body,
            }
            if system:
                reply["Attributes"] = _reply_attributes(system, message)
            chosen, digest = _user_attributes(user, message)
            if chosen:
                reply["MessageAttributes"] = chosen
                reply["MD5OfMessageAttributes"] = digest
            replies.append(reply)
        return {"Messages": replies}

    async def receive_later(
        self, queue: Queue, payload: Payload, shape: tuple[int, int], deadline: float
    ) -> Payload:
        """Long polling: answer as soon as a message is visible, or empty at `deadline`."""
        loop = asyncio.get_running_loop()
        while True:
            now = time.monotonic()
            if now >= deadline or self.queues.get(queue.name) is not queue:
                return {}
            until = min(deadline, queue.pending[0][0]) if queue.pending else deadline
            waiter: asyncio.Future[None] = loop.create_future()
            queue.waiters.append(waiter)
            timer = loop.call_at(loop.time() + max(0.0, until - now), _release, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                if waiter in queue.waiters:
                    queue.waiters.remove(waiter)
            answer = self.receive_now(queue, payload, *shape)
            if answer:
                return answer

    # -- settling --

    def settle(self, queue: Queue, handle: str, visibility: int | None) -> None:
        """Delete (`visibility` None) or change the visibility of the message behind `handle`."""
        message = queue.handles.get(handle)
        if message is None:
            raise bad_handle(handle)
        if visibility is None:
            if not message.deleted:
                queue.drop(message)
            return
        now = time.monotonic()
        if message.deleted:
            raise bad_handle(handle)
        if message.visible_at <= now:
            raise not_inflight()
        queue.schedule(message, now + visibility, self.next())
        if not visibility:
            queue.wake()

    def delete_message(self, payload: Payload, host: str) -> Payload:
        self.settle(self.queue(payload), payload.get("ReceiptHandle", ""), None)
        return {}

    def change_message_visibility(self, payload: Payload, host: str) -> Payload:
        visibility = in_range("VisibilityTimeout", payload.get("VisibilityTimeout"), 0, 43_200)
        self.settle(self.queue(payload), payload.get("ReceiptHandle", ""), visibility)
        return {}

    def settle_batch(self, payload: Payload, action: str, change: bool) -> Payload:
        queue = self.queue(payload)
        successful: list[Payload] = []
        failed: list[Payload] = []
        for entry in _check_ids(payload.get("Entries"), action):
            try:
                visibility = None
                if change:
                    visibility = in_range(
                        "VisibilityTimeout", entry.get("VisibilityTimeout"), 0, 43_200
                    )
                self.settle(queue, entry.get("ReceiptHandle", ""), visibility)
            except SqsError as error:
                failed.append(_failed(entry["Id"], error))
            else:
                successful.append({"Id": entry["Id"]})
        return {"Successful": successful, "Failed": failed}

    def delete_message_batch(self, payload: Payload, host: str) -> Payload:
        return self.settle_batch(payload, "DeleteMessageBatch", change=False)

    def change_message_visibility_batch(self, payload: Payload, host: str) -> Payload:
        return self.settle_batch(payload, "ChangeMessageVisibilityBatch", change=True)


# -- HTTP/1.1 ---------------------------------------------------------------------------------


class Connection(asyncio.Protocol):
    """One client connection: requests answered in order (a long poll holds the ones after it)."""

    def __init__(self, service: LeanSqs, counter: list[int]) -> None:
        self.service = service
        self.counter = counter
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.busy: asyncio.Task[Payload] | None = None
        self.close_after = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.busy is not None:
            self.busy.cancel()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if self.busy is None:
            self.serve()

    def serve(self) -> None:
        while self.busy is None and self.transport is not None:
            request = self.next_request()
            if request is None:
                return
            self.answer(*request)

    def next_request(self) -> tuple[str, bytes, str] | None:
        """(operation, body, host) of the next complete request in the buffer."""
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return None
        headers = {name.lower(): value for name, value in HEADERS.findall(self.buffer, 0, end)}
        if b"chunked" in headers.get(b"transfer-encoding", b""):
            self.close_after = True
            self.write(b"411 Length Required", b"")
            return None
        start = end + 4
        stop = start + int(headers.get(b"content-length", b"0"))
        if len(self.buffer) < stop:
            return None
        body = bytes(self.buffer[start:stop])
        del self.buffer[:stop]
        self.close_after = headers.get(b"connection", b"").lower() == b"close"
        target = headers.get(b"x-amz-target", b"").rpartition(b".")[2]
        return target.decode(), body, headers.get(b"host", b"").decode()

    def answer(self, operation: str, body: bytes, host: str) -> None:
        try:
            result = self.service.call(operation, json.loads(body) if body else {}, host)
        except SqsError as error:
            self.fail(error)
            return
        except (ValueError, TypeError, AttributeError, KeyError) as error:
            self.fail(SqsError("InvalidParameterValue", f"malformed request: {error!r}"))
            return
        except Exception as error:  # a bug here: say so, as SQS's 500 would
            self.crashed(error)
            return
        if isinstance(result, dict):
            self.write(b"200 OK", json.dumps(result).encode())
            return
        self.busy = asyncio.ensure_future(result)
        self.busy.add_done_callback(self.finished)

    def finished(self, task: asyncio.Task[Payload]) -> None:
        self.busy = None
        if task.cancelled():
            return
        error = task.exception()
        if error is None:
            self.write(b"200 OK", json.dumps(task.result()).encode())
        else:
            self.crashed(error)
        self.serve()

    def fail(self, error: SqsError) -> None:
        extra, body = error.response()
        self.write(b"400 Bad Request", body, extra)

    def crashed(self, error: BaseException) -> None:
        traceback.print_exception(error, file=sys.stderr)
        body = {"__type": "com.amazonaws.sqs#InternalError", "message": repr(error)}
        self.write(
            b"500 Internal Server Error",
            json.dumps(body).encode(),
            b"x-amzn-query-error: InternalError;Receiver\r\n",
        )

    def write(self, status: bytes, body: bytes, extra: bytes = b"") -> None:
        if self.transport is None:
            return
        self.counter[0] += 1
        self.transport.write(
            b"HTTP/1.1 %s\r\nContent-Type: application/x-amz-json-1.0\r\n"
            b"x-amzn-RequestId: 00000000-0000-4000-8000-%012x\r\n%sContent-Length: %d\r\n\r\n%s"
            % (status, self.counter[0], extra, len(body), body)
        )
        if self.close_after:
            self.transport.close()
            self.transport = None


# -- the process ------------------------------------------------------------------------------


async def serve() -> None:
    """Serve on 127.0.0.1 (a port the OS picks) until stdin closes."""
    loop = asyncio.get_running_loop()
    service, counter = LeanSqs(), [0]
    server = await loop.create_server(lambda: Connection(service, counter), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print(json.dumps({"endpoint": f"http://127.0.0.1:{port}", "speedup": False}), flush=True)
    async with server:
        await loop.run_in_executor(None, sys.stdin.read)


def main() -> None:
    signal.alarm(int(sys.argv[1]) if len(sys.argv) > 1 else 3600)
    asyncio.run(serve())


@contextmanager
def lean_sqs(lifetime_seconds: int) -> Iterator[Server]:
    """This server in a child process, ended when the block ends (or after `lifetime_seconds`)."""
    from _local import child_server  # noqa: PLC0415 - the child itself stays stdlib-only

    with child_server([sys.executable, __file__, str(lifetime_seconds)], "lean") as server:
        yield server


if __name__ == "__main__":
    main()
