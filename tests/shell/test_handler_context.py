"""A sync handler runs on a thread of its own, in a copy of its caller's context (`contextvars`),
as an `async def` handler's task does: what the caller made current (a trace's span) is current
in the handler too."""

from __future__ import annotations

from contextvars import ContextVar

from sqsbatch._shell.handler_tasks import run_in_thread

CURRENT: ContextVar[str] = ContextVar("CURRENT")


def test_a_sync_handler_sees_its_callers_context_and_changes_only_its_copy() -> None:
    # Given a caller that set a context variable
    CURRENT.set("the batch's span")
    seen: list[str | None] = []

    def handler(batch: object) -> None:
        seen.append(CURRENT.get(None))
        CURRENT.set("the handler's own")

    # When it runs a sync handler on a handler thread
    timed_out, error = run_in_thread(handler, None, budget=5.0)

    # Then the handler saw the caller's value, and its own change stayed in its copy
    assert (timed_out, error) == (False, None)
    assert seen == ["the batch's span"]
    assert CURRENT.get() == "the batch's span"
