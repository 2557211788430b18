"""User-space CPU instructions per consumed message: the pollers against the hand-written loops.

    .venv/bin/python bench/poller_instructions.py [--messages 1000] [--rounds 8]

`bench/poller_cpu.py` times the same drains in CPU seconds; on this shared machine a contender's
median moves by 5-10 % from minute to minute, more than sqsbatch's own share of the work. The
number of instructions a process retires moves far less (the sync contenders' within about
0.5 % from run to run; the asyncio ones' 1-2 %, as how often the event loop polls before an
answer arrives depends on timing), so this bench counts them with Linux's `perf stat -e
instructions:u` (user space only: the kernel's socket work is left out): it needs the `perf`
binary, and says so when it is missing.
Instructions are not time (code that runs with cold caches between botocore's calls takes more
cycles per instruction than botocore's own), so this says how much work sqsbatch adds, and
poller_cpu.py what that work costs.

Each contender of poller_cpu.py (the pollers' own client `Config`, bench/_lean_sqs.py in a
process of its own) runs in a child process of its own under `perf stat`: imports, a client,
one warm-up drain of 200 messages, then `--rounds` drains of `--messages` each, every one from
a fresh queue filled by the child. A child that fills the same queues and drains none counts
what is not draining (imports, clients, fills, warm-up), and is subtracted from each. Printed:
instructions per message, and over and as a ratio to the loop of the same flavour.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable

import boto3
from _lean_sqs import lean_sqs
from _local import Server, command
from poller_cpu import (
    SERVER_LIFETIME_SECONDS,
    AsyncLoop,
    Contender,
    Loop,
    Tasks,
    Threads,
    ValidatingLoop,
    credentials,
    fill,
)

KINDS: dict[str, Callable[[Server, int], Contender]] = {
    "boto3 loop": Loop,
    "Consumer": Threads,
    "aioboto3 loop": AsyncLoop,
    "AsyncConsumer": Tasks,
    "loop, validating": ValidatingLoop,
}
IDLE = "fills only"
WARMUP = 200


def child(args: argparse.Namespace) -> None:
    """One contender's drains (or none, for `IDLE`), in this process, under the parent's perf."""
    server = Server(args.endpoint, False, args.server_pid, "lean")
    filler = boto3.session.Session().client("sqs", **credentials(server.endpoint))
    contender = KINDS[args.child if args.child != IDLE else "boto3 loop"](server, 1)
    stamp = uuid.uuid4().hex[:8]
    queues = [(f"bench-i-{stamp}-warm", WARMUP)]
    queues += [(f"bench-i-{stamp}-{n}", args.messages) for n in range(args.rounds)]
    for queue, count in queues:
        fill(filler, queue, count, "foreign")
        if args.child != IDLE or count == WARMUP:
            contender.measure(queue, count)
    contender.close()


def counted(name: str, server: Server, args: argparse.Namespace) -> int:
    """User-space instructions a child running `name` retired, all its threads."""
    argv = [sys.executable, __file__, "--child", name, "--endpoint", server.endpoint]
    argv += ["--server-pid", str(server.pid)]
    argv += ["--messages", str(args.messages), "--rounds", str(args.rounds)]
    perf = ["perf", "stat", "-x", ",", "-e", "instructions:u", "--"]
    done = subprocess.run(perf + argv, capture_output=True, text=True, check=True)
    for line in done.stderr.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[2].startswith("instructions"):
            return int(fields[0])
    raise RuntimeError(f"perf printed no instruction count: {done.stderr[-300:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000, help="messages per drain")
    parser.add_argument("--rounds", type=int, default=8, help="drains per contender")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--server-pid", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if shutil.which("perf") is None:
        raise SystemExit("bench/poller_instructions.py needs Linux's perf (apt install linux-perf)")
    with lean_sqs(SERVER_LIFETIME_SECONDS) as server:
        print(server.versions("sqsbatch", "boto3", "aioboto3"))
        idle = counted(IDLE, server, args)
        messages = args.messages * args.rounds
        per = {name: (counted(name, server, args) - idle) / messages for name in KINDS}
    print(f"\n{args.rounds} drains of {args.messages} messages each, max_concurrency 1")
    print(f"  {'':16} {'instructions/msg':>16} {'over its loop':>14} {'ratio':>6}")
    for name, mine in per.items():
        base = per["aioboto3 loop" if name == "AsyncConsumer" else "boto3 loop"]
        print(f"  {name:16} {mine:16,.0f} {mine - base:14,.0f} {mine / base:6.3f}")
    print(f"\ncommand: {command()}")


if __name__ == "__main__":
    main()
