"""README.md is a first page, not a lab notebook: short, `pip install sqsbatch` on its first
screen, the two quick-start commands, a cost summary of a few lines, and no run-by-run figures
(no dates, no clock times: those live in docs/performance.md's log)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DATE = re.compile(r"(?<!\d)\d{4}-\d{2}-\d{2}(?!\d)")
CLOCK = re.compile(r"(?<![\d:.])\d{1,2}:\d{2}(?::\d{2})?(?![\d:])")


def lines() -> list[str]:
    return README.read_text().splitlines()


def section(title: str) -> list[str]:
    text = lines()
    start = text.index(f"## {title}")
    after = [i for i, line in enumerate(text[start + 1 :], start + 1) if line.startswith("## ")]
    return text[start : after[0] if after else len(text)]


def test_the_readme_is_at_most_250_lines() -> None:
    assert len(lines()) <= 250


def test_pip_install_is_on_the_first_screen() -> None:
    assert any("pip install sqsbatch" in line for line in lines()[:40])


def test_no_dates_or_clock_times() -> None:
    found = [
        f"line {n}: {match}"
        for n, line in enumerate(lines(), 1)
        for match in DATE.findall(line) + CLOCK.findall(line)
    ]
    assert not found, f"README.md has dates or clock times (docs/performance.md's log): {found}"


def test_the_patterns_catch_what_they_are_for() -> None:
    assert DATE.findall("on 2026-11-25, 23:49") == ["2026-11-25"]
    assert CLOCK.findall("on 2026-11-25, 23:49; at 11:02 and 8:05:59") == [
        "23:49",
        "11:02",
        "8:05:59",
    ]
    assert not CLOCK.findall("http://127.0.0.1:4566 --filter error:TimeoutError 0.2:1")


def test_the_quick_start_is_make_demo_and_make_test() -> None:
    text = README.read_text()
    assert re.search(r"^make demo\b", text, re.M) and re.search(r"^make test\b", text, re.M)


def test_the_cost_summary_is_at_most_25_lines() -> None:
    cost = section("What it costs")
    assert len(cost) <= 25, f"the cost section has {len(cost)} lines"
    assert "docs/performance.md" in "\n".join(cost)
