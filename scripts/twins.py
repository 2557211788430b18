"""Generate the sync twins from the asyncio sources: `make twins` (`--check`: fail when stale).

`sqsbatch/_async/door.py` and `sqsbatch/_async/consumer.py` are the sources; unasync removes
`async`/`await` and renames the asyncio names (the table below), then ruff formats the result
into `sqsbatch/_sync/`. What the flavours do their own way lives in the hand-written
`flavour.py` of each package, name for name, so the generated code needs nothing else.
"""

from __future__ import annotations

import argparse
import difflib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import unasync

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("door.py", "consumer.py")
RENAMES = {
    "_async": "_sync",
    "AsyncConsumer": "Consumer",
    "AsyncBatchHandler": "BatchHandler",
    "AsyncSqs": "SyncSqs",
}


def generate(into: Path) -> dict[str, str]:
    """The twins' text, by file name (`into`: a scratch directory for unasync's output)."""
    source, target = into / "_async", into / "_sync"
    source.mkdir(parents=True)
    for name in SOURCES:
        shutil.copy(ROOT / "sqsbatch" / "_async" / name, source / name)
    rule = unasync.Rule(f"{source}/", f"{target}/", additional_replacements=RENAMES)
    unasync.unasync_files([str(source / name) for name in SOURCES], rules=[rule])
    return {name: _ruff((target / name).read_text(), name) for name in SOURCES}


def _ruff(text: str, name: str) -> str:
    """`text` with its imports sorted and formatted as if it were `sqsbatch/_sync/<name>`
    (ruff reads the project's settings from there)."""
    ruff = str(Path(sys.executable).with_name("ruff"))
    where = f"sqsbatch/_sync/{name}"
    for command in (["check", "--fix-only", "--quiet", "--select", "I"], ["format", "--quiet"]):
        text = subprocess.run(
            [ruff, *command, "--stdin-filename", where, "-"],
            input=text,
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout
    return text


def stale() -> list[str]:
    """A unified diff per twin that differs from what generation gives now."""
    with tempfile.TemporaryDirectory() as scratch:
        fresh = generate(Path(scratch))
    diffs = []
    for name, text in fresh.items():
        path = ROOT / "sqsbatch" / "_sync" / name
        current = path.read_text() if path.exists() else ""
        if current != text:
            diff = difflib.unified_diff(
                current.splitlines(keepends=True),
                text.splitlines(keepends=True),
                f"sqsbatch/_sync/{name} (committed)",
                f"sqsbatch/_sync/{name} (generated)",
            )
            diffs.append("".join(diff))
    return diffs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when a twin is stale")
    args = parser.parse_args()
    if args.check:
        diffs = stale()
        for diff in diffs:
            print(diff)
        if diffs:
            print("sqsbatch/_sync is stale: run `make twins`", file=sys.stderr)
        return 1 if diffs else 0
    with tempfile.TemporaryDirectory() as scratch:
        for name, text in generate(Path(scratch)).items():
            (ROOT / "sqsbatch" / "_sync" / name).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
