"""Lambda's provisioned mode for the event source mapping (issue 30 item 5):
`provisioned_pollers = [min, max]` in `[infra.queues.lambda]`, never with `max_concurrency`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App

from sqsbatch.cdk import build_app, load_plan
from sqsbatch.cdk.rules import INVOKES_PER_POLLER, lambda_source
from sqsbatch.config import ConsumerConfig
from sqsbatch.errors import ConfigError
from tests.cdk.conftest import ASSET, cdk_context, resources

CONSUMER = """
[[queues.consumers]]
queue = "jobs"
dead_letter_queue = "jobs-dlq"
visibility_timeout = 120
"""


def write(tmp_path: Path, lambda_table: str, consumer: str = CONSUMER) -> Path:
    path = tmp_path / "sqsbatch.toml"
    table = f'asset = "{ASSET}", {lambda_table}'
    infra = f'[[infra.queues]]\nqueue = "jobs"\nconsumer = "lambda"\nlambda = {{ {table} }}\n'
    path.write_text(f"{consumer}\n{infra}")
    return path


def synthesize(path: Path, outdir: Path) -> dict[str, Any]:
    with pytest.MonkeyPatch.context() as patch:
        for key in list(os.environ):
            if key.startswith("SQSBATCH_"):
                patch.delenv(key)
        app, stack = build_app(path, app=App(outdir=str(outdir), context=cdk_context()))
        template: dict[str, Any] = app.synth().get_stack_by_name(stack.stack_name).template
    return template


def test_provisioned_pollers_replace_the_maximum_concurrency(tmp_path: Path) -> None:
    template = synthesize(write(tmp_path, "provisioned_pollers = [3, 12]"), tmp_path / "out")
    ((mapping),) = resources(template, "AWS::Lambda::EventSourceMapping").values()
    properties = mapping["Properties"]
    assert properties["ProvisionedPollerConfig"] == {"MinimumPollers": 3, "MaximumPollers": 12}
    assert "ScalingConfig" not in properties
    ((function),) = resources(template, "AWS::Lambda::Function").values()
    # The function may run what 12 pollers invoke at once, so none of them is throttled by it.
    assert function["Properties"]["ReservedConcurrentExecutions"] == 12 * INVOKES_PER_POLLER


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            "provisioned_pollers = [2, 10], max_concurrency = 5",
            "infra.queues[0].lambda: provisioned_pollers=[2, 10] and max_concurrency=5 cannot "
            "both be set",
        ),
        ("provisioned_pollers = [1, 10]", "provisioned_pollers=[1, 10] is invalid (accepted:"),
        ("provisioned_pollers = [201, 300]", "provisioned_pollers=[201, 300] is invalid"),
        ("provisioned_pollers = [2, 2001]", "provisioned_pollers=[2, 2001] is invalid"),
        ("provisioned_pollers = [10, 5]", "min 2..200, max 2..2000 and min <= max"),
        ("provisioned_pollers = [5]", "provisioned_pollers=[5] is invalid"),
        (
            'provisioned_pollers = [2, "x"]',
            "provisioned_pollers[1]='x' is invalid: input should be a valid integer",
        ),
    ],
)
def test_bad_pollers_fail_with_one_line(tmp_path: Path, table: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_plan(write(tmp_path, table))
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_consumers_own_max_concurrency_is_refused_with_pollers() -> None:
    config = ConsumerConfig(max_concurrency=4, visibility_timeout=120)
    with pytest.raises(ConfigError, match=r"provisioned_pollers=\[2, 10\] and max_concurrency=4"):
        lambda_source(config, fifo=False, provisioned_pollers=[2, 10])
    with pytest.raises(ConfigError, match=r"and lambda.max_concurrency=6 cannot both be set"):
        lambda_source(ConsumerConfig(), fifo=False, max_concurrency=6, provisioned_pollers=[2, 10])
    source = lambda_source(ConsumerConfig(), fifo=False, provisioned_pollers=[2, 200])
    assert (source.pollers, source.max_concurrency) == ((2, 200), 2000)


def test_the_bounds_are_the_pinned_cdks(tmp_path: Path) -> None:
    """aws-cdk-lib refuses what sqsbatch refuses: the extremes it accepts synthesize."""
    template = synthesize(write(tmp_path, "provisioned_pollers = [200, 2000]"), tmp_path / "out")
    ((mapping),) = resources(template, "AWS::Lambda::EventSourceMapping").values()
    pollers = mapping["Properties"]["ProvisionedPollerConfig"]
    assert pollers == {"MinimumPollers": 200, "MaximumPollers": 2000}
