"""The boundary with botocore: client configuration and error translation.

botocore's exceptions are translated here, and only here, into the tree of `sqsbatch.errors`
(most specific class first, `raise ... from` so the original stays on `__cause__`), with what
SQS says `redact`ed (`sqsbatch._core.shapes`). The doors (`sqsbatch._sync.door`,
`sqsbatch._async.door`) call SQS inside `sqs_errors`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ReadTimeoutError,
)

from sqsbatch._core.shapes import redact
from sqsbatch.errors import CredentialsError, QueueNotFound, SqsBatchError, SqsError

__all__ = [
    "BOTOCORE_ERRORS",
    "LONG_POLL_SECONDS",
    "MARGIN_SECONDS",
    "checks_answers",
    "client_config",
    "no_retries_once",
    "not_sqs",
    "receives_fail_fast",
    "sqs_errors",
    "translate",
]

log = logging.getLogger("sqsbatch")

_QUEUE_MISSING = frozenset({"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"})
_BAD_CREDENTIALS = frozenset(
    {"InvalidClientTokenId", "UnrecognizedClientException", "SignatureDoesNotMatch"}
)
_NETWORK = (EndpointConnectionError, ConnectionClosedError, ReadTimeoutError, ConnectTimeoutError)


LONG_POLL_SECONDS = 20
"""SQS's longest long poll (`WaitTimeSeconds`)."""
MARGIN_SECONDS = 10.0
"""How long past its wait a call may stay silent (the `read_timeout_margin` setting)."""


def client_config(
    *,
    max_pool_connections: int = 10,
    long_poll_seconds: float = LONG_POLL_SECONDS,
    margin_seconds: float = MARGIN_SECONDS,
    validate: bool = True,
) -> Config:
    """botocore's standard retry mode (throttling and 5xx, with backoff), a pool that fits, and
    timeouts so that no call can hang its loop.

    `validate=False` turns botocore's client-side parameter validation off, which botocore's
    `Config` documents as a choice "for performance reasons" (docs/performance.md measures what
    it saves). The consumers' own clients (pollers, Lambda adapter) take it,
    as every request they send is built by sqsbatch from SQS's own answers; a client that sends
    what a user typed or passed (the producers, the CLI) keeps it, so that a wrong type is a
    clear error before the request leaves. SQS validates every request either way.

    botocore's `read_timeout` is per client, not per call, and one client serves the long polls
    and the short calls alike: it is the longest long poll plus `margin_seconds`, which is what
    a `ReceiveMessage` needs and a ceiling for the others (a delete that never answers is noticed
    after that long, once per attempt). `connect_timeout` is the margin: an endpoint that takes
    longer to accept a connection is not answering. An endpoint that accepts and never answers
    thus costs at most `max_attempts` times the read timeout, not forever.
    """
    return Config(
        retries={"mode": "standard", "max_attempts": 5},
        max_pool_connections=max(10, max_pool_connections),
        read_timeout=long_poll_seconds + margin_seconds,
        connect_timeout=margin_seconds,
        parameter_validation=validate,
    )


def receives_fail_fast(client: Any) -> Any:
    """`client` (boto3 or aiobotocore), with botocore's own retries of a `ReceiveMessage` that
    timed out turned off: the poller's receive flow retries it after its own pause, so a silent
    endpoint is noticed (the health file goes stale) after one read timeout, not after
    `max_attempts` of them with backoff. Other calls keep botocore's retries."""
    client.meta.events.register_first("needs-retry.sqs.ReceiveMessage", _receive_gives_up)
    return client


def _receive_gives_up(caught_exception: BaseException | None = None, **_: Any) -> None:
    if isinstance(caught_exception, ReadTimeoutError):
        raise caught_exception


def no_retries_once(client: Any, when: Callable[[], bool], *, key: str) -> Any:
    """`client`, with botocore's own retries of a call that failed (a timeout, a connection
    that could not be made) turned off once `when()` is true: a poller whose watchdog fired
    gives each call one attempt. `key` registers the hook once per caller."""

    def gives_up(caught_exception: BaseException | None = None, **_: Any) -> None:
        if caught_exception is not None and when():
            raise caught_exception

    client.meta.events.register_first("needs-retry.sqs", gives_up, unique_id=key)
    return client


SUMMARY_CHARS = 200
"""The longest summary of an answer that is not SQS's (`not_sqs`)."""


def checks_answers(client: Any) -> Any:
    """`client` (boto3 or aiobotocore), refusing an answer that is not SQS's JSON (a proxy's or
    a captive portal's HTML page, an XML error) with a one-line `SqsError` that summarises it,
    even when its HTTP status says success (botocore would read it as an empty answer)."""
    client.meta.events.register("before-parse.sqs", _refuse_markup)
    return client


def _refuse_markup(
    response_dict: dict[str, Any] | None = None, operation_model: Any = None, **_: Any
) -> None:
    protocol = getattr(getattr(operation_model, "service_model", None), "resolved_protocol", None)
    if not response_dict or protocol not in (None, "json"):  # XML is SQS's own under `query`
        return
    body = response_dict.get("body")
    if isinstance(body, bytes | bytearray):
        found = not_sqs(int(response_dict.get("status_code", 0)), bytes(body))
        if found is not None:
            raise SqsError(found[1], code=found[0])


def not_sqs(status: int, body: bytes | str) -> tuple[str, str] | None:
    """(error code, one line of at most `SUMMARY_CHARS`) for an answer that is markup (HTML, or
    XML where SQS answers JSON): the status, the error's code and message or the page's title;
    None for anything else."""
    if isinstance(body, bytes):
        head = body[:8192].lstrip()
        if not head.startswith(b"<"):
            return None  # SQS's JSON (every answer on the hot path): nothing decoded
        text = head.decode("utf-8", "replace")
    else:
        text = body[:8192].lstrip()
        if not text.startswith("<"):
            return None
    code, message = _tag(text, "Code"), _tag(text, "Message")
    title = _tag(text, "title") or _tag(text, "h1")
    if code:
        what = f"an XML error {code}" + (f": {message}" if message else "")
    elif title or "<html" in text[:512].lower():
        what = "an HTML page" + (f" titled {title!r}" if title else "")
    else:
        what = "XML"
    line = f"the endpoint did not answer as SQS does: HTTP {status}, {what}"
    if len(line) > SUMMARY_CHARS:
        line = line[: SUMMARY_CHARS - 1] + "…"
    return code or f"HTTP{status}", redact(line)


def _tag(text: str, tag: str) -> str:
    found = re.search(rf"<{tag}(?:\s[^>]*)?>(.*?)</{tag}>", text, re.IGNORECASE | re.DOTALL)
    return " ".join(found.group(1).split()) if found else ""


def translate(exc: BaseException, *, queue: str | None = None) -> SqsBatchError:
    """The sqsbatch error for a botocore exception."""
    where = f" ({queue})" if queue else ""
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return CredentialsError(f"no AWS credentials found{where}: {exc}", code="NoCredentials")
    if isinstance(exc, NoRegionError):
        hint = "set AWS_REGION or --region"
        return CredentialsError(f"no AWS region configured ({hint})", code="NoRegion")
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", "Unknown"))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        markup = not_sqs(int(status or 0), str(error.get("Message", "")))
        if markup is not None:  # a proxy's answer, not SQS's: summarised, never dumped
            return SqsError(f"{markup[1]}{where}", code=markup[0])
        message = redact(str(error.get("Message", ""))) or code
        if code in _QUEUE_MISSING:
            return QueueNotFound(f"queue does not exist{where}", code=code)
        if code in _BAD_CREDENTIALS:
            return CredentialsError(f"AWS refused the credentials{where}: {message}", code=code)
        return SqsError(f"SQS error {code}{where}: {message}", code=code)
    if isinstance(exc, _NETWORK):
        return SqsError(f"cannot reach SQS{where}: {redact(str(exc))}", code="NetworkError")
    if isinstance(exc, BotoCoreError):
        return SqsError(f"SQS client error{where}: {redact(str(exc))}", code=type(exc).__name__)
    raise TypeError(f"not a botocore error: {exc!r}")


BOTOCORE_ERRORS = (ClientError, BotoCoreError)
"""What `translate` translates."""


@contextmanager
def sqs_errors(queue: str | None = None) -> Iterator[None]:
    """Translate botocore's exceptions raised inside the block."""
    try:
        yield
    except BOTOCORE_ERRORS as exc:
        raise translate(exc, queue=queue) from exc
