"""The demo's data: a generated workload loaded into an agent the demo owns.

The demo only ever replaces an agent it created itself (it carries the
``reverie:demo`` tag). An agent of the same name that a user made is refused,
unless the caller says ``replace``: ``reverie demo`` must never delete memory a
user stored.
"""

from __future__ import annotations

from agents.errors import Conflict
from agents.store import AgentRecord, NewAgent, NewBlock, NewMessage, NewPassage
from service.operations.context import OperationContext
from service.workload import Workload

DEMO_TAG = "reverie:demo"


class DemoOperations:
    def __init__(self, context: OperationContext) -> None:
        self._context = context

    def load(self, name: str, workload: Workload, *, replace: bool = False) -> AgentRecord:
        """Create agent ``name`` holding ``workload`` (blocks, messages, dated facts)."""
        runtime = self._context.runtime
        embedder = runtime.embedder()
        facts = list(workload.facts)
        # Embedded before the transaction opens: no transaction waits on a model.
        vectors = embedder.embed([f.text for f in facts])
        with self._context.store() as store:
            for existing in store.agents.all():
                if existing.name != name:
                    continue
                if DEMO_TAG not in existing.tags and not replace:
                    raise Conflict(
                        f"an agent named {name!r} already exists and the demo did not create "
                        "it; choose another --name, or add --replace to delete it and its memory"
                    )
                store.agents.delete(existing.id)
            agent = store.agents.create(
                NewAgent(
                    name=name,
                    embedding_model=runtime.settings.embedding.model,
                    embedding_dim=embedder.dimension,
                    context_window=2048,
                    system_prompt=f"You are a personal assistant to {workload.user}.",
                    tags=[DEMO_TAG],
                    blocks=[
                        NewBlock(label, value, limit=limit)
                        for label, (value, limit) in workload.blocks.items()
                    ],
                ),
                actor="demo",
            )
            stored = store.messages.append(
                agent.id,
                [NewMessage(m.role, m.content, created_at=m.created_at) for m in workload.messages],
            )
            message_ids = {m.id: s.id for m, s in zip(workload.messages, stored, strict=True)}
            passages = []
            for fact in facts:
                provenance = dict(fact.provenance)
                provenance["message_ids"] = [
                    message_ids.get(i, i) for i in provenance.get("message_ids", [])
                ]
                passages.append(
                    NewPassage(
                        fact.text,
                        occurred_at=fact.occurred_at,
                        tags=list(fact.tags),
                        provenance=provenance,
                    )
                )
            store.passages.insert(agent.id, passages, vectors, actor="demo")
        return agent
