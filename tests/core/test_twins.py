"""The sync twins are generated from the asyncio sources, and the two flavours match.

`sqsbatch/_sync/door.py` and `sqsbatch/_sync/consumer.py` come from `sqsbatch/_async/` through
unasync (`make twins`); a stale one fails here with the diff. The hand-written flavour modules
(`sqsbatch/_sync/flavour.py`, `sqsbatch/_async/flavour.py`) offer the same names, so the
generated code finds on one side what the source uses on the other.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType

from sqsbatch._async import flavour as async_flavour
from sqsbatch._sync import flavour as sync_flavour

ROOT = Path(__file__).resolve().parents[2]
RENAMED = {"AsyncBatchHandler": "BatchHandler"}


def twins_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("twins", ROOT / "scripts" / "twins.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["twins"] = module
    spec.loader.exec_module(module)
    return module


def test_the_generated_twins_are_up_to_date() -> None:
    diffs = twins_script().stale()
    assert not diffs, "sqsbatch/_sync is stale, run `make twins`:\n" + "\n".join(diffs)


def test_a_change_to_a_source_makes_its_twin_stale(tmp_path: Path) -> None:
    # The check itself: generation follows the source, so an edit shows up as a difference.
    twins = twins_script()
    fresh = twins.generate(tmp_path / "a")
    assert (
        "class Consumer(Poller):" in fresh["consumer.py"] and "await " not in fresh["consumer.py"]
    )
    assert "class SyncSqs:" in fresh["door.py"] and "async def" not in fresh["door.py"]


def test_both_flavours_offer_the_same_names_with_the_same_parameters() -> None:
    async_names = {RENAMED.get(name, name) for name in async_flavour.__all__}
    assert async_names == set(sync_flavour.__all__)
    for name in async_flavour.__all__:
        ours, theirs = getattr(async_flavour, name), getattr(sync_flavour, RENAMED.get(name, name))
        if inspect.isclass(ours):
            for method in vars(ours):
                if not method.startswith("_") or method == "__init__":
                    assert method in vars(theirs), f"{name}.{method}"
                    assert _parameters(getattr(ours, method)) == _parameters(
                        getattr(theirs, method)
                    ), f"{name}.{method}"
        elif inspect.isfunction(ours) and name != "sleep":
            assert _parameters(ours) == _parameters(theirs), name


def _parameters(function: object) -> list[str]:
    return list(inspect.signature(function).parameters)  # type: ignore[arg-type]
