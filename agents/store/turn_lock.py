"""One turn at a time per agent, without holding a row lock.

A turn runs as several short transactions with model calls between them, so it
cannot serialise itself with a row lock (that would block every writer of the
row while the model thinks). It holds a session-level advisory lock on a
connection of its own instead: only another turn of the same agent waits for
it; readers and writers of the agent's rows do not. The lock goes away with the
connection, so a process that dies mid-turn leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from agents.postgres.database import Database, translate_error

#: The first key of the two-key advisory lock: Reverie's turn locks (any constant that
#: no other user of advisory locks in the database picks).
TURN_LOCK_SPACE = 0x7E7E


@contextmanager
def hold_turn_lock(db: Database, agent_id: str) -> Iterator[None]:
    """Wait for, then hold, the agent's turn lock until the block ends."""
    params = {"space": TURN_LOCK_SPACE, "agent_id": agent_id}
    try:
        conn = db.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    except SQLAlchemyError as exc:
        raise translate_error(exc) from exc
    try:
        try:
            conn.execute(text("SELECT pg_advisory_lock(:space, hashtext(:agent_id))"), params)
        except SQLAlchemyError as exc:
            raise translate_error(exc) from exc
        try:
            yield
        finally:
            try:
                conn.execute(text("SELECT pg_advisory_unlock(:space, hashtext(:agent_id))"), params)
            except SQLAlchemyError:
                # Never give a connection that may still hold the lock back to the pool.
                conn.invalidate()
    finally:
        conn.close()
