"""S3 for large payloads: get, put and delete objects with a sync boto3 client (an async caller
runs these in a thread), botocore's errors translated to sqsbatch's here and only here.

Requests: one `PutObject` per offloaded send, one `GetObject` per offloaded receive, and the
deletes of several objects of one bucket in one `DeleteObjects` (up to 1000 keys; a single key:
`DeleteObject`). The decisions (what is a pointer, what to offload) are `sqsbatch._core.payloads`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sqsbatch._core.payloads import Pointer, is_pointer, parse_pointer
from sqsbatch.errors import ConfigError, PayloadError, PayloadMissing, PointerError

__all__ = ["MAX_DELETE_KEYS", "Fetched", "S3Objects", "fetch_payloads"]

log = logging.getLogger("sqsbatch")

MAX_DELETE_KEYS = 1000
"""S3's most keys in one `DeleteObjects`."""
_MISSING = frozenset({"NoSuchKey", "NoSuchBucket", "404"})


@contextmanager
def _s3_errors(what: str, bucket: str, key: str | None = None) -> Iterator[None]:
    """botocore's errors as `PayloadMissing` (the object or its bucket is gone) or
    `PayloadError`, in one line naming the object."""
    where = f"s3://{bucket}/{key}" if key is not None else f"s3://{bucket}"
    try:
        yield
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        if code in _MISSING and key is not None:
            raise PayloadMissing(bucket, key) from exc
        said = error.get("Message") or code
        raise PayloadError(f"{what} {where} failed: {code}: {said}".rstrip(": ")) from exc
    except BotoCoreError as exc:
        raise PayloadError(f"{what} {where} failed: {exc}") from exc


class S3Objects:
    """The S3 calls of large payloads, on one boto3 S3 client."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.requests = 0

    def check_bucket(self, bucket: str) -> None:
        """`HeadBucket`: a bucket that does not exist (or is not ours) is a one-line error."""
        try:
            self._call("head_bucket", Bucket=bucket)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in _MISSING:
                raise ConfigError(f"bucket {bucket!r} does not exist") from None
            raise ConfigError(f"bucket {bucket!r} cannot be used: {code}") from None
        except BotoCoreError as exc:
            raise ConfigError(f"bucket {bucket!r} cannot be reached: {exc}") from None

    def put(self, bucket: str, key: str, data: bytes) -> None:
        with _s3_errors("PutObject", bucket, key):
            self._call("put_object", Bucket=bucket, Key=key, Body=data)

    def get(self, bucket: str, key: str) -> bytes:
        """The object's bytes; `PayloadMissing` when it is gone."""
        with _s3_errors("GetObject", bucket, key):
            answer = self._call("get_object", Bucket=bucket, Key=key)
            data: bytes = answer["Body"].read()
        return data

    def delete(self, objects: Sequence[tuple[str, str]]) -> list[str]:
        """Delete (bucket, key) pairs, batched per bucket; returns one line per object S3 refused
        to delete (an object already gone counts as deleted, as S3 says)."""
        by_bucket: dict[str, list[str]] = {}
        for bucket, key in objects:
            by_bucket.setdefault(bucket, []).append(key)
        refused: list[str] = []
        for bucket, keys in by_bucket.items():
            for start in range(0, len(keys), MAX_DELETE_KEYS):
                refused += self._delete_some(bucket, keys[start : start + MAX_DELETE_KEYS])
        return refused

    def _delete_some(self, bucket: str, keys: list[str]) -> list[str]:
        if len(keys) == 1:
            with _s3_errors("DeleteObject", bucket, keys[0]):
                self._call("delete_object", Bucket=bucket, Key=keys[0])
            return []
        request = {"Objects": [{"Key": key} for key in keys], "Quiet": True}
        with _s3_errors("DeleteObjects", bucket):
            answer = self._call("delete_objects", Bucket=bucket, Delete=request)
        return [
            f"s3://{bucket}/{error.get('Key')}: {error.get('Code')}: {error.get('Message', '')}"
            for error in answer.get("Errors", [])
        ]

    def _call(self, op: str, **params: Any) -> Any:
        self.requests += 1
        return getattr(self.client, op)(**params)


@dataclass
class Fetched:
    """Received messages with their payloads: what `fetch_payloads` made of them."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    """In order: each pointer's message with the object's content as its `Body` and without the
    size attribute (as AWS's clients hand it over), every other message as it came."""
    pointers: dict[str, Pointer] = field(default_factory=dict)
    """By `MessageId`: the pointer of each message in `messages` that had one (an ack deletes
    its object; a re-send copies `pointer.body` and `pointer.attributes()`, not the payload)."""
    missing: list[tuple[dict[str, Any], Pointer]] = field(default_factory=list)
    """Messages whose object is gone: to dead-letter with reason `payload_missing`."""
    malformed: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    """Messages marked as pointers whose body is not one (or whose payload is not UTF-8 text),
    with the one-line reason."""
    unread: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    """Messages whose object S3 would not give now (throttled, denied, unreachable): not handed
    over and not settled, so that SQS delivers them again (or its RedrivePolicy takes them)."""


def fetch_payloads(messages: Sequence[Mapping[str, Any]], objects: S3Objects) -> Fetched:
    """Each pointer's object fetched (one `GetObject` each), for messages as `ReceiveMessage`
    returns them (asked with their message attributes)."""
    fetched = Fetched()
    for message in messages:
        attributes = message.get("MessageAttributes") or {}
        if not is_pointer(attributes):
            fetched.messages.append(dict(message))
            continue
        try:
            pointer = parse_pointer(str(message.get("Body", "")), attributes)
            body = objects.get(pointer.bucket, pointer.key).decode("utf-8")
        except PointerError as exc:
            fetched.malformed.append((dict(message), str(exc)))
        except PayloadMissing:
            fetched.missing.append((dict(message), pointer))
        except PayloadError as exc:
            log.warning("sqsbatch: message %s left for SQS: %s", message.get("MessageId"), exc)
            fetched.unread.append((dict(message), str(exc)))
        except UnicodeDecodeError:
            where = f"s3://{pointer.bucket}/{pointer.key}"
            fetched.malformed.append((dict(message), f"payload {where} is not UTF-8 text"))
        else:
            kept = {k: v for k, v in attributes.items() if k != pointer.attribute}
            fetched.messages.append({**message, "Body": body, "MessageAttributes": kept})
            fetched.pointers[str(message.get("MessageId"))] = pointer
    return fetched
