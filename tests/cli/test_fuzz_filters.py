"""Property tests: the CLI's `--filter` language, fuzzed, and the messages it reads."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import typer
from hypothesis import event as outcome
from hypothesis import example, given
from hypothesis import strategies as st

from sqsbatch._core.envelope import FOREIGN, DecodedMessage, Envelope, ErrorInfo
from sqsbatch.cli.filters import parse_filters
from tests.support.fuzzing import FUZZ

prefixes = st.sampled_from(["", "!", "!!", "body:", "re:", "attr:", "error:", "!re:", "x:"])
expressions = st.tuples(prefixes, st.text(max_size=12)).map("".join)
attributes = st.dictionaries(
    st.text(max_size=4), st.text(max_size=4) | st.binary(max_size=4), max_size=3
)
errors = st.none() | st.builds(ErrorInfo, st.text(max_size=12), st.text(max_size=4), st.just(0.0))


def message(body: str, attrs: dict[str, Any], error: ErrorInfo | None) -> DecodedMessage:
    envelope = FOREIGN if error is None else Envelope(error=error)
    return DecodedMessage(
        id="m",
        body=body,
        timestamp=datetime.fromtimestamp(0, UTC),
        attempts=1,
        attributes=attrs,
        envelope=envelope,
        raw_body=body,
        raw_attributes={},
        group_id=None,
    )


@FUZZ
@given(st.lists(expressions, max_size=3), st.text(max_size=20), attributes, errors)
@example(["!" * 5000 + "x"], "x", {}, None)  # RecursionError in the parser
@example(["re:("], "", {}, None)
@example(["attr:="], "", {}, None)
@example(["error:"], "", {}, None)
def test_any_filter_parses_or_is_refused_in_one_line(
    exprs: list[str], body: str, attrs: dict[str, Any], error: ErrorInfo | None
) -> None:
    try:
        select = parse_filters(exprs)
    except typer.BadParameter as exc:
        assert "\n" not in str(exc)
        outcome("refused: BadParameter")
        return
    # And a filter that parses reads any message without an error
    matched = select is None or select(message(body, attrs, error))
    outcome(f"parsed, matched={matched}")
    assert isinstance(matched, bool)
