"""infra/app.py as cdk.json runs it, and the package boundary around aws_cdk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.cdk.conftest import REPO, cdk_context


def run_app(tmp_path: Path, context: dict[str, object]) -> subprocess.CompletedProcess[str]:
    """What `cdk synth` does: run cdk.json's app with the context and output folder in env."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("SQSBATCH_")}
    env |= {
        "CDK_OUTDIR": str(tmp_path),
        "CDK_CONTEXT_JSON": json.dumps(context),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    app = json.loads((REPO / "cdk.json").read_text())["app"].split()
    assert app == ["python3", "infra/app.py"]
    return subprocess.run(
        [sys.executable, *app[1:]], cwd=REPO, env=env, capture_output=True, text=True, check=False
    )


def test_cdk_json_keeps_synthesis_offline() -> None:
    settings = json.loads((REPO / "cdk.json").read_text())
    assert settings["notices"] is False
    assert settings["versionReporting"] is False
    assert settings["context"]["cli-telemetry"] is False


def test_the_app_synthesizes_the_example(tmp_path: Path) -> None:
    result = run_app(tmp_path, cdk_context())
    assert result.returncode == 0, result.stderr
    template = json.loads((tmp_path / "sqsbatch-example.template.json").read_text())
    names = {
        r["Properties"]["QueueName"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::SQS::Queue"
    }
    assert names == {"orders", "orders-dlq", "emails", "audit", "shared-dlq"}


def test_a_bad_setting_prints_one_line_and_exits_1(tmp_path: Path) -> None:
    bad = tmp_path / "sqsbatch.toml"
    bad.write_text('[[queues.consumers]]\nqueue = "jobs"\n')
    result = run_app(tmp_path / "out", cdk_context() | {"sqsbatch:config": str(bad)})
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {bad}: queue 'jobs' has no dead_letter_queue; the infra app deploys every "
        'queue with a DLQ (set dead_letter_queue = "jobs-dlq")'
    )
    assert "Traceback" not in result.stderr


def test_importing_sqsbatch_does_not_import_aws_cdk() -> None:
    code = "import sys, sqsbatch; print(sorted(m for m in sys.modules if m.startswith('aws_cdk')))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
