"""With `metrics = "emf"`, the stack passes the metrics settings to every process that writes
them, graphs them on each queue's dashboard and alarms on them; with metrics off it does neither.

The metric names, dimensions and units are the library's public ones (docs/operations.md), written
out here as literals on purpose: a construct that drifts from them fails here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from redrive.settings import RedriveSettings
from sqsbatch._core.metrics import CONSUMER_METRICS, DEAD_LETTER_REASONS, REDRIVE_METRICS
from sqsbatch.cdk import emf, load_plan
from sqsbatch.cdk.dashboard import dashboard_name
from sqsbatch.cdk.fargate import with_health_file
from sqsbatch.cdk.rules import Metrics, consumer_environment, metrics_of
from sqsbatch.cdk.settings import QueuePlan, QueueSettings
from sqsbatch.config import ConsumerConfig
from sqsbatch.errors import ConfigError
from tests.cdk.conftest import METRICS_ON, REPO, TOPIC, Synthesis, resources

COUNTS = [
    "Received",
    "Acked",
    "Retried",
    "DeadLettered",
    "HandlerErrors",
    "HandlerTimeouts",
    "SettleFailures",
    "ReceiveErrors",
    "ExpiredReceipts",
]
REASONS = ["retries_exhausted", "expired", "invalid_body", "payload_missing", "requested"]
REDRIVE = ["Moved", "Hidden", "Parked", "Skipped", "Failed"]


# Reading the template -------------------------------------------------------------------------


def dashboard(synthesis: Synthesis, queue: str) -> dict[str, Any]:
    """The dashboard of `queue`, its body parsed, each `Fn::GetAtt` of a queue as its name."""
    names = {
        key: value["Properties"]["QueueName"]
        for key, value in resources(synthesis.template, "AWS::SQS::Queue").items()
    }
    wanted = dashboard_name(synthesis.plan.settings.stack_name, queue)
    for found in resources(synthesis.template, "AWS::CloudWatch::Dashboard").values():
        properties = found["Properties"]
        if properties["DashboardName"] != wanted:
            continue
        parts = []
        for part in properties["DashboardBody"]["Fn::Join"][1]:
            if isinstance(part, str):
                parts.append(part)
            elif "Fn::GetAtt" in part:
                parts.append(names[part["Fn::GetAtt"][0]])
            else:
                assert part == {"Ref": "AWS::Region"}, part
                parts.append("us-east-1")
        body: dict[str, Any] = json.loads("".join(parts))
        return body
    raise AssertionError(f"no dashboard named {wanted!r}")


Graphed = tuple[str, str, tuple[tuple[str, str], ...], str, int]


def graphed(body: dict[str, Any]) -> dict[str, set[Graphed]]:
    """Each graph's title with its (namespace, name, dimensions, statistic, period)s."""
    graphs: dict[str, set[Graphed]] = {}
    for widget in body["widgets"]:
        if widget["type"] != "metric":
            continue
        lines = graphs.setdefault(widget["properties"]["title"], set())
        for namespace, name, *rest in widget["properties"]["metrics"]:
            options = rest.pop()
            dimensions = tuple(zip(rest[::2], rest[1::2], strict=True))
            lines.add((namespace, name, dimensions, options["stat"], options["period"]))
    return graphs


def everything(graphs: dict[str, set[Graphed]]) -> set[Graphed]:
    return set().union(*graphs.values())


def container_environment(synthesis: Synthesis, command: list[str]) -> dict[str, str]:
    for task in resources(synthesis.template, "AWS::ECS::TaskDefinition").values():
        (container,) = task["Properties"]["ContainerDefinitions"]
        if container["Command"] == with_health_file(command):
            return {item["Name"]: item["Value"] for item in container.get("Environment", [])}
    raise AssertionError(f"no task runs {command}")


def metric_alarms(synthesis: Synthesis) -> dict[tuple[str, str], dict[str, Any]]:
    """The alarms on sqsbatch's metrics, by (queue, metric)."""
    found = {}
    for alarm in resources(synthesis.template, "AWS::CloudWatch::Alarm").values():
        properties = alarm["Properties"]
        if properties["Namespace"] == "AWS/SQS":
            continue
        ((dimension, queue),) = [(d["Name"], d["Value"]) for d in properties["Dimensions"]]
        assert dimension == "QueueName"
        found[(queue, properties["MetricName"])] = properties
    return found


def plan_of(synthesis: Synthesis, name: str) -> QueuePlan:
    return next(q for q in synthesis.plan.queues if q.name == name)


def sqs(queue: str, name: str) -> Graphed:
    return ("AWS/SQS", name, (("QueueName", queue),), "Maximum", 60)


# Metrics off (the example) ---------------------------------------------------------------------


def test_with_metrics_off_only_sqs_is_graphed_and_alarmed(synthesis: Synthesis) -> None:
    """The example turns no metrics on: its dashboards graph SQS's metrics, its alarms watch
    them, and no process is told to write EMF lines."""
    template = synthesis.template
    for alarm in resources(template, "AWS::CloudWatch::Alarm").values():
        assert alarm["Properties"]["Namespace"] == "AWS/SQS"
    for queue in synthesis.plan.queues:
        graphs = graphed(dashboard(synthesis, queue.name))
        dlq = queue.dead_letter_queue
        assert everything(graphs) == {
            sqs(queue.name, "ApproximateNumberOfMessagesVisible"),
            sqs(queue.name, "ApproximateNumberOfMessagesNotVisible"),
            sqs(queue.name, "ApproximateNumberOfMessagesDelayed"),
            sqs(queue.name, "ApproximateAgeOfOldestMessage"),
            sqs(dlq, "ApproximateNumberOfMessagesVisible"),
            sqs(dlq, "ApproximateAgeOfOldestMessage"),
        }
    assert len(resources(template, "AWS::CloudWatch::Dashboard")) == len(synthesis.plan.queues)
    assert "METRICS" not in json.dumps(resources(template, "AWS::Lambda::Function"))
    assert "METRICS" not in json.dumps(resources(template, "AWS::ECS::TaskDefinition"))


# Metrics on -----------------------------------------------------------------------------------


def test_every_process_that_writes_metrics_is_told_where(metrics_synthesis: Synthesis) -> None:
    """The Lambda function, the Fargate consumer and both redrive daemons get the variables
    their settings read; the daemon on the shared DLQ takes them from its source with metrics
    on (emails), and audit's metrics being off changes nothing there."""
    synthesis = metrics_synthesis
    (function,) = resources(synthesis.template, "AWS::Lambda::Function").values()
    environment = function["Properties"]["Environment"]["Variables"]
    assert environment["SQSBATCH_METRICS"] == "emf"
    assert environment["SQSBATCH_METRICS_NAMESPACE"] == "Shop/sqsbatch"
    assert float(environment["SQSBATCH_METRICS_INTERVAL"]) == 60
    command = ["sqsbatch", "consume", "app.jobs:send_emails", "--queue", "emails", "--async"]
    environment = container_environment(synthesis, command)
    assert environment["SQSBATCH_METRICS"] == "emf"
    assert environment["SQSBATCH_METRICS_NAMESPACE"] == "sqsbatch"
    assert float(environment["SQSBATCH_METRICS_INTERVAL"]) == 90
    orders = container_environment(synthesis, ["redrive", "run", "--dlq", "orders-dlq"])
    shared = container_environment(synthesis, ["redrive", "run", "--dlq", "shared-dlq"])
    assert orders == {
        "REDRIVE_METRICS": "emf",
        "REDRIVE_METRICS_NAMESPACE": "Shop/sqsbatch",
        "REDRIVE_METRICS_INTERVAL": "60.0",
    }
    assert shared == {
        "REDRIVE_METRICS": "emf",
        "REDRIVE_METRICS_NAMESPACE": "sqsbatch",
        "REDRIVE_METRICS_INTERVAL": "90.0",
    }


def test_the_environment_turns_the_consumers_metrics_on(
    metrics_synthesis: Synthesis, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """What the deployed function reads back from its environment alone: the same metrics
    settings as sqsbatch.toml."""
    (function,) = resources(metrics_synthesis.template, "AWS::Lambda::Function").values()
    monkeypatch.chdir(tmp_path)  # no sqsbatch.toml, as on Lambda
    for key, value in function["Properties"]["Environment"]["Variables"].items():
        # A reference (the idempotency table's name) resolves at deployment: stand one in
        monkeypatch.setenv(key, value if isinstance(value, str) else "sqsbatch-Idempotency-1A2B")
    config = ConsumerConfig.load("orders")
    expected = plan_of(metrics_synthesis, "orders").config
    for name in ("metrics", "metrics_namespace", "metrics_interval"):
        assert getattr(config, name) == getattr(expected, name)
    assert config.idempotency_table == "sqsbatch-Idempotency-1A2B"


def test_the_daemons_environment_turns_its_metrics_on(
    metrics_synthesis: Synthesis, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """What the deployed daemon on the shared DLQ reads back from its environment alone."""
    monkeypatch.chdir(tmp_path)  # no sqsbatch.toml in the container
    command = ["redrive", "run", "--dlq", "shared-dlq"]
    for key, value in container_environment(metrics_synthesis, command).items():
        monkeypatch.setenv(key, value)
    settings = RedriveSettings(dlqs=["shared-dlq"])
    assert (settings.metrics, settings.metrics_namespace, settings.metrics_interval) == (
        "emf",
        "sqsbatch",
        90,
    )


def test_the_constructs_graph_every_metric_the_library_writes() -> None:
    """The dashboard's lists and the library's names are the same: a count added to the core
    without a graph fails here."""
    graphed_counts = [*emf.THROUGHPUT, *emf.FAILURES, *emf.OTHER_OUTCOMES]
    assert sorted(graphed_counts) == sorted(CONSUMER_METRICS.values())
    assert set(emf.REDRIVE_COUNTS) == set(REDRIVE_METRICS.values())
    assert tuple(DEAD_LETTER_REASONS) == emf.DEAD_LETTER_REASONS
    assert sorted(COUNTS) == sorted([*emf.THROUGHPUT, *emf.FAILURES])


def test_the_dashboard_graphs_the_consumers_metrics(metrics_synthesis: Synthesis) -> None:
    """Namespace, names, dimensions and statistics exactly as the consumer writes them; the
    period holds at least one flush (emails flushes every 90 s: 120 s)."""
    for queue, namespace, period in (("orders", "Shop/sqsbatch", 60), ("emails", "sqsbatch", 120)):
        graphs = graphed(dashboard(metrics_synthesis, queue))
        on = (("QueueName", queue),)

        def line(name: str, stat: str, dimensions: Any = on) -> Graphed:
            return (namespace, name, dimensions, stat, period)  # noqa: B023

        assert graphs["Throughput (messages)"] == {
            line(m, "Sum") for m in ["Received", "Acked", "Retried", "DeadLettered"]
        }
        assert graphs["Failures"] == {
            line(m, "Sum")
            for m in [
                "HandlerErrors",
                "HandlerTimeouts",
                "SettleFailures",
                "ReceiveErrors",
                "ExpiredReceipts",
            ]
        }
        assert graphs["Handler duration (ms)"] == {
            line("HandlerDuration", "p50"),
            line("HandlerDuration", "p99"),
        }
        assert graphs["Message age at delivery (ms)"] == {
            line("MessageAge", "Maximum"),
            line("MessageAge", "p99"),
        }
        assert graphs["Dead-lettered by reason"] == {
            line("DeadLettered", "Sum", (("QueueName", queue), ("Reason", reason)))
            for reason in REASONS
        }
        assert {name for _, name, *_ in everything(graphs)} >= set(COUNTS)
        assert sqs(queue, "ApproximateNumberOfMessagesVisible") in graphs[f"Messages in {queue}"]


def test_the_dashboard_graphs_the_redrive_daemon_on_its_dlq(metrics_synthesis: Synthesis) -> None:
    for queue, dlq, namespace, period in (
        ("orders", "orders-dlq", "Shop/sqsbatch", 60),
        ("emails", "shared-dlq", "sqsbatch", 120),
    ):
        graphs = graphed(dashboard(metrics_synthesis, queue))
        assert graphs[f"Redrive daemon on {dlq}"] == {
            (namespace, name, (("QueueName", dlq),), "Sum", period) for name in REDRIVE
        }


def test_a_queue_with_metrics_off_keeps_the_sqs_graphs(metrics_synthesis: Synthesis) -> None:
    """audit's metrics are off, though it shares a DLQ (and its daemon) with emails."""
    graphs = graphed(dashboard(metrics_synthesis, "audit"))
    assert {namespace for namespace, *_ in everything(graphs)} == {"AWS/SQS"}
    assert not [key for key in metric_alarms(metrics_synthesis) if key[0] == "audit"]


def test_alarms_watch_the_consumers_metrics(metrics_synthesis: Synthesis) -> None:
    alarms = metric_alarms(metrics_synthesis)
    # A Lambda consumer never receives (its event source does): no ReceiveErrors alarm.
    assert set(alarms) == {
        ("orders", "HandlerTimeouts"),
        ("orders", "SettleFailures"),
        ("orders", "MessageAge"),
        ("emails", "HandlerTimeouts"),
        ("emails", "SettleFailures"),
        ("emails", "ReceiveErrors"),
        ("emails", "MessageAge"),
    }
    namespaces = {"orders": "Shop/sqsbatch", "emails": "sqsbatch"}
    periods = {"orders": 60, "emails": 120}
    for (queue, name), alarm in alarms.items():
        assert alarm["Namespace"] == namespaces[queue]
        assert alarm["Period"] == periods[queue]
        assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
        assert alarm["TreatMissingData"] == "notBreaching"
        assert alarm["AlarmActions"] == [TOPIC]
        if name == "MessageAge":
            assert alarm["ExtendedStatistic"] == "p99"
            assert alarm["EvaluateLowSampleCountPercentile"] == "evaluate"
            assert "Statistic" not in alarm
        else:
            assert alarm["Statistic"] == "Sum"
            if name != "ReceiveErrors":
                assert (alarm["Threshold"], alarm["EvaluationPeriods"]) == (0, 1)
        if name in ("ReceiveErrors", "MessageAge"):  # sustained: 3 of the last 5 periods
            assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (5, 3)
    assert alarms[("emails", "ReceiveErrors")]["Threshold"] == 0
    # Milliseconds: orders' default, 300 s past its delivery_delay (10) and retry_delay (30);
    # emails' own setting.
    assert alarms[("orders", "MessageAge")]["Threshold"] == (300 + 10 + 30) * 1000
    assert alarms[("emails", "MessageAge")]["Threshold"] == 120 * 1000


def test_every_alarm_notifies_the_same_topic(metrics_synthesis: Synthesis) -> None:
    alarms = resources(metrics_synthesis.template, "AWS::CloudWatch::Alarm").values()
    assert len(alarms) == 7 + 3 + 2 * 2  # the metrics', the queues' age, the DLQs' age and depth
    assert {json.dumps(a["Properties"]["AlarmActions"]) for a in alarms} == {json.dumps([TOPIC])}


def test_the_age_graph_marks_the_alarm_threshold(metrics_synthesis: Synthesis) -> None:
    body = dashboard(metrics_synthesis, "orders")
    marks = {
        widget["properties"]["title"]: widget["properties"]["annotations"]["horizontal"][0]["value"]
        for widget in body["widgets"]
        if "annotations" in widget.get("properties", {})
    }
    assert marks == {"Age of the oldest message (s)": 900, "Message age at delivery (ms)": 340_000}


# Settings -------------------------------------------------------------------------------------


def test_the_environment_carries_metrics_only_when_on(monkeypatch: pytest.MonkeyPatch) -> None:
    values: dict[str, Any] = {"metrics": "emf", "metrics_namespace": "A/b", "metrics_interval": 30}
    config = ConsumerConfig(dead_letter_queue="d", **values)
    # Off: the namespace and interval do nothing, so no variable says anything about metrics.
    off = ConsumerConfig(dead_letter_queue="d", metrics_namespace="A/b")
    assert not [key for key in consumer_environment(off) if "METRICS" in key]
    for key, value in consumer_environment(config).items():
        monkeypatch.setenv(key, value)
    assert ConsumerConfig() == config


def test_dashboard_names_take_no_dot() -> None:
    assert dashboard_name("shop", "orders.fifo") == "shop-orders-fifo"
    assert re.fullmatch(r"[A-Za-z0-9_-]+", dashboard_name("s" * 128, "q" * 75 + ".fifo"))


def test_the_message_age_threshold_defaults_past_the_delays() -> None:
    config = ConsumerConfig(dead_letter_queue="d", retry_delay=45)
    assert QueuePlan("q", config, QueueSettings(queue="q")).message_age_alarm_seconds == 345
    delayed = QueueSettings(queue="q", delivery_delay=900)
    assert QueuePlan("q", config, delayed).message_age_alarm_seconds == 1245
    given = QueueSettings(queue="q", message_age_alarm_seconds=60)
    assert QueuePlan("q", config, given).message_age_alarm_seconds == 60


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ('metrics = "statsd"', r"metrics='statsd' is invalid"),
        ('metrics_namespace = "my app"', r"metrics_namespace='my app' is invalid"),
        ('metrics_namespace = ""', r"metrics_namespace='' is invalid"),
        ("metrics_interval = 0", r"metrics_interval=0 is invalid"),
        ("metrics_interval = 3601", r"metrics_interval=3601 is invalid"),
    ],
)
def test_bad_metrics_settings_fail_with_one_line(
    tmp_path: Path, setting: str, message: str
) -> None:
    path = tmp_path / "sqsbatch.toml"
    path.write_text(f'[[queues.consumers]]\nqueue = "jobs"\ndead_letter_queue = "d"\n{setting}\n')
    with pytest.raises(ConfigError, match=message) as caught:
        load_plan(path)
    assert "\n" not in str(caught.value)


def test_a_redriven_dlq_needs_one_namespace(tmp_path: Path) -> None:
    """Its daemon writes to one namespace, so the sources that turn metrics on must agree."""
    path = tmp_path / "sqsbatch.toml"
    audit = 'queue = "audit"\nmetrics = "emf"\nmetrics_namespace = "Audit"'
    path.write_text(METRICS_ON.replace('queue = "audit"', audit, 1))
    with pytest.raises(ConfigError, match=re.escape("send metrics to 'Audit' and 'sqsbatch'")):
        load_plan(path)


def test_the_docs_example_turns_metrics_on(tmp_path: Path) -> None:
    """The `toml` block of "Dashboard and alarms" in docs/operations.md is a file the app
    accepts, and means what the text says."""
    heading = "## Dashboard and alarms"
    text = (REPO / "docs" / "operations.md").read_text()
    block = text.split(heading, 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "sqsbatch.toml"
    path.write_text(block)
    (queue,) = load_plan(path).queues
    assert metrics_of(queue.config) == Metrics("sqsbatch", 60)
    assert queue.message_age_alarm_seconds == 600
