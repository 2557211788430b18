"""`sqsbatch demo --fast`: the whole story end to end, and where every message ended."""

from __future__ import annotations

import json

from rich.console import Console
from typer.testing import CliRunner

from sqsbatch.cli.app import app
from sqsbatch.cli.demo import _summary
from sqsbatch.cli.demo_story import DemoSettings

EXPECTED = {
    # An "ok" message handled twice was moto's receive race (two slots given the same message;
    # fixed in sqsbatch.dev.moto_speedup, tests/dev/test_local_speed.py)
    "ok": {"acked"},
    "flaky": {"acked after retries"},
    "outage": {"acked after redrive"},
    "poison": {"dead-letter queue"},
}


def test_demo_fast_ends_every_message_where_the_story_says() -> None:
    result = CliRunner().invoke(app, ["demo", "--fast", "--json"])
    assert result.exit_code == 0, result.output
    outcome = json.loads(result.stdout)
    settings = DemoSettings.fast()
    assert outcome["complete"] is True
    assert outcome["messages"] == settings.messages == len(outcome["details"])
    for row in outcome["details"]:
        assert row["ended"] in EXPECTED[row["kind"]], row
    by_kind = {kind: sum(counts.values()) for kind, counts in outcome["by_kind"].items()}
    assert set(by_kind) == set(EXPECTED)  # every kind of the story happened
    poison = [row for row in outcome["details"] if row["kind"] == "poison"]
    deliveries = 2 * (settings.max_retries + 1)  # dead-lettered, redriven once, dead-lettered
    assert all(row["deliveries"] >= deliveries for row in poison)
    assert outcome["redrive"]["moved"] >= by_kind["outage"] + by_kind["poison"]
    assert outcome["requests"] == sum(outcome["requests_by_operation"].values()) > 0


def test_the_closing_table_shows_every_kind_and_the_cost() -> None:
    outcome = {
        "messages": 4,
        "seconds": 1.0,
        "requests": 9,
        "requests_per_message": 2.25,
        "requests_by_operation": {"ReceiveMessage": 5, "SendMessageBatch": 4},
        "ended": {"acked": 2, "acked after redrive": 1, "dead-letter queue": 1},
        "by_kind": {
            "ok": {"acked": 2},
            "outage": {"acked after redrive": 1},
            "poison": {"dead-letter queue": 1},
        },
    }
    console = Console(width=200, record=True)
    console.print(_summary(outcome))
    text = console.export_text()
    assert "where 4 messages ended" in text and "2.25 per message" in text
    assert "acked after redrive" in text and "ReceiveMessage 5" in text
