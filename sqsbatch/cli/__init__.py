"""The `sqsbatch` command line: queues, messages, consumers, dead-letter redrive, demo, dev server.

One module per command group; `app` (in `sqsbatch.cli.app`) puts them together.
"""

from __future__ import annotations

__all__ = ["main"]


def main() -> None:
    """The `sqsbatch` console script."""
    from sqsbatch.cli.app import app  # noqa: PLC0415 - keeps `import sqsbatch.cli` light

    app()
