"""What a poller adds to a hand-written loop: client CPU per message and msg/s, side by side.

    .venv/bin/python bench/poller.py [--server moto|lean|stub] [--delay-ms 0]
        [--messages 1000] [--rounds 5] [--concurrency 1 4] [--bodies foreign|sqsbatch]
        [--extra legacy validating overlapped] [--instructions [--jobs 2]]

The local SQS (`--server`) runs in a child process, so the CPU of this process is the client's
alone: `time.process_time()` (every thread) from the start of a drain to its end.
- moto (the default): moto's server, `sqsbatch.dev.server.LocalSqs` with sqsbatch's moto speed-up.
  It spends 1.4-1.8 ms of CPU per message drained, and closes each connection after its
  answer: on 2 CPUs it, not the client, caps msg/s (every contender near 280-490 msg/s).
- lean: bench/_lean_sqs.py, a bench-only in-memory SQS (20-85 us a message, keep-alive), where
  the client's own msg/s shows (docs/performance.md says what it earns, with figures).
- stub: no server at all: bench/_stub_sqs.py answers in this process, without botocore, so
  what is left is the poller's own Python beside the loop's (its overhead, apart from botocore).
`--delay-ms D` adds D to every request: through bench/_proxy.py's delaying proxy in front of
moto or lean (each request/response round trip takes D longer), or a sleep per stub call.

Each round fills a fresh queue with `--messages` messages (SendMessageBatch of 10, straight to
the server, not timed; moto's receive slows with depth, so queues stay that shallow) and drains
it with each contender in turn (the order rotating from round to round), after one untimed
warm-up drain of `--warmup` each. Every handler json-decodes each body and succeeds.
- boto3 loop: ReceiveMessage of 10 (the pollers' attributes, WaitTimeSeconds 1), handle,
  DeleteMessageBatch; its client has the pollers' own `Config` (`client_config(validate=False)`).
- boto3 threads (above `max_concurrency` 1): N threads, each that loop, on one client: what
  threads cost in CPython, and a well-written parallel hand loop's msg/s.
- aioboto3 loop: the same loop for aioboto3, AsyncConsumer's own baseline.
- Consumer / AsyncConsumer: `ConsumerConfig(max_batch_size=10, max_batch_timeout=0,
  max_concurrency=N)`, `run_until_idle(1)`, stopped by the handler once all were handled; their
  start (GetQueueUrl, GetQueueAttributes) is counted, building the client is not.
- `--extra legacy`: the loop on botocore's default client (legacy retries, validation), as a
  loop written without a `Config`; `validating`: with validation on (what the pollers save by
  turning it off); `overlapped`: each loop sending its deletes beside its next receive (a thread
  of one worker, or a task): the question behind `sqsbatch._core.closing.settles_behind`.

Printed per contender: client CPU us/message (min, median) and its ratio to the loop of its
flavour (of the mins, of the medians, and paired: the median of each round's own ratio, which a
slow minute of this shared machine moves least), msg/s (start of the drain to the last handler
call) and its paired ratio, requests per message (retries included), server CPU per message.

`--instructions` counts instead of timing, on the stub: each contender drains in a child of its
own under `valgrind --tool=callgrind` (instructions retired: the same run after run, where CPU
seconds move 5-10 % here), once `--messages` (10,000 unless given) and once a tenth of that,
after a warm-up; the difference over the messages between is its instructions per message,
without what a process and a start cost once. `--delay-ms` is 0 and `--concurrency` 1 unless
given. Under valgrind the pollers' timed wake-ups come more often per message: counted to them.
"""

from __future__ import annotations

import argparse
import logging
import re
import shutil
import statistics
import subprocess
import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager

import boto3
from _lean_sqs import lean_sqs
from _local import Server, command, local_sqs
from _poller_contenders import CONTENDERS, Contender, Target, credentials, fill
from _proxy import delay_proxy
from _stub_sqs import StubSqs

SERVER_LIFETIME_SECONDS = 1800
TARGET = 1.10
"""The most client CPU per message a poller should spend, as a ratio to its loop's."""
STANDARD = ["boto3 loop", "boto3 threads", "Consumer", "aioboto3 loop", "AsyncConsumer"]
EXTRA = {
    "legacy": ["loop, legacy"],
    "validating": ["loop, validating"],
    "overlapped": ["boto3, deletes beside", "aioboto3, deletes beside"],
}


@contextmanager
def target(args: argparse.Namespace) -> Iterator[Target]:
    """The server (or stub) the contenders drain, behind the delay when one is asked for."""
    if args.server == "stub":
        stub = StubSqs(args.delay_ms / 1000)
        yield Target(Server("stub", False, 0, "stub"), "stub", stub)
        return
    start = lean_sqs if args.server == "lean" else local_sqs
    with ExitStack() as stack:
        server = stack.enter_context(start(SERVER_LIFETIME_SECONDS))
        endpoint = server.endpoint
        if args.delay_ms:
            delayed = delay_proxy(endpoint, args.delay_ms / 1000, 512, SERVER_LIFETIME_SECONDS)
            endpoint, _ = stack.enter_context(delayed)
        yield Target(server, endpoint, None)


def contenders_for(args: argparse.Namespace, concurrency: int) -> list[str]:
    names = [n for n in STANDARD if n != "boto3 threads" or concurrency > 1]
    return names + [name for extra in args.extra for name in EXTRA[extra]]


def drain_rounds(where: Target, contenders: list[Contender], args: argparse.Namespace) -> None:
    """A warm-up drain of `args.warmup` messages each, then `args.rounds` timed drains of
    `args.messages` each, every one from a fresh queue, the order rotating from round to round;
    the contenders are closed at the end."""
    filler = where.stub or boto3.session.Session().client(
        "sqs", **credentials(where.server.endpoint)
    )
    stamp = uuid.uuid4().hex[:8]
    try:
        for index, contender in enumerate(contenders):  # first-use costs, connections
            queue = f"bench-warm-{stamp}-{index}"
            fill(filler, queue, args.warmup, args.bodies)
            contender.measure(queue, args.warmup)
        for round_ in range(args.rounds):
            shift = round_ % len(contenders)
            for index, contender in enumerate(contenders[shift:] + contenders[:shift]):
                queue = f"bench-{stamp}-{round_}-{index}"
                fill(filler, queue, args.messages, args.bodies)
                contender.runs.append(contender.measure(queue, args.messages))
    finally:
        for contender in contenders:
            contender.close()


def paired(mine: list[float], base: list[float]) -> float:
    """The median of round-by-round ratios (round i of each: drained in the same minute)."""
    return statistics.median(m / b for m, b in zip(mine, base, strict=True))


def report(contenders: list[Contender], messages: int, concurrency: int) -> None:
    print(f"\nmax_concurrency {concurrency} (loops are sequential), {messages} messages a drain")
    print(
        f"  {'':24} {'client CPU us/msg':>17} {'CPU vs loop':>20} {'msg/s':>15} "
        f"{'requests':>9} {'server CPU':>11}"
    )
    units = ("min", "median", "min", "median", "paired", "median", "paired", "/msg", "us/msg")
    widths = (7, 9, 6, 6, 6, 7, 7, 9, 11)
    print(f"  {'':24} " + " ".join(f"{u:>{w}}" for u, w in zip(units, widths, strict=True)))
    cpu = {c.name: [d.cpu / messages * 1e6 for d in c.runs] for c in contenders}
    rates = {c.name: [messages / d.seconds for d in c.runs] for c in contenders}
    for contender in contenders:
        name, base = contender.name, contender.baseline
        mine, loop = cpu[name], cpu[base]
        runs = contender.runs
        print(
            f"  {name:24} {min(mine):7.1f} {statistics.median(mine):9.1f} "
            f"{min(mine) / min(loop):6.2f} "
            f"{statistics.median(mine) / statistics.median(loop):6.2f} "
            f"{paired(mine, loop):6.2f} {statistics.median(rates[name]):7.0f} "
            f"{paired(rates[name], rates[base]):7.2f} "
            f"{statistics.median(d.requests / messages for d in runs):9.3f} "
            f"{statistics.median(d.server_cpu / messages * 1e6 for d in runs):11.0f}"
        )
    print(f"  paired CPU ratio to its loop, round by round (25 % / median / 75 %; <= {TARGET}):")
    for contender in contenders:
        name, base = contender.name, contender.baseline
        if name != base:
            ratios = [m / b for m, b in zip(cpu[name], cpu[base], strict=True)]
            low, mid, high = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
            under = sum(ratio <= TARGET for ratio in ratios)
            print(f"    {name:24} {low:.2f} / {mid:.2f} / {high:.2f}; {under} of {len(ratios)}")


def timed(args: argparse.Namespace) -> None:
    with target(args) as where:
        print(where.server.versions("sqsbatch", "boto3", "aioboto3", "moto"))
        print(f"bodies: {args.bodies}; {args.delay_ms:g} ms added to every request")
        for concurrency in args.concurrency:
            made = [CONTENDERS[n](where, concurrency) for n in contenders_for(args, concurrency)]
            drain_rounds(where, made, args)
            report(made, args.messages, concurrency)


def counted(args: argparse.Namespace, name: str, messages: int, concurrency: int) -> int:
    """Instructions retired by a child that warms `name` up on the stub, then drains."""
    argv = [sys.executable, __file__, "--child", name, "--messages", str(messages)]
    argv += ["--delay-ms", str(args.delay_ms), "--concurrency", str(concurrency)]
    argv += ["--warmup", str(args.warmup)]
    valgrind = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    done = subprocess.run(valgrind + argv, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"callgrind printed no count: {done.stderr[-300:]}")
    return int(found.group(1))


def child(args: argparse.Namespace) -> None:
    """One contender on the stub, in this process (under the parent's valgrind)."""
    stub = StubSqs(args.delay_ms / 1000)
    contender = CONTENDERS[args.child](Target(Server("stub", False, 0, "stub"), "stub", stub), 1)
    for queue, count in (("warm", args.warmup), ("timed", args.messages)):
        stub.create(queue, count)
        contender.measure(queue, count)
    contender.close()


def instructions(args: argparse.Namespace) -> None:
    """Instructions per message under callgrind: the slope between two drain sizes."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt install valgrind)")
    many, few = args.messages, args.messages // 10
    runs = [
        (n, m, c) for c in args.concurrency for n in contenders_for(args, c) for m in (few, many)
    ]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:  # counts do not mind company
        counts = dict(zip(runs, pool.map(lambda run: counted(args, *run), runs), strict=True))
    for concurrency in args.concurrency:
        print(f"max_concurrency {concurrency}, instructions per message (stub):")
        per = {
            n: (counts[n, many, concurrency] - counts[n, few, concurrency]) / (many - few)
            for n in contenders_for(args, concurrency)
        }
        for name, mine in per.items():
            base = CONTENDERS[name].baseline
            print(f"  {name:24} {mine:9,.0f}; over its loop {mine - per[base]:,.0f}")


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--server", choices=["moto", "lean", "stub"], default="moto", help="what is drained")
    add("--delay-ms", type=float, default=0.0, help="added to every request")
    add("--messages", type=int, help="messages per drain (1000; 10000 counted)")
    add("--rounds", type=int, default=5, help="timed drains per contender")
    add("--warmup", type=int, default=100, help="messages of the warm-up drain")
    add("--concurrency", type=int, nargs="+", default=[1, 4], help="the pollers' max_concurrency")
    add(
        "--bodies",
        choices=("foreign", "sqsbatch"),
        default="foreign",
        help="raw JSON, or sent by Producer",
    )
    add("--extra", choices=list(EXTRA), nargs="*", default=[], help="more hand loops")
    add("--instructions", action="store_true", help="count instructions under valgrind (stub)")
    add("--jobs", type=int, default=2, help="children at once (--instructions)")
    add("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.messages is None:
        args.messages = 10_000 if args.instructions else 1000
    if args.messages < 10 or args.rounds < 1 or args.jobs < 1:
        parser.error("--messages needs at least 10, --rounds and --jobs at least 1")
    if args.bodies == "sqsbatch" and args.server == "stub":
        parser.error("--bodies sqsbatch needs a server: the stub's bodies are its own")
    if args.instructions and "--concurrency" not in sys.argv:
        args.concurrency = [1]
    return args


def main() -> None:
    args = parse()
    logging.getLogger("sqsbatch").setLevel(logging.ERROR)  # "no RedrivePolicy": every queue
    if args.child:
        child(args)
        return
    instructions(args) if args.instructions else timed(args)
    print(f"\ncommand: {command()}")


if __name__ == "__main__":
    main()
