"""Without the `otel` extra nothing changes and nothing of OpenTelemetry is imported; with the
API but no SDK, every batch is untraced (`tracing.OFF`), unless the environment names a
provider. Each case in a process of its own (`tests/support/untraced.py`): this one has the SDK
set up by the other trace tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sqsbatch.dev.server import LocalSqs

ROOT = Path(__file__).resolve().parents[2]
EVERY_FRONT_END = {name: [1, 2] for name in ("sync", "async", "lambda", "lambda-async")}


def untraced(mode: str, local_sqs: LocalSqs) -> dict[str, object]:
    environment = {**os.environ, **local_sqs.environment(), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.untraced", mode],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("mode", ["missing", "unused"])
def test_without_opentelemetry_everything_works_and_nothing_of_it_is_imported(
    mode: str, local_sqs: LocalSqs
) -> None:
    # Given OpenTelemetry not installed (imports refused), or installed and never imported
    # When both producers send and every front end consumes
    result = untraced(mode, local_sqs)
    # Then every message was handled, and no module of OpenTelemetry's was imported
    assert result == {"handled": EVERY_FRONT_END, "off": True, "imported": []}


def test_with_the_api_but_no_sdk_every_batch_is_untraced(local_sqs: LocalSqs) -> None:
    # Given the API imported, and no tracer provider set
    # When both producers send and every front end consumes
    result = untraced("idle", local_sqs)
    # Then every message was handled, each batch untraced
    assert result["handled"] == EVERY_FRONT_END
    assert result["off"] is True
    assert "opentelemetry.trace" in result["imported"]  # type: ignore[operator]


def test_a_provider_named_only_in_the_environment_is_used(local_sqs: LocalSqs) -> None:
    # Given the SDK's provider named in OTEL_PYTHON_TRACER_PROVIDER, never set in code
    # When both producers send and every front end consumes
    result = untraced("environment", local_sqs)
    # Then every message was handled, and batches are traced
    assert result["handled"] == EVERY_FRONT_END
    assert result["off"] is False
