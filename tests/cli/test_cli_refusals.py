"""Options that only mean something together are refused apart, in one line that says what
would do (issue 27, item 8): `stats --count/--interval` without `--watch`, `health` on a
directory; and an unknown SQSBATCH_*/REDRIVE_* variable is a WARNING at start. (`consume
--idle-seconds` without `--once`: test_cli_per_message.py.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from redrive.cli import app as redrive_app
from sqsbatch.cli.app import app
from sqsbatch.dev.server import LocalSqs
from tests.support.cli_results import one_line_error
from tests.support.redrive import make_queues

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


def test_consume_and_redrive_warn_of_an_unknown_variable_at_start(
    local_sqs: LocalSqs, name: str, tmp_path: Path
) -> None:
    sqs = local_sqs.client()
    source, dlq = make_queues(sqs, name)
    (tmp_path / "refusal_handlers.py").write_text("def handle(batch):\n    pass\n")
    where = ["--endpoint-url", local_sqs.endpoint_url]
    args = ["consume", "refusal_handlers:handle", "-q", source, "--once", "--idle-seconds", "0.2"]
    env = {"SQSBATCH_VISIBILITY_TIMOUT": "60"}
    result = runner.invoke(app, [*where, *args, "--log-format", "plain"], env=env)
    assert result.exit_code == 0, result.output
    assert (
        "WARNING sqsbatch: unknown environment variable SQSBATCH_VISIBILITY_TIMOUT is ignored "
        "(did you mean 'SQSBATCH_VISIBILITY_TIMEOUT'?)"
    ) in result.stderr
    env = {"REDRIVE_BASE_DELEY": "0"}
    result = runner.invoke(redrive_app, ["run", "--once", "--dlq", dlq, *where], env=env)
    assert result.exit_code == 0, result.output
    assert "unknown environment variable REDRIVE_BASE_DELEY is ignored" in result.stderr
    assert "(did you mean 'REDRIVE_BASE_DELAY'?)" in result.stderr
