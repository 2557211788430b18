"""Keep the embedded local SQS fast as queues grow: a narrow patch of moto 5.2, in this process.

`LocalSqs.start()` applies it (once per process; `apply()` is idempotent). Why: moto 5.2 checks
every message a ReceiveMessage returns against the queue's retention period by asking
`get_queue_attributes()` for it, which recounts the whole queue three times (the
ApproximateNumberOfMessages* counters), reading moto's clock (`unix_time()`, which builds two
datetimes) once or twice per message counted; SendMessage recounts the queue once per message
too (it reads ContentBasedDeduplication from the same attribute dict). So a receive costs time
in proportion to the queue's depth, and filling a queue is quadratic. bench/local_depth.py
measures it (figures: docs/performance.md).

Replaced, and nothing else; each gives moto's answer from the same fields:
- `SQSBackend.is_message_valid_based_on_retention_period`: the message's sent time plus the
  queue's MessageRetentionPeriod against moto's clock, at constant cost (no recount).
- `Queue.messages`, `Queue.approximate_number_of_messages_delayed` and
  `Queue.approximate_number_of_messages_not_visible`: the same filters as moto's
  `Message.visible`/`Message.delayed`, with one clock read per scan instead of one or two per
  message (still one pass over the queue, without the clock reads).
The clock is moto's, looked up in `moto.sqs.models` at each call, so a test that patches
`moto.sqs.models.unix_time`/`unix_time_millis` moves these checks as it moves moto's.

And one fix, since the local SQS serves concurrent pollers: `Queue.delete_message` runs moto's own
code holding the queue's `_messages_lock`, under which moto's `add_message` appends. moto rebuilds
the queue's list without the deleted message and assigns it back, unlocked; moto's threaded
server runs requests at once, so two deletes of a poller's slots could each rebuild the list from
the same old one, and whichever assigned last brought the other's messages back (deleted, by
every account of moto's answer, yet in the queue again, for good: moto ignores a receipt handle
it has deleted); a send appended during a rebuild was lost. Seen once in a test run under load:
60 messages acked and deleted without an error, 10 of them still in the queue.

And four of moto's receive (`SQSBackend.receive_message`), which pollers with many slots hit.
It checks that a message is visible, then marks it received, unlocked: two receives at once
could both return it (the second with a receive count of 2, milliseconds after the first; the
demo's four slots handled an "ok" message twice in about one run of 75 under load). On FIFO
queues (issue 31) it reads which groups are in flight once, at its start, then marks what
it takes, unlocked: two receives at once could each take messages of one group, the group's
first in one and its next in the other (seen in bench/fifo_groups.py, 1 drain in 6 at 16 slots:
a group handled out of order). Its long poll keeps that first reading for the whole wait, so a
group freed meanwhile (its messages deleted) is not seen until the next receive. And that poll
waits for "any visible message", which returns at once while the visible ones are of groups in
flight: it spun, pass after pass, for the whole wait (16 receives held a moto server at 17 of 20
CPU seconds in one drain). The replacement runs moto's own receive without a wait, one pass at a
time, under the queue's lock (the one `add_message` sends under); between passes a long poll
waits, the lock released, for a send or a delete (the patched delete notifies), at most a
second, and ends at its deadline without another pass, as moto's does (a pass after it handed
out messages whose visibility had just run out): each pass reads the groups in flight afresh,
and nothing spins.

Guard: only moto 5.2.x whose replaced members, and the members their answers rely on, have
exactly the source this was written against (sha256 of each: moto 5.2.5, the pinned one; all but
`receive_message` are the same in 5.2.0 to 5.2.3). Any other moto runs unpatched (slower as
queues grow, and with those races) after one warning line; the tests
(tests/dev/test_local_speed.py) fail if the pinned moto no longer fits.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import logging
import re
import textwrap
import threading
from typing import Any

__all__ = ["WRITTEN_FOR", "apply", "is_applied", "misfit", "original", "revert"]

log = logging.getLogger("sqsbatch")

WRITTEN_FOR = "moto>=5.2,<5.3"
_MINOR = (5, 2)

Member = tuple[str, str]  # (class in moto.sqs.models, attribute)

# sha256 of each member's dedented source, as in moto 5.2.0 to 5.2.3 and 5.2.5.
_REPLACED: dict[Member, str] = {
    ("SQSBackend", "is_message_valid_based_on_retention_period"): (
        "9c430561cf6d7cb41f2a0c147bd697a94b4ca23265bc0dea6253a16ea103c493"
    ),
    ("Queue", "messages"): "67cdc0178b71ab4cd5a2187379cdac934c0439d55d90c59882c36aebd40b14aa",
    ("Queue", "approximate_number_of_messages_delayed"): (
        "e69b37fb977867ed12504a7986c63e27b14962778677b357cefa8b7c49b764e3"
    ),
    ("Queue", "approximate_number_of_messages_not_visible"): (
        "e411bdffb39107eed0fe09295315434e1e621201ebe44636d694423734f4d57b"
    ),
    ("Queue", "delete_message"): (
        "9c3d8164626a09868c0cb3bec31169f5fed7116aa1ef5998bd49bf27b8de03b2"
    ),
    ("SQSBackend", "receive_message"): (  # this one checked against 5.2.5 only
        "79cac41881a077fd1837ee15783296df9545361d05925dc9b5f71c2134d26730"
    ),
}
# Not replaced, but the replacements give the same answers only while these stay as they are.
_RELIED_ON: dict[Member, str] = {
    ("Message", "visible"): "1abcc7861b9a4c5b0c3be942fe350954284299399d4b2f6db6161b685cfc74d9",
    ("Message", "delayed"): "815515980283b0b02234403fceaaa7381e8ddbb3cfa7f2b29a7c8ac3c53ff2eb",
    ("Queue", "attributes"): "ddf03540564891aa86180cfebb4a8b4eca6fbb0ba4a8f09c5ffdada0038ff8a0",
    ("SQSBackend", "get_queue_attributes"): (
        "727161e889b12278a21745a1ede407a15d6f302bbd2bbb1a916503353c438e24"
    ),
    ("Queue", "add_message"): "2ea74b872868bc9788fb86b500c6c6688d73ad7df870936b8cb3f39167ffda1e",
}

_lock = threading.Lock()
_originals: dict[Member, Any] = {}  # moto's own members, while the patch is applied
_warned: set[str] = set()


def apply(moto_version: str | None = None) -> bool:
    """Patch moto once per process; True if it is patched. Another moto: False, one warning line.

    `moto_version` is the installed one unless given (the tests pretend another).
    """
    with _lock:
        if _originals:
            return True
        reason = misfit(moto_version or _installed_moto_version())
        if reason is not None:
            if reason not in _warned:
                _warned.add(reason)
                log.warning(
                    "local SQS: %s; running it unpatched (slower as queues grow, and concurrent"
                    " deletes may not stick nor receives be exclusive)",
                    reason,
                )
            return False
        models = _moto_models()
        for (owner, name), member in _fast_members(models).items():
            cls = getattr(models, owner)
            _originals[owner, name] = cls.__dict__[name]
            setattr(cls, name, member)
        return True


def revert() -> None:
    """Put moto's own members back (bench/local_depth.py measures both)."""
    with _lock:
        models = _moto_models()
        for (owner, name), member in _originals.items():
            setattr(getattr(models, owner), name, member)
        _originals.clear()


def is_applied() -> bool:
    return bool(_originals)


def original(owner: str, name: str) -> Any:
    """moto's own member (a function or a property), whether or not the patch is applied."""
    if (owner, name) in _originals:
        return _originals[owner, name]
    return getattr(_moto_models(), owner).__dict__.get(name)


def misfit(moto_version: str) -> str | None:
    """Why the patch does not fit this moto (None: it fits): its version, then each source."""
    found = re.match(r"(\d+)\.(\d+)\.", f"{moto_version}.")
    if found is None or (int(found[1]), int(found[2])) != _MINOR:
        return f"moto {moto_version} is not the {WRITTEN_FOR} its speed-up was written for"
    for (owner, name), digest in {**_REPLACED, **_RELIED_ON}.items():
        member = original(owner, name) if hasattr(_moto_models(), owner) else None
        if member is None:
            return f"moto {moto_version} has no {owner}.{name}: the speed-up does not fit it"
        if _fingerprint(member) != digest:
            return f"moto {moto_version} changed {owner}.{name}: the speed-up does not fit it"
    return None


def _fingerprint(member: Any) -> str | None:
    function: Any = member.fget if isinstance(member, property) else member
    try:
        source = textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):  # no source shipped, or not a function
        return None
    return hashlib.sha256(source.encode()).hexdigest()


def _installed_moto_version() -> str:
    try:
        return importlib.metadata.version("moto")
    except importlib.metadata.PackageNotFoundError:  # importable, but not installed as a package
        return "(version unknown)"


def _moto_models() -> Any:
    from moto.sqs import models  # noqa: PLC0415 - moto is an optional extra

    return models


def _fast_members(models: Any) -> dict[Member, Any]:
    """The replacements; each reads moto's clock through `models` when called, but the delete,
    which is moto's own under a lock."""

    def is_message_valid_based_on_retention_period(
        self: Any, queue_name: str, message: Any
    ) -> bool:
        retention_period = self.get_queue(queue_name).message_retention_period
        return bool(retention_period + message.sent_timestamp / 1000 > models.unix_time())

    def messages(self: Any) -> list[Any]:
        now = models.unix_time_millis()  # visible: now > visible_at; delayed: now < delayed_until
        return [m for m in self._messages if now > m.visible_at and now >= m.delayed_until]

    def approximate_number_of_messages_delayed(self: Any) -> int:
        now = models.unix_time_millis()
        return sum(1 for m in self._messages if now < m.delayed_until)

    def approximate_number_of_messages_not_visible(self: Any) -> int:
        now = models.unix_time_millis()
        return sum(1 for m in self._messages if now <= m.visible_at)

    own_delete = original("Queue", "delete_message")

    def delete_message(self: Any, receipt_handle: str) -> None:
        with self._messages_lock:  # moto's `add_message` appends under it
            own_delete(self, receipt_handle)
            self._messages_lock.notify_all()  # a long poll looks again: a FIFO group may be free

    own_receive = original("SQSBackend", "receive_message")

    def receive_message(
        self: Any, queue_name: str, count: int, wait_seconds_timeout: int, *args: Any
    ) -> Any:
        """moto's own receive, one pass at a time under the queue's lock; between passes, a
        long poll waits (lock released) for a send or a delete, at most a second."""
        queue = self.get_queue(queue_name)
        polling_end = models.unix_time() + wait_seconds_timeout
        with queue._messages_lock:
            while True:
                found = own_receive(self, queue_name, count, 0, *args)
                left = polling_end - models.unix_time()
                if found or left <= 0:
                    return found
                queue._messages_lock.wait(min(left, 1.0))
                if models.unix_time() > polling_end:  # moto's order: the deadline, then a pass
                    return []

    return {
        ("SQSBackend", "is_message_valid_based_on_retention_period"): (
            is_message_valid_based_on_retention_period
        ),
        ("Queue", "messages"): property(messages),
        ("Queue", "approximate_number_of_messages_delayed"): property(
            approximate_number_of_messages_delayed
        ),
        ("Queue", "approximate_number_of_messages_not_visible"): property(
            approximate_number_of_messages_not_visible
        ),
        ("Queue", "delete_message"): delete_message,
        ("SQSBackend", "receive_message"): receive_message,
    }
