"""`S3Payloads`: messages past a threshold travel in S3, in the format of AWS's extended clients
(docs/payloads.md). `Producer(queue, large_payloads=S3Payloads("bucket"))` writes it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from sqsbatch._core.payloads import DEFAULT_THRESHOLD, Offload, Pointer, Upload, check_threshold
from sqsbatch._shell.s3_payloads import Fetched, S3Objects, fetch_payloads
from sqsbatch.errors import ConfigError
from sqsbatch.limits import SQS_LIMITS, SqsLimits

__all__ = ["S3Payloads"]

log = logging.getLogger("sqsbatch")


def _new_key() -> str:
    return str(uuid.uuid4())  # as the extended clients name their objects


class S3Payloads:
    """Where large payloads go: `bucket` (checked once, here, with `HeadBucket`).

    `threshold`: a message whose size (body + attributes, as SQS counts it) is above it, in
    bytes, goes to S3 (at most SQS's limit, 1 MiB); `always`: every message does. `keep`: an
    acked message's object stays in S3 (default: deleted on ack, never on a retry, a copy to the
    DLQ, a delay hop or a redrive, which copy the pointer). `client`: a boto3 S3 client (default:
    one from the environment).
    """

    def __init__(
        self,
        bucket: str,
        *,
        threshold: int = DEFAULT_THRESHOLD,
        always: bool = False,
        keep: bool = False,
        client: Any = None,
        limits: SqsLimits = SQS_LIMITS,
    ) -> None:
        if not isinstance(bucket, str) or not bucket:
            raise ConfigError(f"bucket={bucket!r} is invalid: the name of an S3 bucket")
        self.bucket = bucket
        self.threshold = check_threshold(threshold, limits)
        self.always = bool(always)
        self.keep = bool(keep)
        self.objects = S3Objects(client if client is not None else _default_client())
        self.objects.check_bucket(bucket)

    def __repr__(self) -> str:
        return (
            f"S3Payloads({self.bucket!r}, threshold={self.threshold}, always={self.always}, "
            f"keep={self.keep})"
        )

    @property
    def requests(self) -> int:
        """S3 requests made so far (the `HeadBucket` at construction included)."""
        return self.objects.requests

    def offload(self) -> tuple[Offload, Any]:
        """What a send plan takes: the choice, and the maker of new keys."""
        return Offload(self.bucket, self.threshold, self.always), _new_key

    def put(self, uploads: Sequence[Upload]) -> None:
        """Each payload in S3, in order (one `PutObject` each); if one fails, those already
        written are logged as orphans and the error raised: nothing was sent."""
        for done, upload in enumerate(uploads):
            try:
                self.objects.put(upload.bucket, upload.key, upload.data)
            except BaseException:
                self.orphaned(uploads[:done], "their send was not attempted")
                raise

    def orphaned(self, uploads: Sequence[Upload], why: str) -> None:
        """Log payloads written for messages that SQS did not take; they stay in S3 (a pointer
        may have gone out when the send's outcome is unknown): a lifecycle rule removes them."""
        if uploads:
            where = ", ".join(f"s3://{u.bucket}/{u.key}" for u in uploads)
            log.warning("sqsbatch: payloads left in S3 with no message (%s): %s", why, where)

    def fetch(self, messages: Sequence[Mapping[str, Any]]) -> Fetched:
        """Received messages with their payloads fetched (see `fetch_payloads`)."""
        return fetch_payloads(messages, self.objects)

    def acked(self, pointers: Sequence[Pointer]) -> list[str]:
        """Delete the objects of acked messages (batched per bucket) unless `keep`; returns one
        line per object S3 refused to delete."""
        if self.keep or not pointers:
            return []
        return self.objects.delete([(p.bucket, p.key) for p in pointers])


def _default_client() -> Any:
    import boto3  # noqa: PLC0415 - only when no client is given

    from sqsbatch._shell.botocore import client_config  # noqa: PLC0415

    return boto3.client("s3", config=client_config())
