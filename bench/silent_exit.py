"""How long `sqsbatch consume` (or `redrive run`) takes to exit once its endpoint goes silent.

    .venv/bin/python bench/silent_exit.py [--async] [--redrive] [--poll-seconds 20]
        [--margin 10] [--stall-seconds S]

A local SQS (moto) behind tests/support/silent_proxy.py's proxy, which accepts connections and
never answers once silenced. `consume` runs the console script on a handler that holds its
batch until told, so that the endpoint goes silent just before the batch's delete goes out
(the worst case: a settle caught by the silence); `--redrive` runs `redrive run` on a DLQ
instead (silenced while it long-polls). Printed: the seconds from the silence to the exit, the
exit code, the process's last stderr lines, and whether the message is back in its queue.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqsbatch import create_queue
from sqsbatch.dev.server import LOCAL_CREDENTIALS, LocalSqs
from tests.support.silent_proxy import silent_proxy

BIN = Path(sys.executable).parent
HANDLER = """
import os, time
def handle(batch):
    open(os.environ["HELD"], "w").close()
    while not os.path.exists(os.environ["RELEASE"]):
        time.sleep(0.05)
"""
ASYNC_HANDLER = """
import asyncio, os
async def handle(batch):
    open(os.environ["HELD"], "w").close()
    while not os.path.exists(os.environ["RELEASE"]):
        await asyncio.sleep(0.05)
"""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--async", dest="use_async", action="store_true")
    parser.add_argument("--redrive", action="store_true")
    parser.add_argument("--poll-seconds", type=int, default=20)
    parser.add_argument("--margin", type=float, default=10.0)
    parser.add_argument("--stall-seconds", type=float, default=None)
    args = parser.parse_args()
    with LocalSqs() as local, tempfile.TemporaryDirectory() as folder:
        client = local.client()
        name = f"silent-{uuid.uuid4().hex[:8]}"
        url = create_queue(name, dead_letter_queue=f"{name}-dlq", client=client)
        held, release = Path(folder, "held"), Path(folder, "release")
        with silent_proxy(local.endpoint_url) as proxy:
            env = {
                **os.environ,
                **LOCAL_CREDENTIALS,
                "AWS_ENDPOINT_URL_SQS": proxy.endpoint_url,
                "SQSBATCH_READ_TIMEOUT_MARGIN": str(args.margin),
                "HELD": str(held),
                "RELEASE": str(release),
            }
            if args.stall_seconds is not None:
                env["SQSBATCH_STALL_SECONDS"] = env["REDRIVE_STALL_SECONDS"] = str(
                    args.stall_seconds
                )
            if args.redrive:
                target = f"{name}-dlq"
                command = [str(BIN / "redrive"), "run", "--dlq", target, "--log-format", "plain"]
                queue_url = client.get_queue_url(QueueName=target)["QueueUrl"]
            else:
                Path(folder, "held_jobs.py").write_text(HANDLER)
                client.send_message(QueueUrl=url, MessageBody="caught")
                command = [str(BIN / "sqsbatch"), "consume", "held_jobs.py:handle", "--queue"]
                command += [name, "--poll-seconds", str(args.poll_seconds), "--log-format"]
                command += ["plain", *(["--async"] if args.use_async else [])]
                if args.use_async:
                    Path(folder, "held_jobs.py").write_text(ASYNC_HANDLER)
                queue_url = url
            process = subprocess.Popen(
                command, cwd=folder, env=env, stderr=subprocess.PIPE, text=True
            )
            if args.redrive:
                time.sleep(3)  # it has started and long-polls
            else:
                while not held.exists():
                    time.sleep(0.05)
            proxy.silence()
            silent_at = time.monotonic()
            release.touch()
            _, stderr = process.communicate(timeout=1800)
            took = time.monotonic() - silent_at
        print(f"exit {process.returncode} {took:.1f} s after the endpoint went silent")
        print("\n".join(stderr.strip().splitlines()[-4:]))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            attributes = client.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])
            visible = int(attributes["Attributes"]["ApproximateNumberOfMessages"])
            if visible or args.redrive:
                break
            time.sleep(0.5)
        print(f"messages visible in {queue_url.rsplit('/', 1)[-1]} afterwards: {visible}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
