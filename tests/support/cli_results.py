"""Reading a CLI run's result in tests: it worked, or it failed with one `error:` line."""

from __future__ import annotations

from typer.testing import Result


def ok(result: Result) -> Result:
    """The command exited 0 (its output in the message if not)."""
    assert result.exit_code == 0, result.output
    return result


def one_line_error(result: Result, code: int, *words: str) -> str:
    """Exit `code`, one `error:` line on stderr holding every word, and no traceback."""
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    assert all(word in lines[0] for word in words), lines[0]
    return lines[0]
