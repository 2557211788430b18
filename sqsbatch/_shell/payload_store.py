"""A consumer's large payloads in S3 (`sqsbatch._core.fetching.PayloadStore`): a boto3 S3 client
made when the first offloaded message arrives, from the consumer's SQS client's settings.

The client: boto3's, in the consumer's region (the SQS client's), at the SQS client's endpoint
when that is not AWS's own (a local server such as moto's serves S3 on the same endpoint);
`AWS_ENDPOINT_URL_S3` and `AWS_ENDPOINT_URL` override it as boto3 reads them. Credentials: boto3's
default chain. A consumer that never receives an offloaded message makes no S3 client at all.
The calls run on a worker thread under the async poller (the doors run `Outside` calls so).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from sqsbatch._shell.s3_payloads import S3Objects
from sqsbatch.errors import PayloadError

__all__ = ["PayloadStore", "payload_store", "s3_settings"]


class PayloadStore:
    """`get` and `delete` on an S3 client made on first use (`make_client`); every failure,
    making the client included, is a `PayloadError` (`PayloadMissing`: the object is gone)."""

    def __init__(self, make_client: Callable[[], Any], *, keep: bool = False) -> None:
        self._make_client = make_client
        self._keep = keep
        self._objects: S3Objects | None = None
        self._lock = threading.Lock()

    @property
    def keep(self) -> bool:
        return self._keep

    @property
    def used(self) -> bool:
        """An offloaded message came (the S3 client is made): until then a settle has no
        object to delete, and skips looking for one."""
        return self._objects is not None

    @property
    def requests(self) -> int:
        """S3 requests made so far (none until the first offloaded message)."""
        return 0 if self._objects is None else self._objects.requests

    def get(self, bucket: str, key: str) -> bytes:
        return self._s3().get(bucket, key)

    def delete(self, objects: Sequence[tuple[str, str]]) -> list[str]:
        return self._s3().delete(objects)

    def _s3(self) -> S3Objects:
        with self._lock:
            if self._objects is None:
                try:
                    self._objects = S3Objects(self._make_client())
                except Exception as exc:  # no region, no credentials, a bad endpoint
                    raise PayloadError(f"no S3 client for large payloads: {exc}") from exc
            return self._objects


def s3_settings(sqs_client: Any) -> dict[str, Any]:
    """`region_name` and `endpoint_url` for an S3 client beside `sqs_client` (boto3's or
    aiobotocore's; None: the environment's): its endpoint only when it is not AWS's."""
    settings: dict[str, Any] = {}
    meta = getattr(sqs_client, "meta", None)
    if meta is None:
        return settings
    settings["region_name"] = meta.region_name
    endpoint = str(meta.endpoint_url or "")
    host = urlsplit(endpoint).hostname or ""
    own = not os.environ.get("AWS_ENDPOINT_URL_S3") and not os.environ.get("AWS_ENDPOINT_URL")
    if endpoint and own and not host.endswith(("amazonaws.com", "amazonaws.com.cn")):
        settings["endpoint_url"] = endpoint
    return settings


def payload_store(sqs_client: Callable[[], Any], *, keep: bool = False) -> PayloadStore:
    """A store whose S3 client, made on first use, sits beside the SQS client `sqs_client()`
    returns then (`s3_settings`)."""

    def make() -> Any:
        import boto3  # noqa: PLC0415 - only once an offloaded message arrives

        from sqsbatch._shell.botocore import client_config  # noqa: PLC0415

        return boto3.session.Session().client(
            "s3", config=client_config(), **s3_settings(sqs_client())
        )

    return PayloadStore(make, keep=keep)
