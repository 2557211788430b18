"""Loading what `consume` names: the handler (`MODULE:FUNCTION`) and `--body-model`.

The current directory is importable, and so is a file's own directory (a file may import its
neighbours). A module that does not import is one line naming the file and the line.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

import typer

from sqsbatch.cli.common import CliError

__all__ = ["load_body_model", "load_handler"]


def load_handler(spec: str) -> Any:
    """The callable named by `package.module:function` or `path/to/file.py:function`."""
    target = _load(spec, "FUNCTION", "app.jobs:handle", hint=None)
    if not callable(target):
        raise CliError(f"{spec} is not callable")
    return target


def load_body_model(spec: str) -> Any:
    """The object named by `--body-model MODULE:NAME` (imported as a handler is); whether
    pydantic can validate with it is the consumer's check (`BodyModel`), in one line."""
    return _load(spec, "NAME", "app.models:Order", hint="'--body-model'")


def _load(spec: str, what: str, example: str, *, hint: str | None) -> Any:
    source, sep, attribute = spec.rpartition(":")
    if not sep or not source or not attribute:
        raise typer.BadParameter(
            f"{spec!r}: expected MODULE:{what} or FILE.py:{what}, e.g. {example}",
            param_hint=hint,
        )
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    target: Any = _import_file(source) if _is_path(source) else _import(source, source)
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise CliError(f"module {source!r} has no {attribute!r}")
        target = getattr(target, part)
    return target


def _is_path(source: str) -> bool:
    return source.endswith(".py") or "/" in source or os.sep in source


def _import_file(source: str) -> ModuleType:
    """The module of a `.py` file, imported by its name from its own directory."""
    file = Path(source)
    if file.suffix != ".py" or not file.is_file():
        raise CliError(f"{source}: no such Python file")
    folder = str(file.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    module = _import(file.stem, source)
    found = getattr(module, "__file__", None)
    if found is None or Path(found).resolve() != file.resolve():
        raise CliError(
            f"{source}: the module name {file.stem!r} is taken by {found or 'a built-in module'};"
            " rename the file"
        )
    return module


def _import(name: str, shown: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            raise CliError(f"cannot import {shown!r}: {exc}") from None  # it is not there
        raise CliError(_import_failure(shown, exc)) from None
    except (Exception, SystemExit) as exc:  # SyntaxError, ImportError, whatever it raises
        raise CliError(_import_failure(shown, exc)) from None


def _import_failure(shown: str, exc: BaseException) -> str:
    """`cannot import jobs: NameError at jobs.py:3: name 'x' is not defined`."""
    what = exc.msg if isinstance(exc, SyntaxError) else str(exc)
    return f"cannot import {shown}: {type(exc).__name__} at {_where(exc)}: {what}"


def _where(exc: BaseException) -> str:
    """The file and line of the user's code where an import failed."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{_shown_path(exc.filename)}:{exc.lineno}"
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith("<")
        and frame.filename != __file__
        and f"{os.sep}importlib{os.sep}" not in frame.filename
    ]
    if not frames:
        return "?"
    return f"{_shown_path(frames[-1].filename)}:{frames[-1].lineno}"


def _shown_path(path: str) -> str:
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative
