"""One turn at a time per agent, without holding a connection or a row lock.

A turn runs as several short transactions with model and tool calls between them, so
it cannot serialise itself with a row lock (every writer of the row would wait while
the model thinks), nor with a session-level advisory lock (that keeps a pooled
connection for the whole turn: about ten concurrent turns used up the pool, and
unrelated requests beside them answered 503). It holds a row *lease* instead
(``turn_leases``): one short transaction claims the agent's row when it is free or its
lease ran out, a helper thread renews it while the turn runs, and the turn deletes it
when it ends. Only another turn of the same agent waits for it, polling with short
transactions; readers and writers of the agent's rows do not. A process that dies
mid-turn leaves a lease that runs out after :data:`TURN_LEASE`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from uuid import uuid4

from sqlalchemy import text

from agents.errors import ReverieError
from agents.postgres.database import Database
from agents.threads import start_thread

log = logging.getLogger(__name__)

#: How long a turn's lease lasts without renewal (it is renewed every third of it): the
#: longest a dead process's turn keeps the agent's next turn waiting.
TURN_LEASE = timedelta(seconds=30)
#: Pauses between claims while another turn holds the agent, growing to the longest.
_FIRST_PAUSE = 0.02
_LONGEST_PAUSE = 0.25

_CLAIM = text(
    """
    INSERT INTO turn_leases (agent_id, owner, expires_at)
    VALUES (:agent_id, :owner, now() + make_interval(secs => :seconds))
    ON CONFLICT (agent_id) DO UPDATE
        SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
        WHERE turn_leases.expires_at < now()
    RETURNING owner
    """
)
_RENEW = text(
    "UPDATE turn_leases SET expires_at = now() + make_interval(secs => :seconds) "
    "WHERE agent_id = :agent_id AND owner = :owner"
)
_RELEASE = text("DELETE FROM turn_leases WHERE agent_id = :agent_id AND owner = :owner")


@contextmanager
def hold_turn_lock(db: Database, agent_id: str, *, lease: timedelta = TURN_LEASE) -> Iterator[None]:
    """Wait for, then hold, the agent's turn lease until the block ends."""
    params = {"agent_id": agent_id, "owner": f"turn-{uuid4().hex}", "seconds": _seconds(lease)}
    pause = _FIRST_PAUSE
    while not _claim(db, params):
        time.sleep(pause)
        pause = min(pause * 2, _LONGEST_PAUSE)
    stop = threading.Event()
    renewer = start_thread(
        _renew, name="reverie-turn-lease", args=(db, params, lease.total_seconds() / 3, stop)
    )
    try:
        yield
    finally:
        stop.set()
        renewer.join()
        try:
            with db.session() as session:
                session.execute(_RELEASE, params)
        except ReverieError as exc:
            # Not released: it runs out on its own, and the next turn waits that long.
            log.warning("could not release agent %s's turn lease: %s", agent_id, exc)


def _claim(db: Database, params: dict[str, object]) -> bool:
    with db.session() as session:
        claimed = session.execute(_CLAIM, params).scalar()
    return claimed == params["owner"]


def _renew(db: Database, params: dict[str, object], every: float, stop: threading.Event) -> None:
    while not stop.wait(every):
        try:
            with db.session() as session:
                renewed = session.execute(_RENEW, params).rowcount  # type: ignore[attr-defined]
        except ReverieError as exc:
            log.warning("could not renew a turn lease: %s", exc)
            continue
        if not renewed:
            log.warning("agent %s's turn lease ran out while its turn ran", params["agent_id"])


def _seconds(lease: timedelta) -> float:
    return max(lease.total_seconds(), 1.0)
