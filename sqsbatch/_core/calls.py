"""Batch calls without I/O: chunking, per-entry reconciliation and entry retries.

A `BatchRun` takes entries (one message to send, delete or hide), groups them into calls of at
most 10 entries (and 1 MiB for sends) per queue and operation, and reads each response entry by
entry: `Successful` entries are done, `Failed` ones are retried when SQS says the fault is not the
sender's, counted as gone when the receipt handle no longer holds, and failed otherwise. The
shells only execute `next_calls()` and feed the responses back, so every front end batches and
reconciles the same way. SQS's message for a failed entry is kept `redact`ed (it may quote the
entry's receipt handle in full), as `_botocore.translate` does for a failed call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqsbatch._core.delays import round_pause
from sqsbatch._core.shapes import redact
from sqsbatch.limits import SQS_LIMITS, SqsLimits

__all__ = ["GONE_CODES", "BatchRun", "Call", "Entry", "EntryResult", "accepted_whole"]

# What SQS and its emulators answer for a receipt handle whose message was deleted or whose
# visibility expired: the message may be redelivered; it is no error of ours.
GONE_CODES = frozenset(
    {
        "ReceiptHandleIsInvalid",
        "InvalidParameterValue",
        "MessageNotInflight",
        "AWS.SimpleQueueService.MessageNotInflight",
    }
)
_RECEIPT_OPS = frozenset({"delete_message_batch", "change_message_visibility_batch"})


@dataclass(slots=True)
class Entry:
    """One entry of a batch call. `key` is the caller's name for it, unique within a run.

    Entries and their results are made per message on the hot path, so they are not frozen: a
    frozen dataclass sets each field through `object.__setattr__`, which costs several times as
    much to make one (docs/performance.md); nothing changes one once made.
    """

    key: str
    op: str
    queue_url: str
    params: Mapping[str, Any]
    size: int = 0


@dataclass(frozen=True, slots=True)
class Call:
    op: str
    queue_url: str
    entries: tuple[Entry, ...]

    def params(self) -> dict[str, Any]:
        return {
            "QueueUrl": self.queue_url,
            "Entries": [{"Id": str(i), **entry.params} for i, entry in enumerate(self.entries)],
        }


@dataclass(slots=True)
class EntryResult:
    key: str
    ok: bool
    value: Mapping[str, Any] = field(default_factory=dict)
    code: str | None = None
    message: str | None = None
    gone: bool = False
    """A delete or visibility change whose receipt handle no longer holds (the message may be
    redelivered): no error of ours. A send refused with the same codes is a real failure."""


class BatchRun:
    """Executes entries as batch calls, reconciled per entry, retrying what is worth it."""

    def __init__(
        self, entries: Iterable[Entry], *, limits: SqsLimits = SQS_LIMITS, max_rounds: int = 3
    ) -> None:
        self._pending: list[Entry] = list(entries)
        keys = [entry.key for entry in self._pending]
        if len(set(keys)) != len(keys):
            raise ValueError("entry keys must be unique within a run")
        self._limits = limits
        self._max_rounds = max_rounds
        self.rounds = 0
        self.results: dict[str, EntryResult] = {}
        self._refused = False  # an entry failed, or a call did, in some round

    def next_calls(self) -> list[Call]:
        """The calls of the next round; empty when everything is settled or rounds ran out."""
        if not self._pending:
            return []
        if self.rounds >= self._max_rounds:
            for entry in self._pending:
                self.results.setdefault(entry.key, EntryResult(entry.key, False, code="GaveUp"))
            self._pending = []
            return []
        self.rounds += 1
        entries, self._pending = self._pending, []
        return list(_chunk(entries, self._limits))

    def backoff_seconds(self) -> float:
        """How long to wait before executing the current round (0 for the first)."""
        return round_pause(self.rounds)

    def record(self, call: Call, response: Mapping[str, Any]) -> None:
        """Feed back the response of `call`, entry by entry."""
        entries, results = call.entries, self.results
        if accepted_whole(response, len(entries)):  # the common case
            for item in response["Successful"]:
                key = entries[int(item["Id"])].key
                results[key] = EntryResult(key, True, item)
            return
        answered: set[int] = set()
        for item in response.get("Successful", []):
            index = int(item["Id"])
            answered.add(index)
            entry = call.entries[index]
            self.results[entry.key] = EntryResult(entry.key, True, dict(item))
        for item in response.get("Failed", []):
            index = int(item["Id"])
            answered.add(index)
            self._failed(call.op, call.entries[index], item)
            self._refused = True
        for index, entry in enumerate(call.entries):
            if index not in answered:  # never trust a batch to have worked as a whole
                self._pending.append(entry)
                self._refused = True

    def record_error(self, call: Call, code: str | None, message: str, *, retryable: bool) -> None:
        """The whole call failed (after botocore's own retries)."""
        gone = _is_gone(call.op, code)
        self._refused = True
        for entry in call.entries:
            if retryable and not gone:
                self._pending.append(entry)
            result = EntryResult(entry.key, False, code=code, message=message, gone=gone)
            self.results[entry.key] = result

    @property
    def done(self) -> bool:
        return not self._pending

    @property
    def clean(self) -> bool:
        """Every entry accepted, each on its first try: nothing to reconcile entry by entry."""
        return not self._pending and not self._refused

    def ok(self) -> list[EntryResult]:
        return [result for result in self.results.values() if result.ok]

    def failed(self) -> list[EntryResult]:
        return [result for result in self.results.values() if not result.ok]

    def _failed(self, op: str, entry: Entry, item: Mapping[str, Any]) -> None:
        code = str(item.get("Code", "Unknown"))
        message = item.get("Message")
        gone = _is_gone(op, code)
        text = redact(str(message)) if message else None
        self.results[entry.key] = EntryResult(entry.key, False, code=code, message=text, gone=gone)
        if gone:
            return
        if not item.get("SenderFault", False):
            self._pending.append(entry)


def accepted_whole(response: Mapping[str, Any], size: int) -> bool:
    """Whether a batch call's answer accepts each of its `size` entries, and nothing failed."""
    if response.get("Failed"):
        return False
    return len({item["Id"] for item in response.get("Successful", ())}) == size


def _is_gone(op: str, code: str | None) -> bool:
    return op in _RECEIPT_OPS and code in GONE_CODES


def _chunk(entries: Sequence[Entry], limits: SqsLimits) -> Iterable[Call]:
    op, url, step = entries[0].op, entries[0].queue_url, limits.max_entries
    if all(entry.op == op and entry.queue_url == url and not entry.size for entry in entries):
        for start in range(0, len(entries), step):  # one queue and operation, no payload
            yield Call(op, url, tuple(entries[start : start + step]))
        return
    groups: dict[tuple[str, str], list[Entry]] = {}
    for entry in entries:
        groups.setdefault((entry.op, entry.queue_url), []).append(entry)
    for (op, queue_url), group in groups.items():
        chunk: list[Entry] = []
        size = 0
        for entry in group:
            if chunk and (
                len(chunk) == limits.max_entries or size + entry.size > limits.max_payload_bytes
            ):
                yield Call(op, queue_url, tuple(chunk))
                chunk, size = [], 0
            chunk.append(entry)
            size += entry.size
        if chunk:
            yield Call(op, queue_url, tuple(chunk))
