"""The sync and async shells are twins: same public surface, same steps, same decisions.

The async modules are written by hand next to the sync ones (threads and asyncio wait in
different ways, so a mechanical unasync does not fit). These checks keep them in step: a method
or parameter added to one shell, or a decision called by only one, fails here.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path
from typing import Any

import pytest

import sqsbatch
from sqsbatch import AsyncConsumer, AsyncProducer, Consumer, Producer
from sqsbatch.sqs_async import AsyncSqs
from sqsbatch.sqs_sync import SyncSqs

TWINS = [(Consumer, AsyncConsumer), (Producer, AsyncProducer), (SyncSqs, AsyncSqs)]
PURE = (
    "sqsbatch.consuming",
    "sqsbatch.producer",
    "sqsbatch.backoff",
    "sqsbatch.calls",
    "sqsbatch.receivers",
)
ONLY_ASYNC = {"aclose", "__aenter__", "__aexit__", "_open", "_client"}
PRIMITIVES = {"__init__", "stop"}
"""Where threads and asyncio differ (events, signal handlers): compared by signature only."""
ASYNC_CHECKS = {"is_async_handler"}
"""Decisions only the async shell needs: it refuses a handler that is not `async def`."""


def methods(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in vars(cls).items()
        if callable(member) and name not in ONLY_ASYNC and name != "__init__"
    } | {"__init__": inspect.signature(cls.__init__)}  # type: ignore[misc]


@pytest.mark.parametrize(("sync", "async_"), TWINS, ids=lambda c: c.__name__)
def test_same_methods_with_the_same_parameters(sync: type, async_: type) -> None:
    theirs, ours = methods(sync), methods(async_)
    assert sorted(theirs) == sorted(ours)
    for name, signature in theirs.items():
        assert list(signature.parameters) == list(ours[name].parameters), name
        for parameter in signature.parameters.values():
            if parameter.name != "sleep":  # time.sleep and asyncio.sleep, by design
                assert parameter.default == ours[name].parameters[parameter.name].default, name


@pytest.mark.parametrize(("sync", "async_"), TWINS, ids=lambda c: c.__name__)
def test_what_does_io_is_async_and_the_rest_is_not(sync: type, async_: type) -> None:
    for name, member, twin in _pairs(sync, async_):
        if inspect.iscoroutinefunction(member):
            assert not inspect.iscoroutinefunction(twin), name
        else:  # not I/O, so it must be the very same code on both sides
            assert ast.dump(_body(member)) == ast.dump(_body(twin)), name


@pytest.mark.parametrize(
    ("sync", "async_"),
    [("consumer.py", "async_consumer.py"), ("producer.py", "async_producer.py")],
)
def test_both_shells_call_the_same_decisions(sync: str, async_: str) -> None:
    # The names a shell imports from the pure modules are the decisions it calls.
    theirs, ours = _decisions(sync), _decisions(async_) - ASYNC_CHECKS
    if sync == "producer.py":  # the pure half of producer.py is what the sync Producer calls
        pure = [importlib.import_module(module).__all__ for module in PURE]
        used = _names_used(sqsbatch.producer.Producer)
        theirs = {name for name in used if any(name in names for names in pure)}
    assert theirs == ours


def _body(function: object) -> ast.AST:
    tree = ast.parse(inspect.cleandoc("\n" + inspect.getsource(function)))  # type: ignore[arg-type]
    node = tree.body[0]
    assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    return ast.Module(body=node.body, type_ignores=[])


def _pairs(sync: type, async_: type) -> list[tuple[str, Any, Any]]:
    """(name, async code, sync code) of the methods and properties both define."""
    pairs = []
    for name, member in vars(async_).items():
        if isinstance(member, property):
            pairs.append((name, member.fget, vars(sync)[name].fget))
        elif name not in ONLY_ASYNC | PRIMITIVES and inspect.isfunction(member):
            pairs.append((name, member, vars(sync)[name]))
    return pairs


def _names_used(cls: type) -> set[str]:
    tree = ast.parse(inspect.getsource(cls))
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


def _decisions(module: str) -> set[str]:
    tree = ast.parse((Path(sqsbatch.__file__).parent / module).read_text())
    return {
        alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module in PURE
        for alias in node.names
    }
