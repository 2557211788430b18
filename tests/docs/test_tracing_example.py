"""examples/tracing.py (quoted in docs/operations.md) runs: in this process with the in-memory
exporter, and as a script of its own, whose console exporter prints the spans it shows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sqsbatch.dev.server import LocalSqs
from tests.support.front_ends import load_example
from tests.support.spans import Spans, installed

ROOT = Path(__file__).resolve().parents[2]


def test_the_example_handles_its_orders_under_a_span_linked_to_both_checkouts(
    local_sqs: LocalSqs, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the SDK set up (as the example's set_up_tracing does), and the example's queue local
    for key, value in local_sqs.environment().items():
        monkeypatch.setenv(key, value)
    spans = Spans(installed())
    spans.clear()

    # When it sends its two orders and handles them
    load_example("tracing").run(name)

    # Then one batch span links to both checkout spans, and both ship spans are its children
    [batch] = spans.named(f"process {name}")
    checkouts = spans.named("checkout")
    assert len(checkouts) == 2
    assert {(link.context.trace_id, link.context.span_id) for link in batch.links} == {
        (span.context.trace_id, span.context.span_id) for span in checkouts if span.context
    }
    ships = [span for span in spans.children(batch) if span.name == "ship"]
    assert sorted((dict(span.attributes or {})["order"] for span in ships), key=str) == [1, 2]
    spans.clear()


def printed_spans(text: str) -> list[dict[str, Any]]:
    """The JSON objects the console exporter printed one after another."""
    decoder, found, at = json.JSONDecoder(), [], 0
    while (at := text.find("{", at)) != -1:
        span, at = decoder.raw_decode(text, at)
        found.append(span)
    return found


def test_the_example_runs_as_a_script_and_prints_its_spans(local_sqs: LocalSqs, name: str) -> None:
    # When the example runs as a script, on its own SDK and console exporter
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "tracing.py"), name],
        env={**os.environ, **local_sqs.environment()},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr

    # Then it printed the checkouts, the batch span linked to them, and the ships under it
    spans = printed_spans(done.stdout)
    by_name: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        by_name.setdefault(span["name"], []).append(span)
    [batch] = by_name[f"process {name}"]
    assert batch["kind"] == "SpanKind.CONSUMER"
    linked = {link["context"]["span_id"] for link in batch["links"]}
    assert linked == {span["context"]["span_id"] for span in by_name["checkout"]}
    assert len(linked) == 2
    assert {span["parent_id"] for span in by_name["ship"]} == {batch["context"]["span_id"]}
