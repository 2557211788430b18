"""Shared fixtures: one moto server on 127.0.0.1 per session, fresh queue names per test."""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from sqsbatch.dev.server import LOCAL_CREDENTIALS, LocalSqs
from tests.support.s3 import new_bucket, s3_client

if TYPE_CHECKING:
    from tests.support.spans import Spans

# Never reach AWS: fake credentials, and no endpoint unless a test sets one.
os.environ.update(LOCAL_CREDENTIALS)
os.environ.pop("AWS_PROFILE", None)
os.environ.pop("SQSBATCH_CONFIG_FILE", None)


@pytest.fixture(scope="session")
def local_sqs() -> Iterator[LocalSqs]:
    with LocalSqs() as server:
        yield server


@pytest.fixture
def sqs(local_sqs: LocalSqs) -> Any:
    """A boto3 SQS client for the session's local endpoint."""
    return local_sqs.client()


@pytest.fixture
def s3(local_sqs: LocalSqs) -> Any:
    """An S3 client on the same local server (large payloads)."""
    return s3_client(local_sqs)


@pytest.fixture
def bucket(s3: Any, name: str) -> str:
    """A fresh bucket named after the test."""
    return new_bucket(s3, name)


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    """A queue name unique to this test (moto keeps queues for the whole session)."""
    stem = re.sub(r"[^A-Za-z0-9-]+", "-", request.node.name)[:40].strip("-")
    return f"{stem}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(autouse=True)
def _no_config_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Settings come from the test, never from a stray sqsbatch.toml or SQSBATCH_* variable."""
    for key in list(os.environ):
        if key.startswith("SQSBATCH_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)


@pytest.fixture(autouse=True)
def _quiet_werkzeug() -> None:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)


@pytest.fixture
def spans() -> Iterator[Spans]:
    """The spans recorded while the test runs (OpenTelemetry's SDK, in memory)."""
    from tests.support.spans import Spans, installed  # noqa: PLC0415 - only where traces are read

    exporter = installed()
    exporter.clear()
    yield Spans(exporter)
    exporter.clear()
