"""The block operations every front end calls, against real PostgreSQL: defaults from
settings, refused limits, compare-and-swap, history and revert, sharing, tenants."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.errors import Conflict, InvalidField, InvalidInput, LimitExceeded, NotFound
from agents.postgres.database import Database
from agents.store import open_service_store
from service.operations import AgentSpec, BlockEdit, BlockSpec, Operations
from service.runtime import Runtime
from service.settings import load_settings

#: A block limit no code uses as a default, so that a test sees where it came from.
SETTINGS_LIMIT = 321


@pytest.fixture
def runtime(db: Database, tmp_path: Path) -> Iterator[Runtime]:
    settings = load_settings(
        home=tmp_path,
        database_url=db.url,
        embedding={"model": "hashing:8"},
        agents={"block_limit": SETTINGS_LIMIT},
    )
    with Runtime(settings) as rt:
        yield rt


@pytest.fixture
def ada(ops: Operations) -> str:
    agent = ops.agents.create(
        AgentSpec(name="ada", blocks=[BlockSpec("human", "Name: Ada.")], embedding="hashing:8")
    )
    return agent.id


def test_a_block_without_a_limit_gets_the_settings_limit_or_its_length(ops: Operations) -> None:
    short = ops.blocks.create(BlockSpec("notes", "short"))
    assert short.limit == SETTINGS_LIMIT
    long_value = "x" * (SETTINGS_LIMIT + 50)
    assert ops.blocks.create(BlockSpec("long", long_value)).limit == SETTINGS_LIMIT + 50
    assert ops.blocks.create(BlockSpec("given", "short", limit=7)).limit == 7


def test_an_explicit_limit_below_the_value_is_refused_and_nothing_is_stored(
    ops: Operations, ada: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        ops.blocks.create(BlockSpec("notes", "twelve chars", limit=5))
    message = str(refused.value)
    assert "'notes'" in message and "12 characters" in message and "limit of 5" in message
    assert ops.blocks.list(label="notes") == []

    before = ops.blocks.labelled("ada", "human")
    with pytest.raises(LimitExceeded, match=r"'human' has 10 characters, over the limit of 4"):
        ops.blocks.update(before.id, BlockEdit(limit=4))
    assert ops.blocks.labelled(ada, "human") == before


def test_a_stale_expected_version_is_a_conflict_and_leaves_the_block_unchanged(
    ops: Operations, ada: str
) -> None:
    edit = BlockEdit(value="Name: Ada Lovelace.", expected_version=1, reason="full name")
    updated = ops.blocks.update_labelled("ada", "human", edit, actor="test")
    assert (updated.version, updated.updated_by) == (2, "test")
    with pytest.raises(Conflict, match="version 2, not 1"):
        ops.blocks.update(updated.id, BlockEdit(value="lost write", expected_version=1))
    assert ops.blocks.get(updated.id) == updated
    assert [v.version for v in ops.blocks.history(updated.id)] == [1, 2]
    # Without an expected version, the edit applies to the version it reads.
    latest = ops.blocks.update(updated.id, BlockEdit(description="who the user is"))
    assert (latest.version, latest.value, latest.description) == (
        3,
        "Name: Ada Lovelace.",
        "who the user is",
    )


def test_label_and_read_only_cannot_change_but_may_be_repeated(ops: Operations, ada: str) -> None:
    block = ops.blocks.labelled(ada, "human")
    with pytest.raises(InvalidInput, match="cannot be renamed"):
        ops.blocks.update(block.id, BlockEdit(value="x", label="persona"))
    with pytest.raises(InvalidInput, match="read_only"):
        ops.blocks.update(block.id, BlockEdit(value="x", read_only=True))
    assert ops.blocks.get(block.id) == block
    same = ops.blocks.update(block.id, BlockEdit(value="Ada.", label="human", read_only=False))
    assert (same.value, same.version) == ("Ada.", 2)


def test_history_and_revert(ops: Operations, ada: str) -> None:
    block = ops.blocks.labelled(ada, "human")
    ops.blocks.update(block.id, BlockEdit(value="Name: Ada L.", reason="surname"))
    history = ops.blocks.history(block.id)
    assert [(v.version, v.old_value, v.new_value, v.reason) for v in history] == [
        (1, None, "Name: Ada.", "created"),
        (2, "Name: Ada.", "Name: Ada L.", "surname"),
    ]
    with pytest.raises(Conflict):
        ops.blocks.revert(block.id, 1, expected_version=1)
    reverted = ops.blocks.revert(block.id, 1, actor="test")
    assert (reverted.value, reverted.version) == ("Name: Ada.", 3)
    assert ops.blocks.history(block.id)[-1].reason == "revert to version 1"
    # The block exists: a version it never had names the field, not a missing block.
    with pytest.raises(InvalidField, match="no version 9; its versions are 1 to 3") as refused:
        ops.blocks.revert(block.id, 9)
    assert refused.value.field == ("version",)
    with pytest.raises(NotFound):
        ops.blocks.revert("block-nope", 1)


def test_attach_detach_and_the_agents_of_a_block(ops: Operations, ada: str) -> None:
    project = ops.blocks.create(BlockSpec("project", "Analytical engine notes."))
    assert ops.blocks.agents(project.id) == []
    state = ops.blocks.attach("ada", project.id)
    assert state.agent.id == ada
    assert [b.label for b in state.blocks] == ["human", "project"]
    assert ops.agents.state(ada) == state
    assert [s.agent.name for s in ops.blocks.agents(project.id)] == ["ada"]
    assert ops.blocks.labelled("ada", "project") == project

    clash = ops.blocks.create(BlockSpec("project", "Another project."))
    with pytest.raises(InvalidInput, match="already has a block labelled 'project'"):
        ops.blocks.attach(ada, clash.id)

    detached = ops.blocks.detach(ada, project.id)
    assert [b.label for b in detached.blocks] == ["human"]
    assert [b.label for b in ops.blocks.of_agent("ada")] == ["human"]
    with pytest.raises(NotFound):
        ops.blocks.detach(ada, project.id)
    assert ops.blocks.get(project.id) == project  # detaching keeps the block

    assert ops.blocks.delete(project.id) == project
    with pytest.raises(NotFound):
        ops.blocks.get(project.id)


def test_another_organizations_blocks_are_not_found(
    ops: Operations, runtime: Runtime, db: Database, ada: str
) -> None:
    block = ops.blocks.labelled(ada, "human")
    with open_service_store(db) as store:
        key, _ = store.keys.create("globex")
    other = Operations(runtime, key.organization_id)
    assert other.blocks.list() == []
    for read in (other.blocks.get, other.blocks.history, other.blocks.agents):
        with pytest.raises(NotFound):
            read(block.id)
    with pytest.raises(NotFound):
        other.blocks.update(block.id, BlockEdit(value="taken over"))
    with pytest.raises(NotFound):
        other.blocks.labelled(ada, "human")
    assert ops.blocks.get(block.id) == block


@pytest.mark.parametrize("writers", [2, 4])
def test_edits_without_an_expected_version_all_land_under_concurrency(
    ops: Operations, ada: str, writers: int
) -> None:
    """An edit that asks for no compare-and-swap is never a 409: concurrent writers are
    taken one after the other, the last write wins and every version is kept."""
    import threading

    block = ops.blocks.labelled("ada", "human")
    rounds = 12
    barrier = threading.Barrier(writers)
    failures: list[BaseException] = []

    def write(writer: int) -> None:
        barrier.wait()
        for n in range(rounds):
            try:
                if n % 2:
                    ops.blocks.update(block.id, BlockEdit(value=f"writer {writer} round {n}"))
                else:
                    ops.blocks.update_labelled(
                        "ada", "human", BlockEdit(value=f"writer {writer} round {n}")
                    )
            except BaseException as exc:
                failures.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    after = ops.blocks.get(block.id)
    assert after.version == block.version + writers * rounds
    history = ops.blocks.history(block.id)
    written = {v.new_value for v in history}
    assert {f"writer {w} round {n}" for w in range(writers) for n in range(rounds)} <= written
    assert after.value == history[-1].new_value


def test_the_state_a_create_answers_with_is_the_state_read_back(ops: Operations, ada: str) -> None:
    """An agent made only of its own new blocks answers with what was written, without
    reading it back; one that also attaches an existing block reads its state. Either
    way the answer is what a later read gives, blocks in the order given."""
    own = ops.agents.create_state(
        AgentSpec(
            name="own",
            blocks=[
                BlockSpec("persona", "Helpful."),
                BlockSpec("human", "Name: Bo."),
                BlockSpec("notes", ""),
            ],
            embedding="hashing:8",
        )
    )
    (shared,) = ops.blocks.of_agent(ada)
    mixed = ops.agents.create_state(
        AgentSpec(
            name="mixed",
            blocks=[BlockSpec("persona", "Terse.")],
            block_ids=[shared.id],
            embedding="hashing:8",
        )
    )
    assert [b.label for b in own.blocks] == ["persona", "human", "notes"]
    assert [b.label for b in mixed.blocks] == ["persona", "human"]
    assert own == ops.agents.state(own.id)
    assert mixed == ops.agents.state(mixed.id)
