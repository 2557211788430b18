"""What a handler must be: callable with the batch, of the flavour its front end runs.

A sync callable that returns an awaitable (an `async def` under a plain decorator, whose wrapper
returns the coroutine it did not await) is async in all but name: `is_async_handler` reads
through `functools.wraps` (`inspect.unwrap`) and a return annotation (`-> Awaitable[None]`), and
at call time `not_awaited` turns an awaitable that no event loop will run into the handler's
failure, closing it, so nothing is counted done that never ran.
"""

from __future__ import annotations

import collections.abc
import inspect
import re
import typing

from sqsbatch.errors import AwaitableReturned, ConfigError

__all__ = ["check_handler", "disguised_async", "is_async_handler", "not_awaited"]

_AWAITABLE_TEXT = re.compile(r"^(?:[\w.]+\.)?(?:Awaitable|Coroutine)\b")
"""A return annotation, as text (`from __future__ import annotations`), naming an awaitable."""


def is_async_handler(handler: object) -> bool:
    """Whether calling `handler` gives an awaitable: an `async def` function or `__call__`,
    or a sync callable that says it returns one (`disguised_async`)."""
    return _is_coroutine_function(handler) or disguised_async(handler) is not None


def disguised_async(handler: object) -> str | None:
    """How `handler`, not `async def` itself, says it returns an awaitable: it wraps an `async
    def` (`__wrapped__`, as `functools.wraps` sets it), or its return annotation is
    `Awaitable`/`Coroutine`; None when it does not."""
    if _is_coroutine_function(handler):
        return None
    for target in (handler, getattr(handler, "__call__", None)):  # noqa: B004
        try:
            inner = inspect.unwrap(target) if target is not None else None  # type: ignore[arg-type]
        except ValueError:  # a cycle of __wrapped__: nothing to read through
            continue
        if inner is not target and _is_coroutine_function(inner):
            return "wraps an `async def`"
    if _annotated_awaitable(handler):
        return "is annotated to return an awaitable"
    return None


def _annotated_awaitable(handler: object) -> bool:
    try:
        annotation = inspect.signature(handler).return_annotation  # type: ignore[arg-type]
    except (TypeError, ValueError):  # no signature to read
        return False
    if isinstance(annotation, str):
        return _AWAITABLE_TEXT.match(annotation) is not None
    origin = typing.get_origin(annotation) or annotation
    return origin in (collections.abc.Awaitable, collections.abc.Coroutine)


def _is_coroutine_function(handler: object) -> bool:
    call = getattr(handler, "__call__", None)  # noqa: B004 - an async __call__ counts too
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)


def not_awaited(returned: object) -> AwaitableReturned:
    """The failure of a sync call that returned `returned`, an awaitable with no event loop to
    run it: a coroutine is closed (it never ran; no "never awaited" warning)."""
    close = getattr(returned, "close", None)
    if inspect.iscoroutine(returned) and callable(close):
        close()
    return AwaitableReturned(returned)


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
        raise ConfigError(
            f"handler {name} is not `async def`: use Consumer for sync handlers (a def that "
            "returns a coroutine: annotate it -> Awaitable[None])"
        )
    disguise = disguised_async(handler) if is_async is False else None
    if disguise is not None:
        raise ConfigError(
            f"handler {name} {disguise} (it returns a coroutine that Consumer cannot run): "
            "use AsyncConsumer (sqsbatch consume --async), or make it def"
        )
    if is_async is False and is_async_handler(handler):
        raise ConfigError(f"handler {name} is `async def`: use AsyncConsumer (or lambda_handler)")
