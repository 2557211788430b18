"""The [infra] table and the Lambda rules: mistakes fail early, with one clear line."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Match, Template
from pydantic import BaseModel

from sqsbatch.cdk import DeadLetterQueue, LambdaConsumer, QueueWithDlq, build_app, load_plan
from sqsbatch.cdk.rules import consumer_environment, lambda_source, max_receive_count
from sqsbatch.cdk.settings import (
    EcsSettings,
    ImageSettings,
    InfraSettings,
    LambdaSettings,
    QueueSettings,
    RedriveSettings,
)
from sqsbatch.config import ConsumerConfig
from sqsbatch.errors import ConfigError
from tests.cdk.conftest import EXAMPLE, REPO

CONSUMER = """
[[queues.consumers]]
queue = "jobs"
dead_letter_queue = "jobs-dlq"
visibility_timeout = 60
"""


def consumer_config(**values: Any) -> ConsumerConfig:
    # Through **values: config.py's positional Field defaults are invisible to mypy.
    return ConsumerConfig(**values)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sqsbatch.toml"
    path.write_text(text)
    return path


def test_the_example_file_describes_three_queues_and_two_dlqs() -> None:
    plan = load_plan(EXAMPLE)
    assert [q.name for q in plan.queues] == ["orders", "emails", "audit"]
    assert {dlq: [q.name for q in group] for dlq, group in plan.sources_by_dlq().items()} == {
        "orders-dlq": ["orders"],
        "shared-dlq": ["emails", "audit"],
    }
    assert [q.infra.consumer for q in plan.queues] == ["lambda", "ecs", "none"]


@pytest.mark.parametrize(
    ("infra", "message"),
    [
        ('[infra]\nstack = "x"', "unknown key infra.stack"),
        (
            '[[infra.queues]]\nqueue = "jobs"\nlamda = { asset = "." }',
            "unknown key infra.queues[0].lamda",
        ),
        (
            '[[infra.queues]]\nqueue = "jobs"\ndelivery_delay = 901',
            "infra.queues[0].delivery_delay=901 is invalid: input should be less than or equal "
            "to 900",
        ),
        (
            '[[infra.queues]]\nqueue = "jobs"\ndelivery_delay = "10"',
            "infra.queues[0].delivery_delay='10' is invalid: input should be a valid integer",
        ),
        (
            '[[infra.queues]]\nqueue = "jobs"\nconsumer = "lambda"',
            'infra.queues[0]: consumer = "lambda" needs a lambda table',
        ),
        (
            '[[infra.queues]]\nqueue = "jobs"\necs = { handler = "app:run" }',
            'infra.queues[0]: a ecs table is given but consumer = "none"',
        ),
        (
            '[[infra.queues]]\nqueue = "jobs"\nconsumer = "ecs"\n'
            'ecs = { handler = "app:run", min_tasks = 5, max_tasks = 2 }',
            "infra.queues[0].ecs: min_tasks=5 exceeds max_tasks=2",
        ),
        (
            '[[infra.queues]]\nqueue = "jobs"\nconsumer = "ecs"\necs = { handler = "app.run" }',
            "infra.queues[0].ecs.handler='app.run' is invalid: string should match pattern",
        ),
        (
            '[[infra.queues]]\nqueue = "jobs"\nconsumer = "ecs"\necs = { handler = "app:run" }',
            "queue 'jobs' runs on ECS but no image is set",
        ),
        (
            '[infra]\nimage = { uri = "x", ecr_repository = "y" }',
            "infra.image: give exactly one of uri or ecr_repository",
        ),
        ('[[infra.queues]]\nqueue = "other"', "queue='other' has no [[queues.consumers]] table"),
        (
            '[infra]\nkms = "alias/sqsbatch"',
            "infra.kms='alias/sqsbatch' is invalid: string should match pattern",
        ),
        (
            '[infra]\nkms_producer_services = ["sns.amazonaws.com"]',
            'infra: kms_producer_services needs kms = "create"',
        ),
        (
            '[infra]\nkms = "create"\nkms_producer_services = ["sns"]',
            "infra.kms_producer_services[0]='sns' is invalid: string should match pattern",
        ),
        (
            "[infra]\nredrive_headroom = -1",
            "infra.redrive_headroom=-1 is invalid: input should be greater than or equal to 0",
        ),
        ('[[infra.queues]]\nqueue = "jobs"\n[[infra.queues]]\nqueue = "jobs"', "appears twice"),
    ],
)
def test_bad_infra_settings_fail_with_one_line(tmp_path: Path, infra: str, message: str) -> None:
    path = write(tmp_path, CONSUMER + infra)
    with pytest.raises(ConfigError) as caught:
        load_plan(path)
    text = str(caught.value)
    assert message in text
    assert text.startswith(str(path))
    assert "\n" not in text


def test_infra_must_be_a_table(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"\[infra\] must be a table"):
        load_plan(write(tmp_path, 'infra = "yes"\n' + CONSUMER))


@pytest.mark.parametrize(
    ("consumer", "message"),
    [
        ('queue = "jobs"', "queue 'jobs' has no dead_letter_queue"),
        ('queue = "jobs.fifo"\ndead_letter_queue = "dlq"', "must both be FIFO (.fifo) or both"),
        ('queue = "jobs"\ndead_letter_queue = "jobs"', "'jobs' is both a consumer queue and"),
        ('queue = "jobs!"\ndead_letter_queue = "dlq"', "'jobs!' is not a valid SQS queue name"),
    ],
)
def test_queues_the_app_cannot_deploy_are_refused(
    tmp_path: Path, consumer: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_plan(write(tmp_path, f"[[queues.consumers]]\n{consumer}\n"))


def test_visibility_below_six_lambda_timeouts_is_refused() -> None:
    config = consumer_config(visibility_timeout=60, dead_letter_queue="dlq")
    assert lambda_source(config, fifo=False, timeout_seconds=10).timeout_seconds == 10
    with pytest.raises(ConfigError) as caught:
        lambda_source(config, fifo=False, timeout_seconds=11)
    assert str(caught.value) == (
        "visibility_timeout=60 is too short for a Lambda timeout of 11 s: SQS needs at least 6x "
        "the function timeout (accepted: visibility_timeout >= 66, or a timeout <= 10 s)"
    )
    assert lambda_source(config, fifo=False).timeout_seconds == 10  # the default fits


def test_a_batch_over_ten_needs_a_batching_window() -> None:
    config = consumer_config(max_batch_size=11, max_batch_timeout=0)
    with pytest.raises(ConfigError, match=r"max_batch_size=11 needs a batching window .* >= 1"):
        lambda_source(config, fifo=False)
    assert lambda_source(consumer_config(max_batch_size=10, max_batch_timeout=0), fifo=False)
    windowed = lambda_source(consumer_config(max_batch_size=11, max_batch_timeout=1), fifo=False)
    assert (windowed.batch_size, windowed.window_seconds) == (11, 1)


def test_lambda_windows_are_whole_seconds_and_fifo_takes_none() -> None:
    with pytest.raises(ConfigError, match=r"max_batch_timeout=2\.5 cannot be a Lambda"):
        lambda_source(consumer_config(max_batch_timeout=2.5), fifo=False)
    with pytest.raises(ConfigError, match="FIFO queue's Lambda event source"):
        lambda_source(consumer_config(max_batch_timeout=5), fifo=True)
    fifo = lambda_source(consumer_config(max_batch_timeout=0), fifo=True)
    assert fifo.window_seconds is None


def test_lambda_concurrency_is_the_consumers_within_lambdas_range() -> None:
    assert lambda_source(consumer_config(), fifo=False).max_concurrency == 2  # unset: the floor
    assert lambda_source(consumer_config(max_concurrency=7), fifo=False).max_concurrency == 7
    override = lambda_source(consumer_config(max_concurrency=7), fifo=False, max_concurrency=50)
    assert override.max_concurrency == 50
    with pytest.raises(ConfigError, match=r"max_concurrency=1 cannot be .* \(accepted: 2\.\.1000"):
        lambda_source(consumer_config(max_concurrency=1), fifo=False)


def test_the_environment_rebuilds_the_same_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    config = consumer_config(
        max_batch_size=25,
        max_batch_timeout=2.5,
        max_retries=4,
        dead_letter_queue="d",
        envelope="sns",  # issue 31 item 4: a deployed consumer unwraps as configured
    )
    for key, value in consumer_environment(config).items():
        monkeypatch.setenv(key, value)
    assert consumer_config() == config
    assert (os.environ["SQSBATCH_MAX_RETRIES"], os.environ["SQSBATCH_ENVELOPE"]) == ("4", "sns")


def test_the_lambda_construct_checks_the_queue_it_is_given(tmp_path: Path) -> None:
    stack = Stack(App(), "Check")
    config = consumer_config(visibility_timeout=60, dead_letter_queue="dlq")
    queues = QueueWithDlq(stack, "Jobs", queue_name="jobs", config=config)
    with pytest.raises(ConfigError, match="visibility_timeout=60 is too short"):
        LambdaConsumer(stack, "Slow", queues=queues, asset_path=tmp_path, timeout_seconds=30)
    with pytest.raises(ConfigError, match="is not a folder"):
        LambdaConsumer(stack, "Lost", queues=queues, asset_path=tmp_path / "missing")


KEY_ARN = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def test_an_existing_key_encrypts_the_queues_and_logs_and_nothing_is_created(
    tmp_path: Path,
) -> None:
    (tmp_path / "asset").mkdir()
    lambda_table = 'lambda = { asset = "asset", timeout_seconds = 10 }'
    path = write(
        tmp_path,
        f'{CONSUMER}\n[infra]\nkms = "{KEY_ARN}"\nredrive_headroom = 0\n'
        f'[[infra.queues]]\nqueue = "jobs"\nconsumer = "lambda"\n{lambda_table}\n',
    )
    _, stack = build_app(path, app=App(outdir=str(tmp_path / "out")))
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::KMS::Key", 0)
    template.all_resources_properties("AWS::SQS::Queue", {"KmsMasterKeyId": KEY_ARN})
    template.all_resources_properties("AWS::Logs::LogGroup", {"KmsKeyId": KEY_ARN})
    # No headroom asked: SQS dead-letters after max_retries + 1 receives, as without Lambda.
    redrive = Match.object_like({"maxReceiveCount": 4})
    template.has_resource_properties(
        "AWS::SQS::Queue", {"QueueName": "jobs", "RedrivePolicy": redrive}
    )


def test_a_created_key_lets_the_named_services_send_for_this_account_only(
    tmp_path: Path,
) -> None:
    services = ["sns.amazonaws.com", "events.amazonaws.com"]
    path = write(
        tmp_path, f'{CONSUMER}\n[infra]\nkms = "create"\nkms_producer_services = {services}\n'
    )
    _, stack = build_app(path, app=App(outdir=str(tmp_path / "out")))
    (key,) = Template.from_stack(stack).find_resources("AWS::KMS::Key").values()
    statements = key["Properties"]["KeyPolicy"]["Statement"]
    (producers,) = [s for s in statements if s["Principal"].get("Service") == services]
    assert producers["Action"] == ["kms:GenerateDataKey", "kms:Decrypt"]
    assert producers["Condition"] == {
        "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    }


def test_headroom_adds_receives_but_never_retries() -> None:
    config = consumer_config(max_retries=4)
    assert max_receive_count(config) == 5
    assert max_receive_count(config, headroom=2) == 7
    with pytest.raises(ConfigError, match="redrive_headroom=-1 is invalid"):
        max_receive_count(config, headroom=-1)
    assert consumer_environment(config)["SQSBATCH_MAX_RETRIES"] == "4"


def test_a_shared_dlq_must_use_the_queues_key() -> None:
    stack = Stack(App(), "Keys")
    config = consumer_config(dead_letter_queue="dlq")
    dlq = DeadLetterQueue(stack, "Dlq", queue_name="dlq", source_queue_names=["jobs"])
    key = kms.Key(stack, "Key")
    with pytest.raises(ConfigError, match="encrypted with another key"):
        QueueWithDlq(
            stack,
            "Jobs",
            queue_name="jobs",
            config=config,
            dead_letter_queue=dlq,
            encryption_key=key,
        )


def test_the_app_refuses_a_lambda_timeout_the_queue_cannot_hold(tmp_path: Path) -> None:
    (tmp_path / "asset").mkdir()
    lambda_table = 'lambda = { asset = "asset", timeout_seconds = 30 }'
    path = write(
        tmp_path,
        f'{CONSUMER}\n[[infra.queues]]\nqueue = "jobs"\nconsumer = "lambda"\n{lambda_table}\n',
    )
    with pytest.raises(ConfigError, match=r"accepted: visibility_timeout >= 180"):
        build_app(path, app=App(outdir=str(tmp_path / "out")))


def test_the_docs_list_every_infra_key_and_no_other() -> None:
    """docs/infra.md's [infra] reference names exactly the keys the models accept."""
    docs = (REPO / "docs" / "infra.md").read_text()
    block = docs.split("## The `[infra]` table", 1)[1].split("```toml\n", 1)[1].split("```")[0]
    infra = tomllib.loads(block)["infra"]
    (queue,) = infra["queues"]

    def keys(model: type[BaseModel]) -> set[str]:
        return {field.alias or name for name, field in model.model_fields.items()}

    assert set(infra) == keys(InfraSettings)
    assert set(infra["redrive"]) == keys(RedriveSettings)
    assert set(infra["image"]) | set(infra["redrive"]["image"]) == keys(ImageSettings)
    assert set(queue) == keys(QueueSettings)
    assert set(queue["lambda"]) == keys(LambdaSettings)
    assert set(queue["ecs"]) == keys(EcsSettings)
