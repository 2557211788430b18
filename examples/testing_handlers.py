"""Testing a handler without SQS: `sqsbatch.testing.run_handler` hands it the bodies you give,
as a consumer would, and says what it decided, settled by the same rules as the real consumers.

The `test_*` functions are what you would put in your own test suite (pytest collects them
there); `python examples/testing_handlers.py` runs them here. No AWS account, no local SQS.
"""

from __future__ import annotations

from sqsbatch import ConsumerConfig, MessageBatch
from sqsbatch.testing import TestMessage, run_handler


def handle(batch: MessageBatch) -> None:  # the handler under test
    for message in batch.messages:
        if not isinstance(message.body, dict):
            raise TypeError(f"not an order: {message.body!r}")  # fails the rest of the batch
        if message.body["card"] % 10 == 0:  # declined: try again in 1 min, 2 min, 3 min...
            message.retry(delay_seconds=60 * message.attempts)
        else:
            message.ack()


CONFIG = ConsumerConfig(max_retries=3, dead_letter_queue="orders-dlq")


def test_a_declined_card_is_retried_later() -> None:
    result = run_handler(handle, [{"id": 1, "card": 4242}, {"id": 2, "card": 4240}], config=CONFIG)
    assert result.acked == [0]
    assert result.retried == {1: 60}  # message index: delay in seconds


def test_retries_back_off_until_the_last_delivery_is_dead_lettered() -> None:
    declined = {"id": 2, "card": 4240}
    third = run_handler(handle, [TestMessage(declined, attempts=3)], config=CONFIG)
    last = run_handler(handle, [TestMessage(declined, attempts=4)], config=CONFIG)
    assert third.retried == {0: 180}
    assert last.dead_lettered == [0]  # delivery max_retries + 1 failed: off to orders-dlq


def test_a_raise_retries_what_is_undecided_and_keeps_the_acks() -> None:
    result = run_handler(handle, [{"id": 1, "card": 4242}, "not an order"], config=CONFIG)
    assert isinstance(result.raised, TypeError)
    assert result.acked == [0]  # acked before the raise: it holds
    assert result.retried == {1: 0}  # undecided: retried after retry_delay (default 0)
    assert not result.outcomes[1].explicit  # decided by the raise, not by a retry() call


def main() -> None:
    for test in (
        test_a_declined_card_is_retried_later,
        test_retries_back_off_until_the_last_delivery_is_dead_lettered,
        test_a_raise_retries_what_is_undecided_and_keeps_the_acks,
    ):
        test()
        print(f"passed: {test.__name__}")


if __name__ == "__main__":
    main()
