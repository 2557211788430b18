"""Bring your own CDK app: sqsbatch's constructs inside a stack of yours.

Run it as a CDK app (`"app": "python3 infra/own_app.py"`), or import `build` into your own.
docs/infra.md walks through it; tests/cdk/test_own_app.py synthesizes it.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import App, Stack, Validations
from cdk_nag import AwsSolutionsChecks

from sqsbatch.cdk import LambdaConsumer, QueueAlarms, QueueDashboard, QueueWithDlq
from sqsbatch.config import ConsumerConfig

HERE = Path(__file__).resolve().parent


def build(app: App) -> Stack:
    """One queue with its DLQ, a Lambda consumer, the alarms and a dashboard, from sqsbatch.toml."""
    stack = Stack(app, "my-orders-service")
    # The same settings the consumer reads: the queue cannot drift from them.
    config = ConsumerConfig.load("orders", HERE / "sqsbatch.toml")
    orders = QueueWithDlq(
        stack, "Orders", queue_name="orders", config=config, delivery_delay_seconds=10
    )
    LambdaConsumer(
        stack,
        "OrdersConsumer",
        queues=orders,
        asset_path=HERE / "lambda_asset",
        timeout_seconds=30,  # the queue's visibility timeout must be at least 6x this
    )
    QueueAlarms(
        stack, "OrdersAlarms", queue=orders.queue, queue_name="orders", oldest_message_seconds=900
    )
    QueueAlarms(
        stack,
        "OrdersDlqAlarms",
        queue=orders.dead_letter_queue,
        queue_name=orders.dead_letter.queue_name,
        oldest_message_seconds=3 * 86_400,
        dead_letter=True,
    )
    # Queue and DLQ depth and age; sqsbatch's own metrics too if the config turns them on.
    QueueDashboard(stack, "OrdersDashboard", queues=orders, oldest_message_seconds=900)
    return stack


if __name__ == "__main__":
    app = App()
    build(app)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()
