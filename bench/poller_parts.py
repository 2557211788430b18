"""What each part of a sync slot's work costs beside botocore: `Consumer` with one part cut out.

    .venv/bin/python bench/poller_parts.py [--messages 1000] [--rounds 15] [--bodies foreign]

`bench/poller_cpu.py` measures `Consumer` against a hand-written boto3 loop (receive 10,
handle, `DeleteMessageBatch`); at `max_concurrency` 1 on loopback a sync slot's throughput
follows its CPU, so what stands between the two is sqsbatch's own Python per batch. This bench
says where it is: beside the loop and `Consumer` as they are, it drains `Consumer` with one part
of a slot's work replaced, for that drain only, by the least that still consumes the queue:

- bare settle: `_process` makes the batch, calls the handler and deletes the batch with one bare
  `delete_message_batch` (no supervision, no handler end, no settle flow, no counters, no span);
- bare receive: `_receive` is one bare `receive_message` (the pollers' attributes) and a
  `ReceivedDelivery` per message (no receive flow, no screening, no counters);
- no watcher: the handler is called inline in a copy of the context, with no ticket on the
  watcher (no heartbeats, no `handler_timeout`);
- all cut: bare settle and bare receive at once (what is left: the slot's loop, the batch
  window, a delivery and a `Message` per message): the floor of this design on threads.

Cut out like this, the poller is no longer correct (nothing is counted, a failing handler
loses its batch's deletes, a batch is never kept hidden): this is a measurement, not an option.
The loop and every contender drain the same number of messages from a fresh queue on
bench/_lean_sqs.py in a child process, in alternating order, with the pollers' client config;
printed: client CPU per message (min, median) and the paired ratio to the loop (the median of
each round's own ratio, and its quartiles), and the paired ratio of msg/s.
"""

from __future__ import annotations

import argparse
import contextvars
import statistics
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from _lean_sqs import lean_sqs
from _local import Server, command
from poller_cpu import (
    SERVER_LIFETIME_SECONDS,
    Contender,
    Loop,
    Threads,
    cpu_per_message,
    drain_options,
    drain_rounds,
    paired,
)

from sqsbatch._core.receiving import ReceivedDelivery
from sqsbatch._core.shapes import RECEIVE_SYSTEM_ATTRIBUTES
from sqsbatch._sync.flavour import HandlerRun
from sqsbatch._sync.poller import Consumer
from sqsbatch.message import MessageBatch, _Delivery


def bare_process(self: Consumer, deliveries: list[_Delivery], *_: object) -> bool:
    batch = MessageBatch(self._require_context().name, deliveries)
    self.handler(batch)
    entries = [{"Id": str(i), "ReceiptHandle": d.receipt_handle} for i, d in enumerate(deliveries)]
    client = self._sqs.client
    client.delete_message_batch(QueueUrl=self._require_context().url, Entries=entries)
    self._last_activity = self._clock()
    return True


def bare_receive(self: Consumer, asked: int, wait_seconds: int, _window_left: float) -> list[Any]:
    answer = self._sqs.client.receive_message(
        QueueUrl=self._require_context().url,
        MaxNumberOfMessages=asked,
        WaitTimeSeconds=wait_seconds,
        MessageSystemAttributeNames=RECEIVE_SYSTEM_ATTRIBUTES,
        MessageAttributeNames=["All"],
    )
    now = self._clock()
    hidden_until = now + self.config.visibility_timeout
    received = [ReceivedDelivery(raw, now, hidden_until) for raw in answer.get("Messages", [])]
    if received:
        self._last_activity = now
    return received


def no_watcher(self: HandlerRun) -> None:
    try:
        contextvars.copy_context().run(self._handler, self._batch)
    except BaseException as exc:  # as `HandlerRun.run`: any failure fails the batch
        self._failure = exc


CUTS: dict[str, tuple[type, str, Callable[..., Any]]] = {
    "bare settle": (Consumer, "_process", bare_process),
    "bare receive": (Consumer, "_receive", bare_receive),
    "no watcher": (HandlerRun, "run", no_watcher),
}


@contextmanager
def cut(owner: type, name: str, replacement: Callable[..., Any]) -> Iterator[None]:
    """`owner.name` is `replacement` inside the block."""
    original = owner.__dict__[name]
    setattr(owner, name, replacement)
    try:
        yield
    finally:
        setattr(owner, name, original)


ALL_CUT = ("bare settle", "bare receive")
"""Both at once: what is left is the slot's loop, the batch window and the `Message`s (a bare
settle calls the handler itself, so no watcher either)."""


class Cut(Threads):
    """`Consumer` (as bench/poller_cpu.py drains it) with `parts` cut out while it drains."""

    def __init__(self, server: Server, concurrency: int, name: str, parts: tuple[str, ...]) -> None:
        super().__init__(server, concurrency)
        self.name = name
        self.parts = [CUTS[part] for part in parts]

    def drain(self, queue: str, tally: Any) -> None:
        with ExitStack() as stack:
            for part in self.parts:
                stack.enter_context(cut(*part))
            super().drain(queue, tally)


def run(server: Server, args: argparse.Namespace) -> list[Contender]:
    contenders: list[Contender] = [Loop(server, 1), Threads(server, 1)]
    contenders += [Cut(server, 1, part, (part,)) for part in CUTS]
    contenders.append(Cut(server, 1, "all cut", ALL_CUT))
    drain_rounds(server, contenders, args)
    return contenders


def report(contenders: list[Contender], messages: int) -> None:
    cpu = {c.name: cpu_per_message(c, messages) for c in contenders}
    rates = {c.name: [messages / d.seconds for d in c.runs] for c in contenders}
    loop, loop_rates = cpu[contenders[0].name], rates[contenders[0].name]
    print(f"\nmax_concurrency 1, {messages} messages a drain, {len(loop)} rounds")
    print(
        f"  {'':14} {'client CPU us/msg':>17}   {'paired CPU ratio to the loop':>29}   "
        f"{'msg/s, paired':>13}"
    )
    print(
        f"  {'':14} {'min':>7} {'median':>9}   {'25 %':>6} {'median':>7} {'75 %':>6}   "
        f"{'to the loop':>13}"
    )
    for contender in contenders:
        mine = cpu[contender.name]
        ratios = [m / b for m, b in zip(mine, loop, strict=True)]
        low, _, high = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
        print(
            f"  {contender.name:14} {min(mine):7.1f} {statistics.median(mine):9.1f}   "
            f"{low:6.2f} {paired(mine, loop):7.2f} {high:6.2f}   "
            f"{paired(rates[contender.name], loop_rates):13.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    drain_options(parser, rounds=15)
    args = parser.parse_args()
    with lean_sqs(SERVER_LIFETIME_SECONDS) as server:
        print(server.versions("sqsbatch", "boto3"))
        print(f"local SQS in a child process at {server.endpoint}")
        report(run(server, args), args.messages)
    print(f"\ncommand: {command()}")


if __name__ == "__main__":
    main()
