"""What a handler must be: callable with the batch, of the flavour its front end runs."""

from __future__ import annotations

import inspect

from sqsbatch.errors import ConfigError

__all__ = ["check_handler", "is_async_handler"]


def is_async_handler(handler: object) -> bool:
    """Whether calling `handler` gives an awaitable: an `async def` function or `__call__`."""
    call = getattr(handler, "__call__", None)  # noqa: B004 - an async __call__ counts too
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)


def check_handler(handler: object, *, is_async: bool | None = None) -> None:
    """A handler must be callable with the batch as its one positional argument, and of the
    flavour the front end runs (`is_async`; None: either). One-line `ConfigError` otherwise."""
    if not callable(handler):
        raise ConfigError(f"handler {handler!r} is not callable")
    name = getattr(handler, "__qualname__", None) or repr(handler)
    try:
        signature = inspect.signature(handler)
    except (TypeError, ValueError):  # no signature to read (some builtins): trust it
        signature = None
    if signature is not None:
        try:
            signature.bind(None)
        except TypeError:
            raise ConfigError(
                f"handler {name}{signature} cannot take the batch as its one positional "
                "argument: write it as def handler(batch)"
            ) from None
    if is_async is True and not is_async_handler(handler):
        raise ConfigError(f"handler {name} is not `async def`: use Consumer for sync handlers")
    if is_async is False and is_async_handler(handler):
        raise ConfigError(f"handler {name} is `async def`: use AsyncConsumer (or lambda_handler)")
