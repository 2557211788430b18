"""Every example file runs (typer's tests/test_tutorial idea): docs that cannot rot."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from sqsbatch import ConsumerConfig, ProducerConfig
from sqsbatch.dev.server import LocalSqs
from tests.support.sqs_helpers import depth

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def local_env(local_sqs: LocalSqs, monkeypatch: pytest.MonkeyPatch) -> Any:
    for key, value in local_sqs.environment().items():
        monkeypatch.setenv(key, value)
    return local_sqs.client()


def test_quickstart_runs(local_env: Any, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    load(ROOT / "examples" / "quickstart.py").main(name, idle_seconds=3)
    printed = capsys.readouterr().out
    assert "'acked': 30" in printed and "'retried': 10" in printed
    assert depth(local_env, name) == 0 and depth(local_env, f"{name}-dlq") == 0


def test_example_settings_file_loads() -> None:
    path = ROOT / "examples" / "sqsbatch.toml"
    config = ConsumerConfig.load("ecs-worker-orders", path)
    assert (config.max_batch_size, config.dead_letter_queue, config.max_receive_count) == (
        30,
        "ecs-worker-orders-dlq",
        4,
    )
    assert ProducerConfig.load("ecs-worker-orders", path).delivery_delay == 0


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("doc", doc_files(), ids=lambda p: p.name)
def test_python_blocks_in_docs_are_example_files(doc: Path) -> None:
    """Each ```python block names its file on its first line and is a verbatim part of it."""
    for block in BLOCK.findall(doc.read_text()):
        first, _, rest = block.partition("\n")
        match = re.fullmatch(r"# (\S+\.py)", first.strip())
        assert match, f"{doc.name}: a python block must start with '# path/to/example.py'"
        source = (ROOT / match.group(1)).read_text()
        assert rest.strip() in source, f"{doc.name}: block drifted from {match.group(1)}"
