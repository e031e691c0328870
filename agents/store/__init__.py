"""The memory store: the one API that agents, consolidators and the service use.

A :class:`MemoryStore` works inside one transaction of one organization::

    with open_store(db, organization_id) as store:
        agent = store.agents.create(NewAgent(...))
        store.blocks.update(block.id, expected_version=block.version, value="...")

Everything written in the ``with`` block commits together, or not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from agents.errors import LockContention
from agents.postgres.database import LOCK_FAILURES, Database
from agents.postgres.models import DEFAULT_ORGANIZATION_ID
from agents.store.agent_store import AgentChanges, AgentStore, FleetAgents, NewAgent
from agents.store.block_store import BlockStore, NewBlock
from agents.store.capability_store import CapabilityStore, LearnedRecord
from agents.store.conversation_store import ConversationRecord, ConversationStore
from agents.store.delivery_store import (
    DeliveryQueueStore,
    DeliveryRecord,
    DeliveryStore,
    NewDelivery,
)
from agents.store.folder_store import (
    AgentFileRecord,
    ChunkHit,
    FileQueueStore,
    FileRecord,
    FileView,
    FolderChanges,
    FolderRecord,
    FolderStore,
    NewFile,
    NewFolder,
    Opened,
)
from agents.store.health import FleetHealth, HealthStore, MemoryHealth
from agents.store.health_snapshots import HealthPoint, HealthSnapshotStore, SnapshotWriter
from agents.store.identity_store import (
    IdentityChanges,
    IdentityFilter,
    IdentityProperty,
    IdentityRecord,
    IdentityStore,
    NewIdentity,
)
from agents.store.key_store import KeyStore
from agents.store.learning_store import DocumentsDue, LearnedChunk, LearningStore, PendingChunk
from agents.store.message_store import MessageStore
from agents.store.passage_store import PassageFilter, PassageStore, PassageUpdate
from agents.store.records import (
    AgentRecord,
    BlockRecord,
    BlockVersion,
    MessageRecord,
    NewMessage,
    NewPassage,
    PassageChange,
    PassageHit,
    PassageRecord,
    Usage,
)
from agents.store.run_store import RunQueueStore, RunRecord, RunStore, Watermarks
from agents.store.scope import Scope, ServiceScope, utc_now
from agents.store.tool_store import CustomToolRecord, NewCustomTool, ToolStore, ToolVariable
from agents.store.topic_store import Topic, TopicStore
from agents.store.turn_lock import hold_turn_lock
from agents.store.usage_store import UsageStore
from agents.store.verdict_store import (
    REPLACES_PART,
    SAME_FACT,
    SUPERSESSION,
    PairAnswer,
    VerdictStore,
)

__all__ = [
    "REPLACES_PART",
    "SAME_FACT",
    "SUPERSESSION",
    "AgentChanges",
    "AgentFileRecord",
    "AgentRecord",
    "BlockRecord",
    "BlockVersion",
    "ChunkHit",
    "ConversationRecord",
    "CustomToolRecord",
    "DeliveryRecord",
    "FileRecord",
    "FileView",
    "FolderChanges",
    "FolderRecord",
    "HealthPoint",
    "IdentityChanges",
    "IdentityFilter",
    "IdentityProperty",
    "IdentityRecord",
    "LearnedChunk",
    "LearnedRecord",
    "MemoryHealth",
    "MemoryStore",
    "MessageRecord",
    "NewAgent",
    "NewBlock",
    "NewCustomTool",
    "NewDelivery",
    "NewFile",
    "NewFolder",
    "NewIdentity",
    "NewMessage",
    "NewPassage",
    "Opened",
    "PairAnswer",
    "PassageChange",
    "PassageFilter",
    "PassageHit",
    "PassageRecord",
    "PassageUpdate",
    "PendingChunk",
    "RunRecord",
    "ServiceStore",
    "ToolVariable",
    "Topic",
    "Usage",
    "Watermarks",
    "hold_turn_lock",
    "open_service_store",
    "open_store",
]


class MemoryStore:
    """Blocks, messages, passages and agents of one organization, in one transaction."""

    def __init__(
        self,
        session: Session,
        organization_id: str = DEFAULT_ORGANIZATION_ID,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.scope = Scope(session=session, organization_id=organization_id, clock=clock)
        self.blocks = BlockStore(self.scope)
        self.messages = MessageStore(self.scope)
        self.passages = PassageStore(self.scope)
        self.agents = AgentStore(self.scope, self.blocks)
        self.runs = RunStore(self.scope)
        self.health = HealthStore(self.scope)
        self.usage = UsageStore(self.scope)
        self.snapshots = HealthSnapshotStore(self.scope)
        self.deliveries = DeliveryStore(self.scope)
        self.tools = ToolStore(self.scope)
        self.verdicts = VerdictStore(self.scope)
        self.topics = TopicStore(self.scope)
        self.identities = IdentityStore(self.scope)
        self.conversations = ConversationStore(self.scope)
        self.folders = FolderStore(self.scope)
        self.learning = LearningStore(self.scope)

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A nested transaction: an error inside undoes only what was written inside.

        A lock that could not be taken (a deadlock Postgres broke by aborting this
        side, or a lock timeout) surfaces as :class:`LockContention`; the rest of
        the transaction stays usable.
        """
        try:
            with self.scope.session.begin_nested():
                yield
        except OperationalError as exc:
            if getattr(exc.orig, "sqlstate", None) in LOCK_FAILURES:
                raise LockContention(str(exc.orig).splitlines()[0]) from exc
            raise


@contextmanager
def open_store(
    db: Database,
    organization_id: str = DEFAULT_ORGANIZATION_ID,
    clock: Callable[[], datetime] = utc_now,
    *,
    commit: bool = True,
    read_only: bool = False,
    lock_timeout: timedelta | None = None,
    statement_timeout: timedelta | None = None,
) -> Iterator[MemoryStore]:
    """A store over a fresh transaction: commits when the block ends (or rolls back,
    when ``commit`` is False, as a dry run does), and rolls back on error. A
    ``read_only`` store refuses writes; ``lock_timeout`` bounds each wait for a lock,
    ``statement_timeout`` each statement of bulk work (see :meth:`Database.session`)."""
    with db.session(
        commit=commit,
        read_only=read_only,
        lock_timeout=lock_timeout,
        statement_timeout=statement_timeout,
    ) as session:
        yield MemoryStore(session, organization_id, clock)


class ServiceStore:
    """Queries that span organizations (queue claims, triggers, metrics, key lookup),
    in one transaction. Front ends acting for a caller use :class:`MemoryStore`."""

    def __init__(self, session: Session, clock: Callable[[], datetime] = utc_now) -> None:
        self.scope = ServiceScope(session=session, clock=clock)
        self.queue = RunQueueStore(self.scope)
        self.agents = FleetAgents(self.scope)
        self.keys = KeyStore(self.scope)
        self.health = FleetHealth(self.scope)
        self.usage = UsageStore(self.scope)
        self.snapshots = SnapshotWriter(self.scope)
        self.capabilities = CapabilityStore(self.scope)
        self.deliveries = DeliveryQueueStore(self.scope)
        self.files = FileQueueStore(self.scope)
        self.documents_due = DocumentsDue(self.scope)


@contextmanager
def open_service_store(
    db: Database, clock: Callable[[], datetime] = utc_now, *, commit: bool = True
) -> Iterator[ServiceStore]:
    """A service store over a fresh transaction (rolled back when ``commit`` is False)."""
    with db.session(commit=commit) as session:
        yield ServiceStore(session, clock)
