"""Which records of a settled batch a Lambda function reports in `batchItemFailures`.

Lambda deletes every record its function leaves out of the partial batch response, so this is
where acks cost no call, and where a FIFO group's order is kept after a failure. Pure: the Lambda
flows (`sqsbatch._core.flows.settle_for_lambda`) decide with it; `sqsbatch._core.lambda_event`
re-exports it as `lambda_event.report`.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass

from sqsbatch._core.ledger import ActionKind

__all__ = ["Report", "report"]


@dataclass(frozen=True)
class Report:
    listed: list[int]
    """Indexes to report in `batchItemFailures`: Lambda leaves them to reappear."""
    delete: list[int]
    """Indexes sqsbatch deletes itself and reports anyway (FIFO: behind a failure of the group)."""


def report(
    kinds: Sequence[ActionKind],
    sent: Set[int],
    groups: Sequence[str | None],
    *,
    fifo: bool,
) -> Report:
    """Which messages of a settled batch to report as failed.

    Acks and drops are left out (Lambda deletes them), hidden retries and messages left to the
    RedrivePolicy are reported, and a re-sent or dead-lettered message is left out only once its
    copy was accepted (`sent`). On a FIFO queue no message is reported as done after an earlier
    failure of its group: one that is settled all the same (an explicit ack, an accepted copy) is
    deleted here and reported. `groups` (each message's group) is read on FIFO queues only.
    """
    listed: list[int] = []
    delete: list[int] = []
    failed_groups: set[str] = set()
    for index, kind in enumerate(kinds):
        if kind is ActionKind.DELETE and not fifo:
            continue  # the common case, decided without a look at the group
        group = groups[index] if fifo else None
        copied = kind in (ActionKind.RESEND, ActionKind.DEAD_LETTER)
        if kind in (ActionKind.HIDE, ActionKind.LEAVE) or (copied and index not in sent):
            listed.append(index)
            if fifo and group is not None:
                failed_groups.add(group)
        elif fifo and group in failed_groups:
            listed.append(index)
            delete.append(index)
    return Report(listed, delete)
