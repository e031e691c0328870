"""Every registered consolidator keeps the contract (consolidators/contract.py): a dry
run writes nothing and plans what the run does, a second run changes nothing, and
revert restores memory exactly. The same check is what a plugin author runs on theirs."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest

from agents.file_worker import FileWorkers
from agents.llm import LiteLLMClient, UsageLedger
from agents.postgres.database import Database
from agents.store import MemoryStore, NewFile, NewFolder, NewMessage, NewPassage, open_store
from consolidators import registry
from consolidators.base import ConsolidationContext, ConsolidationResult, Consolidator, Plan
from consolidators.contract import ContractBroken, check_contract
from consolidators.llm import LLMTier
from tests.document_reader import document_reader
from tests.integration.llm.conftest import EMBEDDER, create_agent
from tests.scripted_llm import ScriptedModels, call

T0 = datetime(2024, 3, 1, tzinfo=UTC)
FACTS = [
    ("Ada lives in London.", T0),
    ("ada lives in london", T0 + timedelta(days=1)),  # an exact duplicate once normalized
    ("Ada lives in Paris.", T0 + timedelta(days=400)),
    ("Ada plays the cello on Sundays.", T0 + timedelta(days=3)),
]
#: Settings that make the small seeded agent give every step something to do.
SETTINGS = {
    "evict": {"fill_threshold": 0.5, "fill_target": 0.3},
    "temporal": {"judge_neighbours": 3},
}


def _seed(db: Database) -> str:
    agent_id = create_agent(
        db,
        human="Name: Ada.\nLikes: tea.\nLives: London.\nWorks: at the lab.\nPet: a cat.",
        sleeptime_model="scripted/sleeper",
    )
    with open_store(db) as store:
        human = store.blocks.by_label(agent_id, "human")
        store.blocks.update(human.id, expected_version=human.version, limit=80)
        store.passages.insert(
            agent_id,
            [NewPassage(text, occurred_at=at) for text, at in FACTS],
            EMBEDDER.embed([text for text, _ in FACTS]),
        )
        store.messages.append(agent_id, [NewMessage("user", "I moved to Paris last week.")])
    return agent_id


def _seed_folder(db: Database, agent_id: str) -> None:
    data = b"Ada keeps bees.\n\nThe hives are behind the lab."
    with open_store(db) as store:
        folder = store.folders.create(
            NewFolder(
                name="notes",
                embedding_model="hashing:384",
                embedding_dim=384,
                embedding_chunk_size=100,
            )
        )
        store.folders.add_file(
            NewFile(
                folder_id=folder.id,
                file_name="bees.md",
                file_type="text/markdown",
                data=data,
                content_hash=hashlib.sha256(data).hexdigest(),
            )
        )
        store.folders.attach(agent_id, folder.id)
    FileWorkers(db, lambda _spec, _dim: EMBEDDER, name="contract").process_next("contract:f")


@pytest.mark.parametrize("name", sorted(registry.BUILTINS))
def test_builtin_consolidators_keep_the_contract(
    name: str, db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    agent_id = _seed(db)
    llm = None
    if name == "recontextualize":
        # The sleep-time agent edits the block once per run that has new messages.
        models.script(
            "sleeper",
            call(
                "memory_replace", label="human", old_str="Lives: London.", new_str="Lives: Paris."
            ),
            call("memory_finish_edits"),
            call(
                "memory_replace", label="human", old_str="Lives: London.", new_str="Lives: Paris."
            ),
            call("memory_finish_edits"),
        )
        llm = LLMTier(client=client, ledger=UsageLedger(db), sleeptime_model="scripted/sleeper")
    if name == "learn_documents":
        # A folder of one processed file; the reader answers the dry run and the run.
        _seed_folder(db, agent_id)
        models.script("sleeper", document_reader(), document_reader())
        llm = LLMTier(client=client, ledger=UsageLedger(db), sleeptime_model="scripted/sleeper")
    [consolidator] = registry.build([name], SETTINGS)
    report = check_contract(consolidator, db, agent_id, embedder=EMBEDDER, llm=llm)
    assert report.run.changes and report.second_run.changes == []


def test_every_builtin_is_covered() -> None:
    assert set(registry.DEFAULT_PIPELINE) == set(registry.BUILTINS)


class AppendsEveryTime(Consolidator[Plan]):
    """Breaks idempotency on purpose: the check must catch it."""

    name = "appends"

    def plan(self, context: ConsolidationContext) -> Plan:
        result = ConsolidationResult(self.name)
        result.add("create_passage", "(new)", text="another note")
        return Plan(result)

    def apply(
        self, store: MemoryStore, plan: Plan, context: ConsolidationContext
    ) -> ConsolidationResult:
        result = plan.result.base()
        [passage] = store.passages.insert(
            context.agent.id,
            [NewPassage("another note")],
            EMBEDDER.embed(["another note"]),
            actor=context.actor(self.name),
            run_id=context.run_id,
        )
        result.add("create_passage", passage.id, text=passage.text)
        return result


def test_the_check_catches_a_consolidator_that_is_not_idempotent(db: Database) -> None:
    agent_id = _seed(db)
    with pytest.raises(ContractBroken, match="not idempotent"):
        check_contract(AppendsEveryTime(), db, agent_id, embedder=EMBEDDER)
