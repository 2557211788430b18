"""The core does no I/O and keeps no time of its own: it imports none of what would let it.

Checked on the source (the import statements), for every module of `sqsbatch._core`, redrive's
pure modules (its decisions), and every module they import in turn (settings, errors, limits).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import redrive
import sqsbatch

BANNED = {"boto3", "aioboto3", "botocore", "aiobotocore", "threading", "asyncio", "time", "random"}
BANNED |= {"opentelemetry"}  # traces are a shell's business (sqsbatch._shell.tracing), and optional
PACKAGE = Path(sqsbatch.__file__).parent
ROOT = PACKAGE.parent
CORE = sorted((PACKAGE / "_core").glob("*.py"))
REDRIVE = Path(redrive.__file__).parent
REDRIVE_PURE = [REDRIVE / f"{name}.py" for name in ("decide", "plan", "policy", "reasons")]


def imports(path: Path) -> set[str]:
    """The modules a file imports (absolute names, `from x import y` counted as `x`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


def reached_from_core() -> list[Path]:
    """The core's modules, redrive's pure ones and the modules they import, transitively."""
    seen: dict[Path, None] = {}
    todo = [*CORE, *REDRIVE_PURE]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen[path] = None
        for module in imports(path):
            if module.startswith(("sqsbatch.", "redrive.")):
                candidate = ROOT.joinpath(*module.split(".")).with_suffix(".py")
                if candidate.exists():
                    todo.append(candidate)
    return sorted(seen)


def test_the_core_is_a_package_of_its_own() -> None:
    assert len(CORE) > 10
    assert (PACKAGE / "_core" / "__init__.py") in CORE


def test_redrive_pure_modules_are_reached() -> None:
    reached = reached_from_core()
    assert all(path in reached for path in REDRIVE_PURE)
    assert REDRIVE / "daemon.py" not in reached


@pytest.mark.parametrize("path", reached_from_core(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_core_module_imports_io_threads_clocks_or_randomness(path: Path) -> None:
    banned = {module for module in imports(path) if module.split(".")[0] in BANNED}
    assert not banned, f"{path.relative_to(ROOT)} imports {sorted(banned)}"


def test_the_core_imports_no_shell() -> None:
    shells = (
        "sqsbatch._sync",
        "sqsbatch._async",
        "sqsbatch._shell",
        "sqsbatch.cli",
        "sqsbatch.dev",
    )
    for path in reached_from_core():
        wrong = {m for m in imports(path) if m.startswith(shells)}
        assert not wrong, f"{path.relative_to(ROOT)} imports {sorted(wrong)}"


def test_redrive_imports_only_public_core_and_shell_names_of_sqsbatch() -> None:
    # The tie runs one way: redrive builds on sqsbatch's core, its doors and shell helpers, never
    # on another front end (the pollers, the Lambda adapter) or the sqsbatch CLI's internals.
    allowed = ("sqsbatch._core", "sqsbatch._shell", "sqsbatch._sync.door")
    public = {"sqsbatch", "sqsbatch.config", "sqsbatch.errors", "sqsbatch.limits"}
    for path in sorted(REDRIVE.glob("*.py")):
        if path.name == "cli.py":  # the `redrive` command shares the `sqsbatch` command's options
            continue
        private = {
            m
            for m in imports(path)
            if m.startswith("sqsbatch") and m not in public and not m.startswith(allowed)
        }
        assert not private, f"redrive/{path.name} imports {sorted(private)}"


def test_the_check_sees_a_banned_import(tmp_path: Path) -> None:
    # The check itself: an import of each kind is found.
    source = tmp_path / "m.py"
    source.write_text("import time\nfrom asyncio import sleep\nimport botocore.config as c\n")
    assert {m.split(".")[0] for m in imports(source)} == {"time", "asyncio", "botocore"}
