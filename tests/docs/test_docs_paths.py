"""The README and docs/ name files of this repository (modules, benches, examples, tests) and
link to one another: every such path exists, so a file that moves takes its mentions along."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MENTION = re.compile(
    r"\b((?:sqsbatch|bench|examples|tests|docs|infra|redrive|scripts)/[\w./-]+\.(?:py|md|toml|json))"
)
LINK = re.compile(r"\]\(([\w./-]+\.md)(?:#[\w-]*)?\)")
ELSEWHERE = {"tests/events/sqsEvent.json"}
"""Paths the pages name in other repositories (this one is Powertools' sample event)."""


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_path_a_page_names_exists(page: Path) -> None:
    text = page.read_text()
    named = {path for path in MENTION.findall(text) if path not in ELSEWHERE}
    linked = {str((page.parent / link).resolve().relative_to(ROOT)) for link in LINK.findall(text)}
    missing = sorted(path for path in named | linked if not (ROOT / path).exists())
    assert not missing, f"{page.name} names files that do not exist: {missing}"
