"""bench/fifo_groups.py runs (issue 31, item 3): tiny, both pollers, as a subprocess on its own
local moto server. No figure is asserted: the drains complete, each group in order."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "fifo_groups.py"


def run(args: list[str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(BENCH), *args]
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=300)


def test_the_fifo_bench_drains_every_setting_on_both_pollers_in_order() -> None:
    done = run(["--groups", "3", "--per-group", "2", "--io-ms", "1", "--idle", "1"])
    assert done.returncode == 0, done.stderr[-2000:]
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(results) == 8  # 2 pollers x (by_group, mixed) x (1, 16)
    assert all(result["groups_in_order"] for result in results)


def test_a_bad_option_is_one_line() -> None:
    done = run(["--groups", "0"])
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith("--groups must be at least 1")
    assert "Traceback" not in done.stderr
