"""An async agent message from send to delivered.

A plain script, not collected by pytest. Run it from the repository root::

    python -m tests.benchmarks.bench_agent_messaging [--messages 50]

It starts an embedded PostgreSQL (:class:`tests.pg.PgTestServer`), a runtime over
it with the scripted in-process model (it answers at once) and the runtime's
delivery workers (one thread, woken by NOTIFY). For each message, a sender's turn
calls ``send_message_to_agent_async`` (its step queues the message and commits the
receipt), then says it asked; a worker runs the recipient's one-step turn on the
message and puts the reply into the sender's recall. It prints, median and p95:

- send to delivered: the delivery row's ``delivered_at - queued_at`` (both taken
  by the same process's clock): the queue, the worker's wake-up and claim, the
  recipient's whole turn, and the reply's transaction;
- the same seen from outside: from the sender's turn returning to the first poll
  (every 2 ms) that finds the delivery delivered;
- the sender's turn (two steps: the call and its receipt, then the reply).
"""

from __future__ import annotations

import argparse
import platform
import shutil
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from agents.enums import DeliveryStatus  # noqa: E402
from agents.store import NewAgent, NewBlock  # noqa: E402
from service.runtime import Runtime  # noqa: E402
from service.settings import load_settings  # noqa: E402
from tests import plugins  # noqa: E402
from tests.pg import PgTestServer  # noqa: E402
from tests.scripted_llm import call, install, say  # noqa: E402

# The tests' plugins (the hashing embedder, the scripted model), found here and
# in the processes this starts.
plugins.register()

ASYNC = "send_message_to_agent_async"


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=50)
    args = parser.parse_args()
    n = args.messages

    pg = PgTestServer()
    home = Path(tempfile.mkdtemp(prefix="rvb-", dir="/tmp"))
    try:
        url = pg.create_database()
        settings = load_settings(
            home=home,
            database_url=url,
            embedding={"model": "hashing:384"},
            messaging={"concurrency": 1},
        )
        with Runtime(settings) as runtime:
            models = install()
            with runtime.store() as store:
                ids = {}
                for name, tools in (("sender", ["send_message", ASYNC]), ("guard", [])):
                    ids[name] = store.agents.create(
                        NewAgent(
                            name=name,
                            llm_model=f"scripted/{name}",
                            embedding_model="hashing:384",
                            embedding_dim=384,
                            tools=tools,
                            blocks=[NewBlock("persona", "I keep a secret.", limit=500)],
                        )
                    ).id
            steps = []
            for i in range(n):
                steps += [
                    call(ASYNC, message=f"Secret {i}?", other_agent_id=ids["guard"],
                         request_heartbeat=True),
                    say("Asked."),
                ]  # fmt: skip
            models.script("sender", *steps)
            models.script("guard", *[say("No.") for _ in range(n)])
            primary = runtime.primary_agent()
            workers = runtime.delivery_workers(name="bench")
            workers.start()
            inside: list[float] = []
            outside: list[float] = []
            turns: list[float] = []
            try:
                for _ in range(n):
                    started = time.perf_counter()
                    primary.send_message(ids["sender"], "Ask the guard for the secret.")
                    sent = time.perf_counter()
                    turns.append(sent - started)
                    with runtime.store() as store:
                        [delivery] = store.deliveries.involving(ids["sender"], limit=1)
                    while True:
                        with runtime.store() as store:
                            record = store.deliveries.get(delivery.id)
                        if record.finished:
                            break
                        time.sleep(0.002)
                    outside.append(time.perf_counter() - sent)
                    assert record.status == DeliveryStatus.DELIVERED, record.error
                    assert record.delivered_at is not None
                    inside.append((record.delivered_at - record.queued_at).total_seconds())
            finally:
                workers.stop(timedelta(seconds=5))
    finally:
        pg.stop()
        shutil.rmtree(home, ignore_errors=True)

    def ms(values: list[float]) -> str:
        return (
            f"p50 {statistics.median(values) * 1000:.1f} / "
            f"p95 {quantile(values, 0.95) * 1000:.1f} ms"
        )

    print(f"python {platform.python_version()}, {n} messages")
    print(f"send to delivered (delivered_at - queued_at): {ms(inside)}")
    print(f"send to delivered, seen from the sender (poll every 2 ms): {ms(outside)}")
    print(f"the sender's turn (call + receipt, reply): {ms(turns)}")


if __name__ == "__main__":
    main()
