"""The poller bench runs: bench/poller.py, tiny, on its stub (no server), as a subprocess.

A bench nobody runs rots: its stub client fell behind the pollers once (they came to read
`client.meta`) and nothing failed. This runs it with a few messages; no figure is asserted.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "poller.py"


def run(args: list[str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(BENCH), *args]
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=120)


def test_the_poller_bench_drains_the_stub_with_every_contender() -> None:
    args = ["--server", "stub", "--messages", "20", "--warmup", "10", "--rounds", "1"]
    args += ["--concurrency", "2", "--extra", "legacy", "validating", "overlapped"]
    done = run(args)
    assert done.returncode == 0, done.stderr[-2000:]
    for name in ("boto3 loop", "boto3 threads", "Consumer", "AsyncConsumer", "deletes beside"):
        assert name in done.stdout


def test_a_bad_option_is_one_line() -> None:
    args = ["--server", "stub", "--bodies", "sqsbatch"]
    done = run(args)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith("the stub's bodies are its own")
    assert "Traceback" not in done.stderr
