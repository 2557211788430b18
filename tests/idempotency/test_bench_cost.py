"""bench/idempotency_cost.py runs (a bench nobody runs rots): tiny, on moto and dynalite."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support import dynalite

BENCH = Path(__file__).resolve().parents[2] / "bench" / "idempotency_cost.py"


def test_the_cost_bench_reports_every_mode() -> None:
    args = [sys.executable, str(BENCH), "--batches", "3"]
    if dynalite.missing() is None:
        args.append("--dynalite")
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert {line["mode"] for line in lines} == {"carried", "batched", "duplicates"}
    assert all(line["messages"] == 30 for line in lines)


def test_a_bad_option_is_one_line() -> None:
    args = [sys.executable, str(BENCH), "--batches", "0"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith("--batches must be at least 1")
    assert "Traceback" not in done.stderr
