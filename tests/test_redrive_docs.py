"""Every Python and TOML example of docs/redrive.md runs, against a local SQS of its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from redrive.settings import RedriveSettings
from sqsbatch.local import LocalSqs

DOC = Path(__file__).resolve().parent.parent / "docs" / "redrive.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), flags=re.DOTALL)


def test_the_python_example_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    [example] = blocks("python")
    # A server of its own: the example's queue names are fixed and must not meet other tests'.
    with LocalSqs() as server:
        for key, value in server.environment().items():
            monkeypatch.setenv(key, value)
        namespace: dict[str, object] = {}
        exec(compile(example, str(DOC), "exec"), namespace)
    assert namespace["stats"].__class__.__name__ == "RedriveStats"


def test_the_toml_example_is_valid_settings() -> None:
    [example] = blocks("toml")
    Path("sqsbatch.toml").write_text(example)
    settings = RedriveSettings()
    assert settings.dlqs == ["orders-dlq", "billing-dlq"]
    assert (settings.rate, settings.parking_queue) == (20, "parked")
