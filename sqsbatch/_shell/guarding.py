"""The idempotency guard as the front ends take it: `idempotency=` resolved to a store, and
the core's `Guard` made from it and the settings (docs/idempotency.md).

`idempotency=` takes a store (`sqsbatch.idempotency`), or None for no guard; not given
(`FROM_CONFIG`), the settings decide: `idempotency_table` (`SQSBATCH_IDEMPOTENCY_TABLE`) makes
a `DynamoDBStore`, else there is no guard. Keys are the messages' `idempotency_key` as they are,
not namespaced per queue: two queues that share a table share their keys.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from typing import Any

from sqsbatch._core.guard import Guard
from sqsbatch._core.idempotency import default_ttl
from sqsbatch.config import ConsumerConfig
from sqsbatch.idempotency import Store, new_owner, store_from_config

__all__ = ["FROM_CONFIG", "FromConfig", "Idempotency", "flush", "guard_for", "log_line", "store_of"]

log = logging.getLogger("sqsbatch")


class FromConfig(enum.Enum):
    """`idempotency=` not given: the settings say whether there is a store."""

    FROM_CONFIG = "from_config"


FROM_CONFIG = FromConfig.FROM_CONFIG
Idempotency = Store | FromConfig | None


def store_of(idempotency: Idempotency, config: ConsumerConfig) -> Store | None:
    """The store `idempotency=` names, or the one the settings make."""
    if isinstance(idempotency, FromConfig):
        return store_from_config(config)
    return idempotency


def guard_for(
    idempotency: Idempotency,
    config: ConsumerConfig,
    *,
    carry: bool = False,
    new_owner: Callable[[], str] = new_owner,
) -> Guard | None:
    """The core's `Guard` for a front end (None: no guard, and nothing on the hot path). A
    completion is kept `idempotency_ttl` seconds; unset, 28 days (`default_ttl` of an unknown
    retention), which a poller's start counts again from its queues' retention
    (`kept_while_copies_can_arrive`); a claim lasts `claim_seconds` when set."""
    store = store_of(idempotency, config)
    if store is None:
        return None
    ttl = config.idempotency_ttl if config.idempotency_ttl is not None else default_ttl(None)
    return Guard(store, ttl, new_owner, claim_seconds=config.claim_seconds, carry=carry)


def log_line(line: tuple[int, str] | None) -> None:
    """Log what a guard's flow concluded worth saying."""
    if line is not None:
        log.log(line[0], "%s", line[1])


def flush(guard: Guard | None) -> None:
    """Write the completions carried with the next claims (a poller's end): a failure is
    logged, the claims lapse on their own."""
    flushing: Any = getattr(guard.store, "flush", None) if guard is not None else None
    if flushing is None:
        return
    try:
        flushing()
    except Exception as exc:
        log.error("idempotency store: writing carried completions failed (%s)", exc)
