"""The CDK app: deploys what `sqsbatch.toml` describes (run by `cdk.json`, see docs/infra.md).

The file is, first found: context `sqsbatch:config` (`cdk deploy -c sqsbatch:config=PATH`),
`$SQSBATCH_CONFIG_FILE`, `./sqsbatch.toml`. A bad setting prints one line and exits with 1.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from aws_cdk import App

from sqsbatch.cdk import build_app
from sqsbatch.config import CONFIG_FILE_ENV, DEFAULT_CONFIG_FILE
from sqsbatch.errors import ConfigError


def config_path(app: App) -> Path:
    """Where the settings are, in the order the module docstring gives."""
    context = app.node.try_get_context("sqsbatch:config")
    if isinstance(context, str):
        return Path(context)
    return Path(os.environ.get(CONFIG_FILE_ENV, DEFAULT_CONFIG_FILE))


def main() -> int:
    app = App()
    try:
        build_app(config_path(app), app=app)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
