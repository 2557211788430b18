"""SQS requests failing at a given rate: lost and duplicated messages, whether the loop lives,
and throughput as a ratio of the fault-free run, for each front end.

    .venv/bin/python bench/faults.py [--messages 300] [--rates 0 0.3] [--repeat 1]
        [--front-ends sync async loop redrive lambda] [--faults 500 throttle drop drop-after slow]

Full figures: `--messages 2000 --rates 0 0.1 0.3 0.5`. The pollers beside the hand loop:
`--messages 2000 --rates 0 0.1 --front-ends sync async loop --repeat 3`. Each round runs every
front end at one rate, then at the next, so that the front ends compared share the same minutes;
at the end, each front end's ratios to its own first rate, round by round, and the pollers' to
the hand loop's of the same round.

A local SQS (bench/_local.py) and, in front of it, bench/_proxy.py's FaultProxy: each request
through it gets, with probability `rate`, one fault drawn uniformly from `--faults` (an HTTP 500,
a throttling error in SQS's JSON protocol shape, the connection dropped before or after the
request took effect, the answer 1-4 s late). Only the front end's own requests go through it;
the bench fills and reads the queues directly. For each front end and rate, a fresh queue and DLQ
(`create_queue(max_retries=2)`: maxReceiveCount 3) and `--messages` messages `{"id": N}`:
- sync / async: `sqsbatch --endpoint-url <proxy> consume bench/_ledger.py:settle_mixed` (with
  `--async`, `settle_mixed_async`), `--max-concurrency 4`, batches of 10 with no wait, visibility
  timeout 5 s, long polls of 1 s, `--max-retries 2 --dead-letter-queue <dlq>`.
- lambda: `lambda_handler(config=ConsumerConfig(max_retries=2, dead_letter_queue=<dlq>,
  visibility_timeout=5), client=<a boto3 client on the proxy>)` around the same handler, called
  in this process with events built from ReceiveMessage(10) on the queue (directly, as the event
  source mapping would); the records not in `batchItemFailures` are deleted (directly), an
  invocation that raises leaves them all to come back.
- loop: bench/_hand_loop.py, what a user would write by hand with boto3: 4 threads (the
  pollers' `--max-concurrency 4`) sharing one client with botocore's default configuration
  (legacy retries), each receiving 10 (long poll 1 s, visibility 5 s), making the handler's
  choices, then `ChangeMessageVisibilityBatch` for the retries, `SendMessageBatch` to the DLQ
  for a failure at its 3rd receive, `DeleteMessageBatch` for the rest (its docstring).
- redrive: the messages start in the DLQ; `redrive --endpoint-url <proxy> run --dlq <dlq>
  --base-delay 0 --jitter 0` (visibility 5 s, long polls of 1 s) moves them back to the source,
  where they stay.
The handler (bench/_ledger.py) acks most messages and records their ids; ids ending in 0 always
fail (retry: dead-lettered after 3 deliveries), ids ending in 1 are retried once with a 1 s
delay. A run ends when the source queue (redrive: the DLQ) is empty, or after `--timeout` s.
Then: lost = ids neither acked nor in the queue nor in the DLQ (redrive: in neither queue);
duplicated = acks beyond the first per id (redrive: copies beyond the first in the source);
alive = the poller / daemon process was still running (then SIGTERM: its exit code is shown);
msg/s = messages over the time to empty the queue (pollers: from their first handler call, so
that the process's start-up is not in it; redrive: from the process's start), and its ratio to
the first rate's run. That time ends with the stragglers: a message whose receive answer or
delete was lost comes back only after the 5 s visibility timeout. "To 90 %" leaves that tail
out: messages over the time from the first message handled (redrive: moved, from its
`action=moved` log lines) to 90 % of them.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.support

from _ledger import (
    Tally,
    body_id,
    count_queue,
    fill,
    first_times,
    mixed,
    read_ledger,
    sqs_client,
    steady_rate,
    work_directory,
)
from _local import command, local_sqs
from _proxy import FAULTS, FaultControl, fault_proxy

import sqsbatch
from sqsbatch import ConsumerConfig, MessageBatch, create_queue, lambda_handler
from tests.support.front_ends import record as lambda_record

HERE = Path(__file__).resolve().parent
SERVER_LIFETIME_SECONDS = 14400
VISIBILITY_SECONDS = 5
ACCOUNT = "123456789012"  # moto's default account
REGION = "us-east-1"
ENV = {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local", "AWS_DEFAULT_REGION": REGION}


@dataclass
class Setup:
    proxy: str
    direct: Any  # a boto3 client on the SQS itself
    queue: str
    url: str
    dlq_url: str
    work: Path
    args: argparse.Namespace

    @property
    def dlq(self) -> str:
        return f"{self.queue}-dlq"


@dataclass
class Outcome:
    tally: Tally
    seconds: float
    done: bool
    alive: str  # "yes (exit 0 on SIGTERM)", "no: exit 1", "n/a"
    notes: str = ""
    steady: float | None = None  # msg/s up to 90 % of the messages first handled


def empty(client: Any, url: str) -> bool:
    names = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    ]
    found = client.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return all(int(found[name]) == 0 for name in names)


def wait_empty(
    setup: Setup, url: str, started: float, alive: Callable[[], bool], step: Callable[[], None]
) -> tuple[bool, float]:
    """(emptied, seconds): until `url` is empty twice in a row, `alive()` fails, or the timeout."""
    seen_empty_at: float | None = None
    while time.monotonic() - started < setup.args.timeout and alive():
        step()
        if empty(setup.direct, url):
            if seen_empty_at is not None:
                return True, seen_empty_at - started
            seen_empty_at = time.monotonic()
            time.sleep(1.0)
        else:
            seen_empty_at = None
    return False, time.monotonic() - started


# -- the front ends ------------------------------------------------------------------------


def run_poller(setup: Setup, poller: str) -> Outcome:
    ledger = str(setup.work / f"{setup.queue}.ledger")
    handler = "settle_mixed_async" if poller == "async" else "settle_mixed"
    args = [str(Path(sys.executable).parent / "sqsbatch"), "--endpoint-url", setup.proxy]
    args += ["consume", f"{HERE / '_ledger.py'}:{handler}", "-q", setup.queue]
    args += ["--max-concurrency", "4", "--max-batch-timeout", "0", "--poll-seconds", "1"]
    args += ["--visibility-timeout", str(VISIBILITY_SECONDS), "--max-retries", "2"]
    args += ["--dead-letter-queue", setup.dlq, "--log-format", "plain"]
    if poller == "async":
        args.append("--async")
    if poller == "loop":  # the hand-written loop: same concurrency, botocore's defaults
        args = [sys.executable, str(HERE / "_hand_loop.py"), setup.proxy, setup.url, setup.dlq_url]
        args += ["--concurrency", "4"]
    sent = set(range(setup.args.messages))
    fill(setup.direct, setup.url, sent)
    log_path = setup.work / f"{setup.queue}.log"
    with open(log_path, "w") as log:
        child = subprocess.Popen(
            args,
            env={**os.environ, **ENV, "BENCH_LEDGER": ledger},
            stderr=log,
            stdout=subprocess.DEVNULL,
        )
        started, wall_started = time.monotonic(), time.time()
        done, seconds = wait_empty(
            setup, setup.url, started, lambda: child.poll() is None, lambda: time.sleep(0.5)
        )
        alive = stop_child(child)
    handled, times = read_ledger(ledger)
    if times:  # from the first handler call: the process's start-up is not the poller's speed
        seconds -= max(0.0, min(times) - wall_started)
    tally = Tally(sent, handled)
    outcome = finish(setup, tally, seconds, done=done, alive=alive, log_path=log_path)
    outcome.steady = steady_rate(first_times(ledger))
    return outcome


def stop_child(child: subprocess.Popen[bytes]) -> str:
    if child.poll() is not None:
        return f"NO: exited {child.returncode} during the run"
    child.send_signal(signal.SIGTERM)
    try:
        return f"yes (exit {child.wait(timeout=60)} on SIGTERM)"
    except subprocess.TimeoutExpired:
        child.kill()
        return "yes (did not stop in 60 s after SIGTERM: killed)"


def run_redrive(setup: Setup) -> Outcome:
    sent = set(range(setup.args.messages))
    fill(setup.direct, setup.dlq_url, sent)
    args = [str(Path(sys.executable).parent / "redrive"), "--endpoint-url", setup.proxy, "run"]
    args += ["--dlq", setup.dlq, "--base-delay", "0", "--jitter", "0", "--log-format", "plain"]
    args += ["--log-level", "info"]
    env = {
        **os.environ,
        **ENV,
        "REDRIVE_VISIBILITY_TIMEOUT": str(VISIBILITY_SECONDS),
        "REDRIVE_WAIT_SECONDS": "1",
    }
    log_path = setup.work / f"{setup.queue}.log"
    with open(log_path, "w") as log:
        child = subprocess.Popen(args, env=env, stderr=log, stdout=subprocess.DEVNULL)
        started = time.monotonic()
        done, seconds = wait_empty(
            setup, setup.dlq_url, started, lambda: child.poll() is None, lambda: time.sleep(0.5)
        )
        alive = stop_child(child)
    source = count_queue(setup.direct, setup.url)
    tally = Tally(sent, Counter(), source, count_queue(setup.direct, setup.dlq_url))
    tally.handled = source  # a copy in the source is the daemon's "handled": copies beyond 1 dup
    tally.queued = Counter()
    outcome = Outcome(tally, seconds, done, alive, notes=log_notes(log_path))
    outcome.steady = steady_rate(moved_times(log_path))
    return outcome


def moved_times(log_path: Path) -> list[float]:
    """When the daemon logged each message's first `action=moved` (its plain log lines)."""
    first: dict[str, float] = {}
    for line in log_path.read_text(errors="replace").splitlines():
        if "action=moved" in line:
            ident = next((w for w in line.split() if w.startswith("id=")), line)
            first.setdefault(ident, datetime.fromisoformat(line.split()[0]).timestamp())
    return sorted(first.values())


@dataclass
class Invocations:
    count: int = 0
    raised: int = 0
    errors: Counter[str] | None = None


def run_lambda(setup: Setup) -> Outcome:
    sent = set(range(setup.args.messages))
    fill(setup.direct, setup.url, sent)
    acked: Counter[int] = Counter()
    first: dict[int, float] = {}
    config = ConsumerConfig(
        max_retries=2, dead_letter_queue=setup.dlq, visibility_timeout=VISIBILITY_SECONDS
    )

    def handler(batch: MessageBatch) -> None:
        ids = mixed(batch)
        acked.update(ids)
        now = time.time()
        for n in ids:
            first.setdefault(n, now)

    function = lambda_handler(config=config, client=sqs_client(setup.proxy))(handler)
    arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{setup.queue}"
    calls = Invocations(errors=Counter())

    def invoke_once() -> None:
        messages = setup.direct.receive_message(
            QueueUrl=setup.url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=1,
            VisibilityTimeout=VISIBILITY_SECONDS,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            return
        calls.count += 1
        try:
            answer = function({"Records": [lambda_record(m, arn) for m in messages]}, None)
        except Exception as exc:
            calls.raised += 1
            assert calls.errors is not None
            calls.errors[type(exc).__name__] += 1
            return
        failed = {item["itemIdentifier"] for item in answer["batchItemFailures"]}
        entries = [
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
            for i, m in enumerate(messages)
            if m["MessageId"] not in failed
        ]
        if entries:
            setup.direct.delete_message_batch(QueueUrl=setup.url, Entries=entries)

    started = time.monotonic()
    done, seconds = wait_empty(setup, setup.url, started, lambda: True, invoke_once)
    function.close()
    notes = f"{calls.count} invocations, {calls.raised} raised {dict(calls.errors or {})}"
    alive = "n/a (in-process)"
    outcome = finish(
        setup, Tally(sent, acked), seconds, done=done, alive=alive, log_path=None, notes=notes
    )
    outcome.steady = steady_rate(sorted(first.values()))
    return outcome


def finish(
    setup: Setup,
    tally: Tally,
    seconds: float,
    *,
    done: bool,
    alive: str,
    log_path: Path | None,
    notes: str = "",
) -> Outcome:
    tally.queued = count_queue(setup.direct, setup.url)
    dead: list[dict[str, Any]] = []
    tally.dead = count_queue(setup.direct, setup.dlq_url, seen=dead)
    notes = notes or (log_notes(log_path) if log_path else "")
    return Outcome(tally, seconds, done, alive, f"{notes}{unhandled_in_dlq(tally, dead)}")


def unhandled_in_dlq(tally: Tally, dead: list[dict[str, Any]]) -> str:
    """Ackable ids (not ending in 0) that reached the DLQ without an ack: who put them there."""
    found = []
    by_sqs = 0  # moved by the queue's RedrivePolicy (moto's move on receive), not by a consumer
    for message in dead:
        n = body_id(message["Body"])
        attributes = message.get("MessageAttributes", {})
        by = "consumer" if {"sqsbatch", "hand_loop"} & set(attributes) else "SQS"
        by_sqs += by == "SQS"
        if n % 10 and n not in tally.handled:
            count = message["Attributes"].get("ApproximateReceiveCount")
            found.append(f"{n} (moved by {by}, receive count {count})")
    moved = f"; {by_sqs} moved to the DLQ by SQS's RedrivePolicy" if by_sqs else ""
    return moved + (f"; ackable ids in the DLQ, never acked: {', '.join(found)}" if found else "")


def log_notes(log_path: Path) -> str:
    """The kinds of WARNING/ERROR lines the child logged, counted."""
    kinds: Counter[str] = Counter()
    for line in log_path.read_text(errors="replace").splitlines():
        if line.startswith("hand loop: "):  # bench/_hand_loop.py: a call that failed
            kinds[f"loop error {line.split()[2].rstrip(':')}"] += 1
            continue
        for level in ("WARNING", "ERROR", "CRITICAL", "Traceback"):
            if level in line:
                action = next((w for w in line.split() if w.startswith("action=")), "")
                kinds[f"{level} {action}".strip()] += 1
    return ", ".join(f"{kind}: {n}" for kind, n in kinds.most_common(6))


# -- the table -------------------------------------------------------------------------------


def one_run(
    front_end: str,
    rate: float,
    *,
    server: str,
    proxy: str,
    control: FaultControl,
    work: Path,
    args: argparse.Namespace,
) -> Outcome:
    direct = sqs_client(server)
    queue = f"faults-{front_end}-{int(rate * 100)}-{time.monotonic_ns()}"
    url = create_queue(queue, dead_letter_queue=f"{queue}-dlq", max_retries=2, client=direct)
    dlq_url = direct.get_queue_url(QueueName=f"{queue}-dlq")["QueueUrl"]
    setup = Setup(proxy, direct, queue, url, dlq_url, work, args)
    before_faults, before_requests = control.fault_counts(), control.requests.value
    control.rate.value = rate
    try:
        if front_end in ("sync", "async", "loop"):
            outcome = run_poller(setup, front_end)
        elif front_end == "redrive":
            outcome = run_redrive(setup)
        else:
            outcome = run_lambda(setup)
    finally:
        control.rate.value = 0.0
    faults = {
        k: v - before_faults[k] for k, v in control.fault_counts().items() if v > before_faults[k]
    }
    outcome.notes = (
        f"{control.requests.value - before_requests} requests, faults {faults}; {outcome.notes}"
    )
    return outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--rates", type=float, nargs="+", default=[0.0, 0.3])
    parser.add_argument(
        "--front-ends",
        nargs="+",
        choices=["sync", "async", "loop", "redrive", "lambda"],
        default=["sync", "async", "loop", "redrive", "lambda"],
    )
    parser.add_argument("--faults", nargs="+", choices=FAULTS, default=list(FAULTS))
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run, at most")
    parser.add_argument("--seed", type=int, default=1, help="the proxy's random draws")
    parser.add_argument(
        "--repeat", type=int, default=1, help="rounds: each runs every rate of every front end"
    )
    parser.add_argument(
        "--logs", help="keep the children's logs and the ledgers in a new directory under this one"
    )
    args = parser.parse_args()
    with (
        local_sqs(SERVER_LIFETIME_SECONDS) as server,
        fault_proxy(server.endpoint, args.faults, seed=args.seed) as (proxy, control),
        work_directory(args.logs, "faults-") as work,
    ):
        print(server.versions("sqsbatch", "boto3", "aioboto3", "moto"))
        print(f"sqsbatch from {Path(sqsbatch.__file__).parent}; fault proxy at {proxy}")
        print(f"faults: {', '.join(args.faults)}; {args.messages} messages a run\n", flush=True)
        ratios: dict[tuple[str, float], list[tuple[float, float]]] = {}
        lost = 0
        for round_ in range(1, args.repeat + 1):
            base: dict[str, tuple[float, float]] = {}
            for rate in args.rates:  # every front end at one rate, then the next: side by side
                for front_end in args.front_ends:
                    out = one_run(
                        front_end,
                        rate,
                        server=server.endpoint,
                        proxy=proxy,
                        control=control,
                        work=Path(work),
                        args=args,
                    )
                    speed, steady = args.messages / out.seconds, out.steady or 0.0
                    first = base.setdefault(front_end, (speed, steady))
                    ratio = (speed / first[0], steady / first[1] if first[1] else 0.0)
                    ratios.setdefault((front_end, rate), []).append(ratio)
                    lost += len(out.tally.lost)
                    print(
                        f"round {round_} {front_end:8} {rate:4.0%}: "
                        f"{'emptied' if out.done else 'NOT EMPTIED'} in "
                        f"{out.seconds:.1f} s, {speed:.0f} msg/s ({ratio[0]:.2f} of the first "
                        f"rate); to 90 % of the messages: {steady:.0f} msg/s "
                        f"({ratio[1]:.2f}); alive: {out.alive}\n"
                        f"  {out.tally.line()}\n  {out.notes}",
                        flush=True,
                    )
    print_ratios(ratios)
    print(f"\nlost in all: {lost}")
    print(f"command: {command()}")


def print_ratios(ratios: dict[tuple[str, float], list[tuple[float, float]]]) -> None:
    """Each front end's ratios to its own first rate, round by round, and a poller's to the
    hand loop's in the same round (emptied; to 90 %)."""
    print("\nratios to the first rate, by round (emptied / to 90 %):")
    for (front_end, rate), found in ratios.items():
        shown = ", ".join(f"{a:.2f}/{b:.2f}" for a, b in found)
        line = f"  {front_end:8} {rate:4.0%}: {shown}"
        loop = ratios.get(("loop", rate))
        if front_end in ("sync", "async") and loop:
            pairs = zip(found, loop, strict=False)
            shown = ", ".join(f"{a / c:.2f}/{b / d if d else 0:.2f}" for (a, b), (c, d) in pairs)
            line += f"; to the hand loop's: {shown}"
        print(line)


if __name__ == "__main__":
    main()
