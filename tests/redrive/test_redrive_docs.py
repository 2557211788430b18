"""docs/redrive.md's examples run: the Python one (an example file) and the TOML one."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from redrive import RedriveStats
from redrive.settings import RedriveSettings
from sqsbatch.dev.server import LocalSqs

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "redrive.md"


def test_the_python_example_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location("redrive_once", ROOT / "examples/redrive_once.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    # A server of its own: the example's queue names are fixed and must not meet other tests'.
    with LocalSqs() as server:
        for key, value in server.environment().items():
            monkeypatch.setenv(key, value)
        stats = example.main()
    assert isinstance(stats, RedriveStats)


def test_the_toml_example_is_valid_settings() -> None:
    [example] = re.findall(r"```toml\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    Path("sqsbatch.toml").write_text(example)
    settings = RedriveSettings()
    assert settings.dlqs == ["orders-dlq", "billing-dlq"]
    assert (settings.rate, settings.parking_queue) == (20, "parked")
