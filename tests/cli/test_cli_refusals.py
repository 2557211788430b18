"""Options that only mean something together are refused apart, in one line that says what
would do (issue 27, item 8): `stats --count/--interval` without `--watch`, `health` on a
directory. (`consume --idle-seconds` without `--once`: test_cli_per_message.py.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sqsbatch.cli.app import app
from sqsbatch.local import LocalSqs
from tests.support.cli_results import one_line_error

runner = CliRunner()
SCRIPT = Path(sys.executable).with_name("sqsbatch")


@pytest.mark.parametrize(
    ("given", "named"), [(["--count", "3"], "--count"), (["--interval", "1"], "--interval")]
)
def test_stats_count_and_interval_go_with_watch(
    local_sqs: LocalSqs, given: list[str], named: str
) -> None:
    # refused before any call: the queue need not exist
    args = ["--endpoint-url", local_sqs.endpoint_url, "stats", "never-reached", *given]
    result = runner.invoke(app, args)
    one_line_error(result, 2, f"{named} goes with --watch", "add --watch")


def test_health_on_a_directory_names_a_file(tmp_path: Path) -> None:
    result = runner.invoke(app, ["health", str(tmp_path), "--max-age", "60"])
    one_line_error(result, 2, "is a directory", f"e.g. {tmp_path / 'sqsbatch.health'}")
    (tmp_path / "worker.health").touch()
    result = runner.invoke(app, ["health", str(tmp_path), "--max-age", "60"])
    one_line_error(result, 2, f"e.g. {tmp_path / 'worker.health'}")


def test_health_on_a_directory_as_a_process(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(SCRIPT), "health", str(tmp_path), "--max-age", "60"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "is a directory" in lines[0], done.stderr
