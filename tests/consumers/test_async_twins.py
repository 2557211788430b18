"""The sync and async front ends are twins: same public surface, same parameters.

The pollers and the doors are generated (tests/core/test_twins.py checks that); the producers
are written by hand on both sides, over the same `ProducerBase` and pure `SendPlan`. A method or
parameter added to one side only fails here.
"""

from __future__ import annotations

import inspect

import pytest

from sqsbatch import AsyncConsumer, AsyncProducer, Consumer, Producer
from sqsbatch._async.door import AsyncSqs
from sqsbatch._sync.door import SyncSqs

TWINS = [(Consumer, AsyncConsumer), (Producer, AsyncProducer), (SyncSqs, AsyncSqs)]
ONLY_ASYNC = {"aclose", "__aenter__", "__aexit__", "_open", "_client"}


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
def test_what_does_io_is_async_on_one_side_only(sync: type, async_: type) -> None:
    for name, member in vars(async_).items():
        if inspect.iscoroutinefunction(member) and name not in ONLY_ASYNC:
            assert not inspect.iscoroutinefunction(vars(sync)[name]), name
