"""The `[infra]` table of `sqsbatch.toml`: deployment-only settings, joined with the consumers'.

The library reads `[[queues.consumers]]`; the CDK app reads the same file and adds `[infra]`:

    [infra]
    stack_name = "sqsbatch"                      # the CloudFormation stack
    alarm_topic_arn = "arn:aws:sns:..."          # optional: alarms notify this SNS topic
    image = { ecr_repository = "app", tag = "v1" }   # or { uri = "..." }: Fargate services
    kms = "create"                               # or a key ARN; default: SQS-managed SSE
    kms_producer_services = ["sns.amazonaws.com"]  # AWS services that send to the queues
    redrive_headroom = 2                         # extra receives for Lambda consumers' queues

    [infra.redrive]                              # the redrive daemon (one service per DLQ)
    desired_count = 1

    [[infra.queues]]                             # one per consumer queue (optional)
    queue = "orders"                             # a [[queues.consumers]] queue
    consumer = "lambda"                          # lambda | ecs | none
    delivery_delay = 0                           # the queue's DelaySeconds, 0..900
    redrive = true                               # run the redrive daemon on its DLQ
    lambda = { asset = "lambda_asset", handler = "handler.handler", timeout_seconds = 20 }
    # lambda.provisioned_pollers = [2, 10]: provisioned mode (not with lambda.max_concurrency)

Every consumer queue is deployed with its DLQ; `[[infra.queues]]` only adds to it. Mistakes fail
with one `ConfigError` line naming the file, the key, the value and what is accepted.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from sqsbatch.cdk.rules import check_pollers, shared_metrics
from sqsbatch.config import ConsumerConfig, load_file
from sqsbatch.errors import ConfigError

__all__ = [
    "DEFAULT_REDRIVE_HEADROOM",
    "DeploymentPlan",
    "EcsSettings",
    "ImageSettings",
    "InfraSettings",
    "LambdaSettings",
    "QueuePlan",
    "QueueSettings",
    "RedriveSettings",
    "image_for",
    "load_plan",
    "parse_infra",
]

FOUR_DAYS = 4 * 86_400
FOURTEEN_DAYS = 14 * 86_400
MAX_DLQ_SOURCES = 10  # SQS's limit on a RedriveAllowPolicy's sourceQueueArns
_MODULE_FUNCTION = r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$"
_MODULE_DOT_FUNCTION = r"^[A-Za-z_][\w.]*\.[A-Za-z_]\w*$"
# "create", or the ARN of a key (not an alias: CloudWatch Logs accepts only key ARNs).
_KMS = r"^(create|arn:aws[\w-]*:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]+)$"
DEFAULT_REDRIVE_HEADROOM = 2
# The MessageAge alarm's default: this much past what the settings make a message wait on
# purpose (the queue's delivery delay and the consumer's retry delay).
MESSAGE_AGE_MARGIN_SECONDS = 300
_SERVICE_PRINCIPAL = r"^[a-z0-9-]+(\.[a-z0-9-]+)*\.amazonaws\.com$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, populate_by_name=True)


class ImageSettings(_Strict):
    """A container image that already exists: an ECR repository (+ tag) or any image URI."""

    uri: str | None = Field(default=None, min_length=1)
    ecr_repository: str | None = Field(default=None, min_length=1)
    tag: str = Field(default="latest", min_length=1)

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.uri is None) == (self.ecr_repository is None):
            raise ValueError("give exactly one of uri or ecr_repository")
        return self


class LambdaSettings(_Strict):
    """The Lambda consumer: a plain folder deployed as is (no bundling)."""

    asset: str = Field(min_length=1)  # a folder, relative to sqsbatch.toml
    handler: str = Field(default="handler.handler", pattern=_MODULE_DOT_FUNCTION)
    # Default: the longest the queue allows, visibility_timeout // 6.
    timeout_seconds: int | None = Field(default=None, ge=1, le=900)
    memory_mb: int = Field(default=256, ge=128, le=10_240)
    runtime: Literal["python3.11", "python3.12", "python3.13", "python3.14"] = "python3.14"
    architecture: Literal["x86_64", "arm64"] = "x86_64"
    max_concurrency: int | None = Field(default=None, ge=2, le=1000)  # default: the consumer's
    # Provisioned mode: [min, max] event pollers (rules.check_pollers); not with max_concurrency.
    provisioned_pollers: list[int] | None = None

    @model_validator(mode="after")
    def _pollers(self) -> Self:
        if self.provisioned_pollers is not None:
            try:
                check_pollers(self.provisioned_pollers)
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
            if self.max_concurrency is not None:
                raise ValueError(
                    f"provisioned_pollers={self.provisioned_pollers} and max_concurrency="
                    f"{self.max_concurrency} cannot both be set: Lambda's provisioned mode "
                    "replaces the event source's maximum concurrency (drop one)"
                )
        return self


class EcsSettings(_Strict):
    """The Fargate consumer: `sqsbatch consume HANDLER --queue Q --async`."""

    handler: str = Field(pattern=_MODULE_FUNCTION)
    image: ImageSettings | None = None  # default: [infra].image
    min_tasks: int = Field(default=1, ge=0, le=1000)  # 0: a step policy starts the first task
    max_tasks: int = Field(default=4, ge=1, le=1000)
    # The scaling target: visible plus in-flight messages per running task.
    messages_per_task: int = Field(default=100, ge=1, le=1_000_000)
    cpu: Literal[256, 512, 1024, 2048, 4096] = 256
    memory_mb: int = Field(default=512, ge=512, le=30_720)
    # A stopping task ends its long poll (up to 20 s) and settles its in-flight batches.
    stop_timeout_seconds: int = Field(default=120, ge=25, le=120)

    @model_validator(mode="after")
    def _min_below_max(self) -> Self:
        if self.min_tasks > self.max_tasks:
            raise ValueError(f"min_tasks={self.min_tasks} exceeds max_tasks={self.max_tasks}")
        return self


class RedriveSettings(_Strict):
    """The redrive daemon: `redrive run --dlq DLQ`, one Fargate service per DLQ."""

    image: ImageSettings | None = None  # default: [infra].image
    desired_count: int = Field(default=1, ge=1, le=10)
    cpu: Literal[256, 512, 1024, 2048, 4096] = 256
    memory_mb: int = Field(default=512, ge=512, le=30_720)


class QueueSettings(_Strict):
    """What to deploy for one consumer queue besides the queue and its DLQ."""

    queue: str = Field(min_length=1)
    consumer: Literal["lambda", "ecs", "none"] = "none"
    delivery_delay: int = Field(default=0, ge=0, le=900)
    retention_seconds: int = Field(default=FOUR_DAYS, ge=60, le=FOURTEEN_DAYS)
    redrive: bool = False
    age_alarm_seconds: int = Field(default=3600, ge=60, le=FOURTEEN_DAYS)
    dlq_age_alarm_seconds: int = Field(default=3 * 86_400, ge=60, le=FOURTEEN_DAYS)
    # With metrics on: the alarm on MessageAge p99 (age at delivery). Default: 300 s past the
    # queue's delivery_delay plus the consumer's retry_delay (QueuePlan.message_age_alarm_seconds).
    message_age_alarm_seconds: int | None = Field(default=None, ge=60, le=FOURTEEN_DAYS)
    lambda_: LambdaSettings | None = Field(default=None, alias="lambda")
    ecs: EcsSettings | None = None

    @model_validator(mode="after")
    def _consumer_table(self) -> Self:
        given = {"lambda": self.lambda_, "ecs": self.ecs}
        for kind, table in given.items():
            if kind == self.consumer and table is None:
                raise ValueError(f'consumer = "{kind}" needs a {kind} table')
            if kind != self.consumer and table is not None:
                raise ValueError(f'a {kind} table is given but consumer = "{self.consumer}"')
        return self


class InfraSettings(_Strict):
    """The whole `[infra]` table."""

    stack_name: str = Field(default="sqsbatch", pattern=r"^[A-Za-z][A-Za-z0-9-]{0,127}$")
    alarm_topic_arn: str | None = Field(default=None, pattern=r"^arn:aws[\w-]*:sns:")
    image: ImageSettings | None = None
    # None: SQS-managed SSE and CloudWatch Logs' own encryption (no key to manage or grant).
    kms: str | None = Field(default=None, pattern=_KMS)
    # Service principals (SNS, EventBridge, S3...) the created key's policy lets encrypt for this
    # account's resources: IAM grants cannot reach them.
    kms_producer_services: list[Annotated[str, Field(pattern=_SERVICE_PRINCIPAL)]] = []
    # Extra receives before SQS dead-letters a Lambda consumer's message: a throttled invocation
    # counts as a receive. maxReceiveCount = max_retries + 1 + redrive_headroom.
    redrive_headroom: int = Field(default=DEFAULT_REDRIVE_HEADROOM, ge=0, le=100)
    idempotency: bool = False
    """A DynamoDB table for the idempotency guard, passed to every consumer (idempotency.md)."""
    redrive: RedriveSettings = RedriveSettings()
    queues: list[QueueSettings] = []

    @model_validator(mode="after")
    def _producers_need_a_created_key(self) -> Self:
        if self.kms_producer_services and self.kms != "create":
            raise ValueError(
                'kms_producer_services needs kms = "create" (an existing key\'s policy is its '
                "owner's to change)"
            )
        return self


@dataclass(frozen=True)
class QueuePlan:
    """One consumer queue: the library's settings and the deployment's."""

    name: str
    config: ConsumerConfig
    infra: QueueSettings

    @property
    def dead_letter_queue(self) -> str:
        # load_plan refuses a consumer without a DLQ, so this is always set.
        assert self.config.dead_letter_queue is not None
        return self.config.dead_letter_queue

    @property
    def message_age_alarm_seconds(self) -> int:
        """The MessageAge p99 alarm's threshold: the setting, else a margin past the delays a
        message waits on purpose before a delivery (a retried message's age includes them)."""
        given = self.infra.message_age_alarm_seconds
        if given is not None:
            return given
        return MESSAGE_AGE_MARGIN_SECONDS + self.infra.delivery_delay + self.config.retry_delay


@dataclass(frozen=True)
class DeploymentPlan:
    """Everything the app deploys, checked as a whole."""

    settings: InfraSettings
    queues: tuple[QueuePlan, ...]
    base_dir: Path  # relative asset paths start here (the folder of sqsbatch.toml)

    def sources_by_dlq(self) -> dict[str, list[QueuePlan]]:
        """Each DLQ with the source queues that dead-letter into it, in file order."""
        groups: dict[str, list[QueuePlan]] = {}
        for plan in self.queues:
            groups.setdefault(plan.dead_letter_queue, []).append(plan)
        return groups


def load_plan(path: str | Path) -> DeploymentPlan:
    """Read `path` (a `sqsbatch.toml`) and check the deployment it describes."""
    path = Path(path)
    consumers = load_file(path)["consumers"]
    settings = parse_infra(_read_infra(path), source=str(path))
    names = [entry["queue"] for entry in consumers]
    _check_unique(names, "[[queues.consumers]]", path)
    _check_unique([q.queue for q in settings.queues], "[[infra.queues]]", path)
    unknown = sorted({q.queue for q in settings.queues} - set(names))
    if unknown:
        raise ConfigError(
            f"{path}: [[infra.queues]] queue={unknown[0]!r} has no [[queues.consumers]] table "
            f"(consumers: {', '.join(names) or 'none'})"
        )
    by_name = {q.queue: q for q in settings.queues}
    plans = tuple(
        QueuePlan(
            name, ConsumerConfig.load(name, path), by_name.get(name, QueueSettings(queue=name))
        )
        for name in names
    )
    plan = DeploymentPlan(settings, plans, path.resolve().parent)
    _check_plan(plan, path)
    return plan


def parse_infra(table: Mapping[str, Any], *, source: str = "sqsbatch.toml") -> InfraSettings:
    """Validate an `[infra]` table; one `ConfigError` line on the first problem."""
    try:
        return InfraSettings.model_validate(table)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_describe(exc)}") from None


def _read_infra(path: Path) -> Mapping[str, Any]:
    # load_file has already read and parsed the file, so neither can fail here.
    with open(path, "rb") as handle:
        table = tomllib.load(handle).get("infra", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [infra] must be a table")
    return table


def _describe(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = "infra"
    for part in error["loc"]:
        where += f"[{part}]" if isinstance(part, int) else f".{part}"
    if error["type"] == "extra_forbidden":
        return f"unknown key {where}"
    message = error["msg"].removeprefix("Value error, ")
    if error["type"].startswith("value_error") or not error["loc"]:
        return f"{where}: {message}"
    return f"{where}={error.get('input')!r} is invalid: {message[0].lower()}{message[1:]}"


def _check_unique(names: list[str], table: str, path: Path) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ConfigError(f"{path}: queue={name!r} appears twice in {table}")
        seen.add(name)


def _check_plan(plan: DeploymentPlan, path: Path) -> None:
    sources = {q.name for q in plan.queues}
    for queue in plan.queues:
        _check_queue(plan, queue, sources, path)
    for dlq, group in plan.sources_by_dlq().items():
        if len(group) > MAX_DLQ_SOURCES:
            raise ConfigError(
                f"{path}: {len(group)} queues dead-letter into {dlq!r}; SQS's redrive allow "
                f"policy names at most {MAX_DLQ_SOURCES}"
            )
        if any(q.infra.redrive for q in group):
            if _redrive_image(plan) is None:
                raise ConfigError(f"{path}: redrive for {dlq!r} needs an image ([infra].image)")
            try:
                shared_metrics([q.config for q in group], dlq)
            except ConfigError as exc:
                raise ConfigError(f"{path}: {exc}") from None


def _check_queue(plan: DeploymentPlan, queue: QueuePlan, sources: set[str], path: Path) -> None:
    dlq = queue.config.dead_letter_queue
    if dlq is None:
        raise ConfigError(
            f"{path}: queue {queue.name!r} has no dead_letter_queue; the infra app deploys "
            f'every queue with a DLQ (set dead_letter_queue = "{queue.name}-dlq")'
        )
    for name in (queue.name, dlq):
        if not valid_queue_name(name):
            raise ConfigError(
                f"{path}: {name!r} is not a valid SQS queue name "
                "(1..80 of A-Z a-z 0-9 _ -, plus .fifo for FIFO queues)"
            )
    if dlq in sources:
        raise ConfigError(f"{path}: {dlq!r} is both a consumer queue and a dead_letter_queue")
    if dlq.endswith(".fifo") != queue.name.endswith(".fifo"):
        raise ConfigError(
            f"{path}: queue {queue.name!r} and its dead_letter_queue {dlq!r} must both be "
            "FIFO (.fifo) or both standard"
        )
    if queue.infra.consumer == "ecs" and _image(plan, queue.infra) is None:
        raise ConfigError(f"{path}: queue {queue.name!r} runs on ECS but no image is set")


def _image(plan: DeploymentPlan, queue: QueueSettings) -> ImageSettings | None:
    own = queue.ecs.image if queue.ecs is not None else None
    return own or plan.settings.image


def _redrive_image(plan: DeploymentPlan) -> ImageSettings | None:
    return plan.settings.redrive.image or plan.settings.image


def image_for(plan: DeploymentPlan, queue: QueueSettings | None) -> ImageSettings:
    """The image of a Fargate service: its own, else `[infra].image` (checked by load_plan)."""
    image = _redrive_image(plan) if queue is None else _image(plan, queue)
    if image is None:
        raise ConfigError("no container image is set ([infra].image)")
    return image


def valid_queue_name(name: str) -> bool:
    """SQS's rule: 1..80 of [A-Za-z0-9_-], plus `.fifo` for FIFO queues."""
    return len(name) <= 80 and re.fullmatch(r"[A-Za-z0-9_-]{1,80}(\.fifo)?", name) is not None
